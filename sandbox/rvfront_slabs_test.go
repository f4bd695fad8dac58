package sandbox

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/internal/testtier"
)

// TestRvfrontPooledTreesUnderConcurrentChecks: goroutines check and run different plans at
// once, each in its own order, so that every tree is cut from slabs another goroutine's tree
// left; each check gives what a check with new slabs gives (diagnostics, rewrites, compiled
// bytes), each run ends as the run of the freshly parsed program, and once all are done every
// compiled program still encodes to the same bytes (none kept a node of its tree). Run it with
// -race: a slab two trees shared would be a data race.
func TestRvfrontPooledTreesUnderConcurrentChecks(t *testing.T) {
	pooled, st := inventoryEnv(t)
	fresh := *pooled
	pooled.checks, fresh.checks = nil, nil // every check parses
	fresh.freshTrees = true
	corpus := parseCorpus(t)
	var names []string
	for _, name := range slices.Sorted(maps.Keys(corpus)) {
		if len(corpus[name]) <= 64<<10 {
			names = append(names, name)
		}
	}
	if every := testtier.Size(4, 1); every > 1 { // the normal tier checks a quarter of them
		var some []string
		for i := 0; i < len(names); i += every {
			some = append(some, names[i])
		}
		names = some
	}
	encode := func(c Checked) []byte {
		if c.Program == nil {
			return nil
		}
		var buf bytes.Buffer
		require.NoError(t, c.Program.prog.Write(&buf))
		return buf.Bytes()
	}
	limits := Limits{MaxSteps: 100_000, MaxMemory: 16 << 20, Timeout: time.Minute}
	now := time.Date(2026, 11, 21, 10, 30, 0, 0, time.UTC)
	runOf := func(e *Env, p *Program) *Result {
		req := Request{Limits: limits, Inputs: map[string]any{"user_request": "two pairs"}, Now: now, View: st.Stage()}
		res := e.RunProgram(t.Context(), p, req)
		res.Duration, res.Phases = 0, Phases{}
		return res
	}
	type want struct {
		c     Checked
		bytes []byte
		run   *Result // nil: not compared
	}
	wants := make([]want, len(names))
	for i, name := range names {
		c := fresh.CheckProgram(corpus[name], Limits{})
		wants[i] = want{c: c, bytes: encode(c)}
		if c.Program != nil && !strings.Contains(name, "adversarial") {
			wants[i].run = runOf(&fresh, c.Program)
		}
	}

	const goroutines = 4
	rounds := testtier.Size(2, 6)
	var mu sync.Mutex
	var problems []string
	kept := make([][]Checked, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for range rounds {
				for _, i := range rng.Perm(len(names)) {
					w := wants[i]
					c := pooled.CheckProgram(corpus[names[i]], Limits{})
					var problem string
					switch {
					case !reflect.DeepEqual(w.c.Diagnostics, c.Diagnostics):
						problem = fmt.Sprintf("diagnostics %v, want %v", c.Diagnostics, w.c.Diagnostics)
					case !reflect.DeepEqual(w.c.Rewrites, c.Rewrites):
						problem = "rewrites differ"
					case !bytes.Equal(w.bytes, encode(c)):
						problem = "compiled bytes differ"
					case w.run != nil:
						got := runOf(pooled, c.Program)
						if got.Limit == LimitMemory || w.run.Limit == LimitMemory {
							break // where a run is stopped for its memory depends on the heap
						}
						if !reflect.DeepEqual(w.run, got) {
							problem = fmt.Sprintf("run %+v, want %+v", got, w.run)
						}
					}
					if c.Program != nil {
						kept[g] = append(kept[g], c)
					}
					if problem != "" {
						mu.Lock()
						problems = append(problems, names[i]+": "+problem)
						mu.Unlock()
					}
				}
			}
		})
	}
	wg.Wait()
	require.Empty(t, problems)
	n := 0
	for _, cs := range kept {
		for _, c := range cs {
			i := slices.IndexFunc(wants, func(w want) bool { return w.c.Program != nil && w.c.Program.Source == c.Program.Source })
			require.GreaterOrEqual(t, i, 0)
			require.Equal(t, wants[i].bytes, encode(c), "%s, after every other program's parse", names[i])
			n++
		}
	}
	require.Greater(t, n, 50, "too few programs compiled")
	t.Logf("%d programs, %d checks kept and compared", len(names), n)
}

// FuzzRvfrontPooledCheck: a check whose tree is cut from the slabs the previous input's tree
// left gives what a check with new slabs gives: the same diagnostics, rewrites and compiled
// bytes, and so does the previous input's program still.
func FuzzRvfrontPooledCheck(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Add("x = [a.b(c[d], {e: f}) for a in g if h + i]\ny = j(k=l, *m, **n)\n")
	pooled := testEnv()
	fresh := *pooled
	pooled.checks, fresh.checks = nil, nil
	fresh.freshTrees = true
	encode := func(t *testing.T, c Checked) []byte {
		if c.Program == nil {
			return nil
		}
		var buf bytes.Buffer
		require.NoError(t, c.Program.prog.Write(&buf))
		return buf.Bytes()
	}
	var prev Checked
	var prevBytes []byte
	f.Fuzz(func(t *testing.T, src string) {
		a, b := pooled.CheckProgram(src, Limits{}), fresh.CheckProgram(src, Limits{})
		require.Equal(t, b.Diagnostics, a.Diagnostics)
		require.Equal(t, b.Rewrites, a.Rewrites)
		require.Equal(t, encode(t, b), encode(t, a))
		require.Equal(t, prevBytes, encode(t, prev), "the previous input's program changed")
		prev, prevBytes = a, encode(t, a)
	})
}
