package builtins

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.starlark.net/starlark"
)

func TestTranslateRegexp(t *testing.T) {
	for _, c := range []struct {
		py    string
		flags int
		want  string
	}{
		{`\d+`, 0, `[\p{Nd}]+`},
		{`\d+`, reASCII, `[0-9]+`},
		{`\W`, 0, `[^\p{L}\p{N}_]`},
		{`(?i)ab`, 0, `(?i)ab`},
		{`ab`, reIgnoreCase | reMultiline | reDotAll, `(?ims)ab`},
		{`ab\Z`, 0, `ab\z`},
		{`\u00e9\x41\0`, 0, `\x{e9}\x{41}\x{0}`},
		{`a{,3}`, 0, `a{0,3}`},
		{`a{}b{x}`, 0, `a\{}b\{x}`},
		{`(?P<y>\d)(?:x)(?#note)`, 0, `(?P<y>[\p{Nd}])(?:x)`},
		{` a b # comment`, reVerbose, `ab`},
		{`[\]a-c\d^]`, reASCII, `[\]a-c0-9\^]`},
		{`\.\-\ `, 0, `\.\-\ `},
	} {
		got, _, err := translateRegexp(c.py, c.flags)
		if assert.NoError(t, err, c.py) {
			assert.Equal(t, c.want, got, c.py)
			_, err := regexp.Compile(got)
			assert.NoError(t, err, c.py)
		}
	}
}

func TestUnsupportedRegexIsExplained(t *testing.T) {
	for py, construct := range map[string]string{
		`a(?=b)`:         "lookahead (?=...)",
		`a(?!b)`:         "negative lookahead (?!...)",
		`(?<=a)b`:        "lookbehind (?<=...)",
		`(?<!a)b`:        "negative lookbehind (?<!...)",
		`(a)\1`:          `backreference \1`,
		`(?P<n>a)(?P=n)`: "backreference (?P=name)",
		`a++`:            "possessive quantifier ++",
		`a{2}+`:          "possessive quantifier {2}+",
		`(?>ab)`:         "atomic group (?>...)",
		`(a)?(?(1)b)`:    "conditional group (?(...)...)",
	} {
		_, err := compilePattern(py, 0)
		var ue *UnsupportedRegexError
		if assert.True(t, errors.As(err, &ue), "%s: %v", py, err) {
			assert.Equal(t, construct, ue.Construct, py)
			assert.Contains(t, err.Error(), "linear time", py)
		}
	}
}

func TestPatternLengthLimit(t *testing.T) {
	_, err := compilePattern(strings.Repeat("a", MaxPatternBytes), 0)
	require.NoError(t, err)
	_, err = compilePattern(strings.Repeat("a", MaxPatternBytes+1), 0)
	assert.ErrorContains(t, err, "over the limit of 10240")
}

// TestReChargesResults: the result of findall, split and sub grows with the number of matches,
// which the pattern, not the input size, decides; each is charged against the budget.
func TestReChargesResults(t *testing.T) {
	thread := new(starlark.Thread)
	SetBudget(thread, NewBudget(1<<20))
	re := newReModule()
	s := starlark.String(strings.Repeat("a", 250_000))
	for _, c := range []struct {
		fn   string
		args starlark.Tuple
	}{
		{"findall", starlark.Tuple{starlark.String(""), s}}, // 250,001 empty matches
		{"split", starlark.Tuple{starlark.String(""), s}},   // as many pieces
		// 16 MB: a long replacement passes CheckThreshold (1 MiB, below which nothing is
		// checked) after 16,384 matches, where 8 bytes took 131,072.
		{"sub", starlark.Tuple{starlark.String("a"), starlark.String(strings.Repeat("b", 64)), s}},
		{"finditer", starlark.Tuple{starlark.String("a"), s}},
	} {
		fn, _ := re.Attr(c.fn)
		_, err := starlark.Call(thread, fn, c.args, nil)
		var me *MemoryError
		if assert.True(t, errors.As(err, &me), "%s: %v", c.fn, err) {
			assert.Contains(t, me.Op, "re.", c.fn)
		}
	}
	// Under the budget the same calls work.
	small := starlark.String(strings.Repeat("a", 1000))
	fn, _ := re.Attr("sub")
	v, err := starlark.Call(thread, fn, starlark.Tuple{starlark.String("a"), starlark.String("bb"), small}, nil)
	require.NoError(t, err)
	assert.Len(t, string(v.(starlark.String)), 2000)
}

func TestPatternCache(t *testing.T) {
	p1, err := compilePattern(`cache-(\d+)`, 0)
	require.NoError(t, err)
	p2, err := compilePattern(`cache-(\d+)`, 0)
	require.NoError(t, err)
	assert.Same(t, p1, p2)
	p3, err := compilePattern(`cache-(\d+)`, reIgnoreCase)
	require.NoError(t, err)
	assert.NotSame(t, p1, p3)
	for i := range 2 * rePatternCacheSize {
		_, err := compilePattern(fmt.Sprintf("fill-%d", i), 0)
		require.NoError(t, err)
	}
	reCache.Lock()
	n, m := reCache.order.Len(), len(reCache.byKey)
	reCache.Unlock()
	assert.Equal(t, rePatternCacheSize, n)
	assert.Equal(t, rePatternCacheSize, m)
}

func FuzzRegexpTranslation(f *testing.F) {
	for _, s := range []string{`\d+`, `(?P<a>x)|[^\W\d]`, `a{,3}?`, `(?=x)`, `[\u00e9-\uffff]`, `\`, `[`, `(?`, `\x4`, `(?i:a)(?x) b`} {
		f.Add(s, "a1 é\nb")
	}
	f.Fuzz(func(t *testing.T, pattern, s string) {
		for _, flags := range []int{0, reIgnoreCase | reMultiline, reASCII | reVerbose} {
			p, err := compilePattern(pattern, flags)
			if err != nil {
				continue
			}
			thread := new(starlark.Thread)
			if _, err := p.findAll(thread, s, s, 0, false); err != nil {
				t.Fatal(err)
			}
			if _, err := p.sub(thread, starlark.String(`<\g<0>>`), s, 0, false); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func BenchmarkReSearchCached(b *testing.B) {
	re := newReModule()
	search, _ := re.Attr("search")
	thread := new(starlark.Thread)
	args := starlark.Tuple{starlark.String(`(\d{4})-(\d\d)-(\d\d)`), starlark.String("order shipped on 2024-05-17 to Berlin")}
	for b.Loop() {
		if m, err := starlark.Call(thread, search, args, nil); err != nil || m == starlark.None {
			b.Fatal(m, err)
		}
	}
}
