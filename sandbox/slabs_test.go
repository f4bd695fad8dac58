package sandbox

import (
	"bytes"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPooledTreesMatchFreshOnes: a check whose tree is cut from slabs an earlier tree left gives
// what a check with new slabs gives (diagnostics, rewrites, compiled bytes), and a compiled
// program keeps nothing of its tree: after every other program of the tests has been parsed
// into the same slabs, each still encodes to the same bytes and runs to the same result.
func TestPooledTreesMatchFreshOnes(t *testing.T) {
	pooled, st := inventoryEnv(t)
	fresh := *pooled
	pooled.checks, fresh.checks = nil, nil // every check parses
	fresh.freshTrees = true
	corpus := parseCorpus(t)
	names := slices.Sorted(maps.Keys(corpus))
	type checkedPair struct {
		name string
		a, b Checked
	}
	var kept []checkedPair
	encode := func(c Checked) []byte {
		if c.Program == nil {
			return nil
		}
		var buf bytes.Buffer
		require.NoError(t, c.Program.prog.Write(&buf))
		return buf.Bytes()
	}
	for _, name := range names {
		src := corpus[name]
		if len(src) > 64<<10 {
			continue
		}
		a, b := pooled.CheckProgram(src, Limits{}), fresh.CheckProgram(src, Limits{})
		require.Equal(t, b.Diagnostics, a.Diagnostics, name)
		require.Equal(t, b.Rewrites, a.Rewrites, name)
		require.Equal(t, encode(b), encode(a), name)
		if a.Program != nil {
			kept = append(kept, checkedPair{name, a, b})
		}
	}
	require.Greater(t, len(kept), 100, "too few programs checked")
	for _, k := range kept {
		require.Equal(t, encode(k.b), encode(k.a), "%s, after the other programs' parses", k.name)
	}
	ran := 0
	for _, k := range kept {
		if strings.Contains(k.name, "adversarial") {
			continue
		}
		limits := Limits{MaxSteps: 100_000, MaxMemory: 16 << 20}
		req := Request{Limits: limits, Inputs: map[string]any{"user_request": "two pairs"}, Now: time.Date(2026, 11, 21, 10, 30, 0, 0, time.UTC)}
		req.View = st.Stage()
		ra := pooled.RunProgram(t.Context(), k.a.Program, req)
		req.View = st.Stage()
		rb := fresh.RunProgram(t.Context(), k.b.Program, req)
		if ra.Limit == LimitMemory || rb.Limit == LimitMemory {
			continue // where a run is stopped for its memory depends on the heap
		}
		require.Equal(t, rb.Outcome, ra.Outcome, k.name)
		require.Equal(t, rb.Diagnostics, ra.Diagnostics, k.name)
		require.Equal(t, rb.Globals, ra.Globals, k.name)
		ran++
	}
	t.Logf("%d programs compared, %d run", len(kept), ran)
}
