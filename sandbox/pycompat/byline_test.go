package pycompat

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/tools/txtar"

	"github.com/starplan/starplan/internal/testtier"
)

// byLineCorpus is every program text of the repository's tests (.star files, the files of the
// scenarios, fuzz corpora) and this package's own cases and seeds.
func byLineCorpus(t *testing.T) []string {
	t.Helper()
	var corpus []string
	require.NoError(t, filepath.WalkDir("../..", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch {
		case strings.HasSuffix(path, ".star"):
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			corpus = append(corpus, string(b))
		case strings.HasSuffix(path, ".txtar"):
			ar, err := txtar.ParseFile(path)
			require.NoError(t, err)
			for _, f := range ar.Files {
				corpus = append(corpus, string(f.Data))
			}
		case strings.Contains(path, "testdata/fuzz/"):
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			for _, line := range strings.Split(string(b), "\n") {
				if s, ok := strings.CutPrefix(line, "string("); ok {
					if v, err := strconv.Unquote(strings.TrimSuffix(s, ")")); err == nil {
						corpus = append(corpus, v)
					}
				}
			}
		}
		return nil
	}))
	corpus = append(corpus, fuzzSeeds...)
	corpus = append(corpus, plainPlan, labPlan)
	for _, c := range translateCases {
		corpus = append(corpus, c.in)
	}
	return corpus
}

// byLineEdits are inserted into the corpus's texts: each starts, ends or extends what the
// line-by-line render keys on (line ends, brackets, strings, comments, continuations) or is a
// construct a rule rewrites or refuses.
var byLineEdits = []string{
	"\n", "(", ")", "[", "]", "{", "}", `"`, "'", `'''`, `"""`, "#", "\\\n", ";", ":",
	`f"{x:.2f}"`, `f'{a!r}'`, " is None", " is not ", " < y <= ", " == ", " for x in y",
	`"%5.1f" % `, `"{:>3}".format`, "\nimport math\n", "\nfrom math import floor\n", "import os",
	"\r", "f", "1if", "x(", "\n    ",
}

// TestTranslateByLineMatchesFull: rendering only the lines the pre-scan flags (Translate)
// gives the very result of rendering every token (the reference), on the corpus and on
// variants of it with one edit: a byte dropped, or one of byLineEdits inserted.
func TestTranslateByLineMatchesFull(t *testing.T) {
	same := func(src string) {
		t.Helper()
		got, want := translate(src, testOpts, true), translate(src, testOpts, false)
		require.Equal(t, want, got, "input: %q", src)
	}
	corpus := byLineCorpus(t)
	require.Greater(t, len(corpus), 200, "the corpus was not found")
	// Positions tried per text: every one in the long tier, a spread in the normal one.
	positions := testtier.Size(2, 64)
	n := 0
	for _, src := range corpus {
		same(src)
		step := max(1, len(src)/positions)
		for i := 0; i <= len(src); i += step {
			if i < len(src) {
				same(src[:i] + src[i+1:])
			}
			for _, e := range byLineEdits {
				same(src[:i] + e + src[i:])
				n++
			}
		}
	}
	t.Logf("%d texts, %d variants", len(corpus), n)
}

// TestPrescanReadsErrorBytesAsTheTokenizer: a byte that is no operator and the UTF-8
// continuation bytes after it are one error token, so a continuation byte there starts no name
// that would hide an f-string's prefix from the pre-scan.
func TestPrescanReadsErrorBytesAsTheTokenizer(t *testing.T) {
	for _, src := range []string{"$\x80f''", "x = \\\x80f'{a}'", "?\x80\x80f\"{b:>3}\""} {
		require.True(t, mayNeedRewrite(src), "%q", src)
		require.NotEmpty(t, Translate(src, testOpts).Rewrites, "%q", src)
	}
}
