package sandbox

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
	"golang.org/x/tools/txtar"

	"github.com/starplan/starplan/internal/testtier"
	"github.com/starplan/starplan/sandbox/pycompat"
)

// parseCorpus is every program text in the repository's tests: the .star files, the files of
// the scenarios (replies, helpers), the fuzz seeds and corpora, each also as pycompat rewrites it
// (what the parser is given for a plan).
func parseCorpus(t *testing.T) map[string]string {
	t.Helper()
	corpus := map[string]string{}
	add := func(name, text string) {
		corpus[name] = text
		if program, ds := Extract(text); len(ds) == 0 {
			corpus[name+" (extracted)"] = program
			if tr := pycompat.Translate(program, pycompat.Options{Modules: map[string][]string{"math": {"floor", "sqrt"}, "json": {"dumps"}}}); tr.Source != program {
				corpus[name+" (rewritten)"] = tr.Source
			}
		}
	}
	require.NoError(t, filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch {
		case strings.HasSuffix(path, ".star"):
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			add(path, string(b))
		case strings.HasSuffix(path, ".txtar"):
			ar, err := txtar.ParseFile(path)
			require.NoError(t, err)
			for _, f := range ar.Files {
				add(path+":"+f.Name, string(f.Data))
			}
		case strings.Contains(path, "testdata/fuzz/"):
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			for i, line := range strings.Split(string(b), "\n") {
				if s, ok := strings.CutPrefix(line, "string("); ok {
					if v, err := strconv.Unquote(strings.TrimSuffix(s, ")")); err == nil {
						add(path+":"+strconv.Itoa(i), v)
					}
				}
			}
		}
		return nil
	}))
	for i, s := range fuzzSeeds {
		add("fuzz seed "+strconv.Itoa(i), s)
	}
	return corpus
}

// sameParse checks that fastParse, when it takes src, returns the tree go.starlark.net's parser
// returns, which compiles to the same bytes; it reports whether fastParse took src.
func sameParse(t *testing.T, name, src string) bool {
	fast, fl, ok := fastParse(planFile, src)
	slow, err := fileOptions.Parse(planFile, src, 0)
	if !ok {
		return false
	}
	// Unless fastParse asks for lex, lex finds the same depth and no Python-ism.
	if lx := lex(src); !fl.needLex {
		assert.Equal(t, lx.maxDepth, fl.maxDepth, "%s: nesting depth:\n%s", name, src)
		assert.Empty(t, findPythonisms(lx.tokens), "%s: a Python-ism fastParse does not flag", name)
	}
	if !assert.NoError(t, err, "%s: fastParse accepted a text go.starlark.net rejects:\n%s", name, src) {
		return true
	}
	if !assert.True(t, reflect.DeepEqual(fast, slow), "%s: the trees differ:\n%s", name, src) {
		return true
	}
	all := func(string) bool { return true }
	p1, err1 := starlark.FileProgram(fast, all)
	p2, err2 := starlark.FileProgram(slow, all)
	if err1 != nil || err2 != nil {
		assert.Equal(t, err2, err1, name)
		return true
	}
	var b1, b2 bytes.Buffer
	require.NoError(t, p1.Write(&b1))
	require.NoError(t, p2.Write(&b2))
	assert.True(t, bytes.Equal(b1.Bytes(), b2.Bytes()), "%s: the compiled programs differ", name)
	return true
}

// TestFastParseMatchesParse: on every program of the test corpus fastParse either declines or
// gives go.starlark.net's tree, compiled to the same bytes; so does every text one edit away
// (a byte deleted, a character inserted), which is mostly a program with an error that
// fastParse must decline. The examples, the benchmark plans and the domains' files take the fast
// path (else it would be measured but never used).
func TestFastParseMatchesParse(t *testing.T) {
	corpus := parseCorpus(t)
	require.Greater(t, len(corpus), 200)
	taken := 0
	for name, src := range corpus {
		if sameParse(t, name, src) {
			taken++
		}
		plan := (strings.Contains(name, "testdata/examples/") || strings.Contains(name, "testdata/bench/")) && strings.HasSuffix(name, "(rewritten)")
		helpers := strings.Contains(name, "domains/") && strings.HasSuffix(name, ".star")
		if plan || helpers {
			_, fl, ok := fastParse(planFile, src)
			assert.True(t, ok && (helpers || !fl.needLex), "%s takes the fast path", name)
		}
	}
	t.Logf("fastParse took %d of %d texts", taken, len(corpus))

	// One edit away, at every position of the texts up to 4 KiB in the long tier, at every 127th
	// in the normal one.
	step := testtier.Size(127, 1)
	inserts := []string{"(", ")", "]", ":", ",", "=", " ", "\n", "  ", "not ", "==", "<", "if ", "else", "*", "**", "lambda", "'", "\"\"\"", "\\", "\t", "\r", "1", ".", "é"}
	edited, editTaken := 0, 0
	for name, src := range corpus {
		if len(src) > 4<<10 {
			continue
		}
		for i := 0; i < len(src); i += step {
			variants := []string{src[:i] + src[i+1:], src[:i] + inserts[(i/step)%len(inserts)] + src[i:]}
			for _, v := range variants {
				edited++
				if sameParse(t, name+" edited at "+strconv.Itoa(i), v) {
					editTaken++
				}
			}
		}
	}
	t.Logf("fastParse took %d of %d edited texts", editTaken, edited)
}

// FuzzFastParse: on any text, fastParse declines or agrees with go.starlark.net's parser.
func FuzzFastParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Add("x = [a for a in b if not a in c]\ny = a if b else -c[1:2:3]\n")
	f.Add("def f(a, b=1, *c, **d):\n    return lambda x: x.y(*a, **b)\n")
	f.Add("assert(x)\ny = lambda **kw: 1\nif x:\n    z = [(1,\n  2)]\n")
	for _, s := range fastParseEdges {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) { sameParse(t, "fuzz", src) })
}

// TestWalkTreeMatchesWalk: walkTree visits the nodes syntax.Walk visits, in the same order.
func TestWalkTreeMatchesWalk(t *testing.T) {
	for name, src := range parseCorpus(t) {
		f, err := fileOptions.Parse(planFile, src, 0)
		if err != nil {
			continue
		}
		var want, got []syntax.Node
		syntax.Walk(f, func(n syntax.Node) bool {
			if n != nil {
				want = append(want, n)
			}
			return true
		})
		walkTree(f, func(n syntax.Node) { got = append(got, n) })
		assert.Equal(t, want, got, name)
	}
}
