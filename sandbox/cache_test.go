package sandbox

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A program checked again is the same compiled program, not a second compilation.
func TestCheckCacheReusesAProgram(t *testing.T) {
	env := testEnv()
	src := "answer_text = 'hi'\nSTATUS = 'success'\n"
	first := env.CheckProgram(src, Limits{})
	require.NotNil(t, first.Program)
	again := env.CheckProgram(src, Limits{})
	assert.Same(t, first.Program, again.Program)
	// Check (extraction first) finds the program the plain check compiled.
	assert.Same(t, first.Program, env.Check("<execute_python>\n"+src+"</execute_python>", Limits{}).Program)
}

// The limits that bound a check are part of what was checked: a program refused under a tight
// nesting or size limit is accepted under the default, and the other way round.
func TestCheckCacheKeysOnTheCheckLimits(t *testing.T) {
	env := testEnv()
	src := "x = [[[1]]]\nanswer_text = 'hi'\nSTATUS = 'success'\n"
	assert.Equal(t, []string{CodeTooDeep}, codes(env.CheckProgram(src, Limits{MaxNesting: 2})))
	assert.Empty(t, codes(env.CheckProgram(src, Limits{})))
	assert.Equal(t, []string{CodeTooDeep}, codes(env.CheckProgram(src, Limits{MaxNesting: 2})))
	assert.Equal(t, []string{CodeTooLarge}, codes(env.CheckProgram(src, Limits{MaxProgram: 10})))
}

// What a caller does to a check it was given does not change what the next caller gets.
func TestCheckCacheHandsOutCopies(t *testing.T) {
	env := testEnv()
	src := "print(undefined_name)\n"
	first := env.CheckProgram(src, Limits{})
	require.NotEmpty(t, first.Diagnostics)
	want := first.Diagnostics[0].Message
	first.Diagnostics[0].Message = "edited"
	first.Diagnostics = append(first.Diagnostics, first.Diagnostics[0])
	again := env.CheckProgram(src, Limits{})
	require.Len(t, again.Diagnostics, 1)
	assert.Equal(t, want, again.Diagnostics[0].Message)
}

// However many distinct programs it is given, the cache keeps at most cacheEntries of them and
// cacheBytes of their text, dropping the least recently used first.
func TestCheckCacheIsBounded(t *testing.T) {
	env := testEnv()
	program := func(i, size int) string {
		head := fmt.Sprintf("answer_text = 'plan %d'\nSTATUS = 'success'\n", i)
		return head + "#" + strings.Repeat("x", size-len(head)-2) + "\n"
	}
	kept := env.CheckProgram(program(0, 64), Limits{}).Program
	oldest := env.CheckProgram(program(1, 64), Limits{}).Program
	for i := 2; i <= 2*cacheEntries; i++ {
		env.CheckProgram(program(i, 64), Limits{})
		if i%16 == 0 {
			env.CheckProgram(program(0, 64), Limits{}) // used again, so never the oldest
		}
	}
	assert.Equal(t, cacheEntries, env.checks.order.Len())
	assert.Same(t, kept, env.CheckProgram(program(0, 64), Limits{}).Program)
	assert.NotSame(t, oldest, env.CheckProgram(program(1, 64), Limits{}).Program, "dropped, so compiled again")

	big := DefaultMaxProgram
	for i := range 2 * cacheBytes / big {
		require.NotNil(t, env.CheckProgram(program(i, big), Limits{}).Program)
	}
	assert.LessOrEqual(t, env.checks.bytes, cacheBytes)
	assert.Equal(t, env.checks.bytes/big, env.checks.order.Len(), "only the large programs are left")
}

// Concurrent runs of one cached program each get their own globals.
func TestCheckCacheSharedByConcurrentRuns(t *testing.T) {
	env := testEnv()
	src := "<execute_python>\nanswer_text = user_request.upper()\nSTATUS = 'success'\n</execute_python>"
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			req := fmt.Sprintf("request %d", i)
			res := env.Run(context.Background(), Request{Reply: src, Inputs: map[string]any{"user_request": req}, Globals: []string{"answer_text"}})
			assert.Equal(t, OutcomeOK, res.Outcome)
			assert.Equal(t, strings.ToUpper(req), res.Globals["answer_text"])
		})
	}
	wg.Wait()
}

// A program full of unknown names is reported in a bounded list, so neither the answer nor the
// cache holds tens of thousands of diagnostics.
func TestResolveDiagnosticsAreCapped(t *testing.T) {
	src := "x = [" + strings.Repeat("a,", 30000) + "]\n"
	c := testEnv().CheckProgram(src, Limits{})
	require.Len(t, c.Diagnostics, maxResolveDiagnostics+1)
	assert.Contains(t, c.Diagnostics[maxResolveDiagnostics].Message, "and 29950 more problems")
}
