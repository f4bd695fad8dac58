package engine

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A record whose stored-once marks contradict what it stores is named as damage, as a rewrite
// stored with its before in the program and in itself is: a program_is_reply record that also
// stores a program other than its reply reads back with that program silently replaced.
func TestAProgramStoredBesideProgramIsReplyIsDamage(t *testing.T) {
	r := fullRecord()
	r.Program = r.Reply
	raw, err := r.encodeStored()
	require.NoError(t, err)
	require.Contains(t, string(raw), `"program":""`)
	bad := strings.Replace(string(raw), `"program":""`, `"program":"import os\n"`, 1)
	err = CheckRecord([]byte(bad))
	require.Error(t, err)
	require.Contains(t, err.Error(), "holds a program too")
}

// A write stored as named in the record's changes (in_changes) that holds rows too is damage:
// which rows would apply is not one answer.
func TestAWriteInChangesThatHoldsRowsIsDamage(t *testing.T) {
	r := fullRecord()
	raw, err := r.encodeStored()
	require.NoError(t, err)
	require.Contains(t, string(raw), `"in_changes":true`)
	require.NoError(t, CheckRecord(raw))
	bad := strings.Replace(string(raw), `"in_changes":true`, `"in_changes":true,"row":{"stock":1000}`, 1)
	err = CheckRecord([]byte(bad))
	require.Error(t, err)
	require.Contains(t, err.Error(), "holds rows too")
}
