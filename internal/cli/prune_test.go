package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
)

// While serve holds the store, runs prune goes through the server: it removes the old settled
// run, keeps the old pending one, says so, and the log verifies after it.
func TestRunsPruneThroughAServer(t *testing.T) {
	t.Parallel()
	base, err := os.MkdirTemp("", "sp") // a short directory: a unix socket's path has at most 107 bytes
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	s := &session{t: t, dir: filepath.Join(base, "store")}
	readOnly, pending := s.oldRuns(40)
	f := startServeAt(t, s.dir)
	o := f.runOut("runs", "verify")
	require.Equal(t, ExitOK, o.code, "%s\n%s", o.err, f.errb)

	o = f.runOut("runs", "prune", "--older-than", "30d")
	require.Equal(t, ExitOK, o.code, "%s\n%s", o.err, f.errb)
	var rep engine.PruneReport
	require.NoError(t, json.Unmarshal([]byte(o.out), &rep), o.out)
	assert.Equal(t, 1, rep.Removed)
	assert.Equal(t, 1, rep.KeptPending)
	assert.Equal(t, 1, rep.Steps)
	assert.Positive(t, rep.Bytes)

	o = f.runOut("runs", "show", readOnly)
	assert.Equal(t, ExitUsage, o.code, "the pruned run is gone")
	o = f.runOut("runs", "show", pending)
	assert.Equal(t, ExitOK, o.code, o.err)
	o = f.runOut("runs", "verify")
	assert.Equal(t, ExitOK, o.code, "the log verifies after the prune: %s\n%s", o.out, o.err)
	require.Equal(t, ExitOK, f.shutdown(), f.errb.String())

	// The store itself agrees, the server gone.
	o = s.run(false, "", "db", "check")
	assert.Equal(t, ExitOK, o.code, "%s\n%s", o.out, o.err)
}
