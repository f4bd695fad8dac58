package table

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A pattern compiled again is the compiled pattern kept from before, and the cache stays bounded
// however many patterns it sees.
func TestRegexCache(t *testing.T) {
	first, err := compileRegex("^TXN[0-9]+$")
	require.NoError(t, err)
	again, err := compileRegex("^TXN[0-9]+$")
	require.NoError(t, err)
	assert.Same(t, first, again)

	for i := range 3000 {
		_, err := compileRegex(fmt.Sprintf("^x%d$", i))
		require.NoError(t, err)
		regexes.Lock()
		n := regexes.insts
		regexes.Unlock()
		require.LessOrEqual(t, n, regexCacheInsts)
	}
	_, err = compileRegex("(")
	require.Error(t, err, "a pattern that does not compile is still refused the second time")
	_, err = compileRegex("(")
	require.Error(t, err)
}

// A short pattern that compiles to a huge program is refused before it is built, with a message
// that says what to do; the cache's bound is on compiled size, not text.
func TestRegexSizeBounded(t *testing.T) {
	for _, p := range []string{strings.Repeat(`(()){1000}`, 3), strings.Repeat(`(()){999}`, 100), strings.Repeat("(a)", 40)} {
		_, err := compileRegex(p)
		require.Error(t, err, p)
		assert.Regexp(t, "instructions|capture groups", err.Error(), p)
	}
	n, err := regexSize(`^TXN[0-9]+$`)
	require.NoError(t, err)
	assert.Less(t, n, 100)
	_, err = Compile(nil, map[string]any{"name": map[string]any{"$regex": strings.Repeat(`(()){1000}`, 3)}})
	assert.ErrorContains(t, err, "instructions")
}
