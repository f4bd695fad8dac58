package sandbox

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/internal/testtier"
)

func TestExtract(t *testing.T) {
	tests := []struct {
		name, reply, want string
	}{
		{"tags", "Here is the plan:\n<execute_python>\nx = 1\nSTATUS = \"success\"\n</execute_python>\nDone.", "x = 1\nSTATUS = \"success\"\n"},
		{"tags any case", "<EXECUTE_PYTHON>x = 1</Execute_Python>", "x = 1\n"},
		{"fence inside tags", "<execute_python>\n```python\nx = 1\n```\n</execute_python>", "x = 1\n"},
		{"python fence", "Sure.\n```python\nx = 1\n```\n", "x = 1\n"},
		{"starlark fence", "```starlark\nx = 1\n```", "x = 1\n"},
		{"bare fence", "```\nx = 1\n```", "x = 1\n"},
		{"python fence wins over output sample", "```python\nx = 1\n```\nOutput:\n```\n1\n```", "x = 1\n"},
		{"json fence ignored", "```json\n{\"a\": 1}\n```\n```python\nx = 1\n```", "x = 1\n"},
		{"bare program", "x = 1\nprint(x)\n", "x = 1\nprint(x)\n"},
		{"crlf", "<execute_python>\r\nx = 1\r\ny = 2\r\n</execute_python>", "x = 1\ny = 2\n"},
		{"indented block dedented", "<execute_python>\n    x = 1\n    if x:\n        y = 2\n</execute_python>", "x = 1\nif x:\n    y = 2\n"},
		{"duplicate identical blocks", "<execute_python>x = 1</execute_python> again <execute_python>x = 1</execute_python>", "x = 1\n"},
		{"unclosed tag runs to the end", "<execute_python>\nx = 1\n", "x = 1\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ds := Extract(tt.reply)
			require.Empty(t, ds)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestExtractRejects(t *testing.T) {
	tests := []struct {
		name, reply, code string
	}{
		{"empty", "   \n", CodeNoProgram},
		{"prose", "I'm sorry, I cannot help with that request.", CodeNoProgram},
		{"empty tags", "<execute_python>\n\n</execute_python>", CodeNoProgram},
		{"two different tagged programs", "<execute_python>x = 1</execute_python><execute_python>x = 2</execute_python>", CodeAmbiguousProgram},
		{"two different python fences", "```python\nx = 1\n```\n```python\nx = 2\n```", CodeAmbiguousProgram},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ds := Extract(tt.reply)
			assert.Empty(t, got)
			require.Len(t, ds, 1)
			assert.Equal(t, tt.code, ds[0].Code)
			assert.NotEmpty(t, ds[0].Hint)
		})
	}
}

// Diagnostics refer to the program's own lines, not the reply's.
func TestExtractLineNumbersAreTheProgramsOwn(t *testing.T) {
	env := NewEnv()
	reply := "Some words.\nMore words.\n\n<execute_python>\n\nx = 1\ny = undefined_name\n</execute_python>"
	c := env.Check(reply, Limits{})
	require.Len(t, c.Diagnostics, 1)
	assert.Equal(t, CodeUnknownName, c.Diagnostics[0].Code)
	assert.Equal(t, 2, c.Diagnostics[0].Line)
	assert.Equal(t, 5, c.Diagnostics[0].Col)
}

// manyBlocks is a reply of n distinct <execute_python> blocks.
func manyBlocks(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "<execute_python>\nx = %d\n</execute_python>\n", i)
	}
	return b.String()
}

// A reply is untrusted: 200,000 distinct blocks (20,000 in the normal tier) are counted, not
// compared pairwise (that took a minute), and reported as one diagnostic.
func TestExtractManyDistinctBlocks(t *testing.T) {
	n := testtier.Size(20_000, 200_000)
	got, ds := Extract(manyBlocks(n))
	assert.Empty(t, got)
	require.Len(t, ds, 1)
	assert.Equal(t, CodeAmbiguousProgram, ds[0].Code)
	assert.Contains(t, ds[0].Message, fmt.Sprintf("%d different <execute_python> blocks", n))

	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "```python\nx = %d\n```\n", i)
	}
	_, ds = Extract(b.String())
	require.Len(t, ds, 1)
	assert.Contains(t, ds[0].Message, fmt.Sprintf("%d different fenced code blocks", n))
}

// The common indentation is found in one pass over each line: shrinking it a byte at a time and
// comparing again was quadratic when two long indents part halfway.
func TestExtractDedentsLongIndents(t *testing.T) {
	const n = 1 << 20
	reply := "<execute_python>\n" + strings.Repeat(" ", n) + "x = 1\n" + strings.Repeat(" ", n/2) + strings.Repeat("\t", n/2) + "y = 2\n</execute_python>"
	got, ds := Extract(reply)
	require.Empty(t, ds)
	assert.Equal(t, strings.Repeat(" ", n/2)+"x = 1\n"+strings.Repeat("\t", n/2)+"y = 2\n", got)
}

// BenchmarkExtractManyBlocks carries the target that extraction is linear in the reply: the
// time per block must stay flat from 20,000 to 200,000 distinct blocks (it grew tenfold, to a
// minute, when blocks were compared pairwise).
func BenchmarkExtractManyBlocks(b *testing.B) {
	for _, n := range []int{20_000, 200_000} {
		reply := manyBlocks(n)
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(len(reply)))
			for b.Loop() {
				Extract(reply)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/block")
		})
	}
}
