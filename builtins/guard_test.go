package builtins

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// countFields counts what strings.Fields would return, Unicode spaces included.
func TestCountFieldsIsFieldsLen(t *testing.T) {
	for _, s := range []string{"", " ", "a", " a ", "a  b\tc\n", "\u00a0x\u2003y\u3000", "é b", "\xff \xfe", strings.Repeat("a ", 1000)} {
		assert.Equal(t, int64(len(strings.Fields(s))), countFields(s), "%q", s)
	}
}
