package engine_test

import (
	"context"
	"flag"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/store/bolt"
)

// hostV is the -v TestEmbeddingLeavesTheHostsFlagsAlone defined as a host would, once a process.
var hostV *bool

// Importing the engine once registered glog's flags (-v, -log_dir, ...) in the host's global
// flag set, through clover → badger → ristretto, so a host that defines -v panicked at start
// with "flag redefined: v". This test binary links the engine and everything under it: the only
// global flags are the test runner's and this package's own.
func TestEmbeddingLeavesTheHostsFlagsAlone(t *testing.T) {
	var foreign []string
	flag.CommandLine.VisitAll(func(f *flag.Flag) {
		if !strings.HasPrefix(f.Name, "test.") && f.Name != "update" && f.Name != "update-schemas" &&
			(hostV == nil || f.Name != "v") {
			foreign = append(foreign, f.Name)
		}
	})
	assert.Empty(t, foreign, "flags registered by an import")

	// A host defining -v imports and runs the engine. The flag set is the process's, so a later
	// run of this test in one binary (-count) finds the -v an earlier run defined: only the
	// first defines it.
	if hostV == nil {
		require.NotPanics(t, func() { hostV = flag.CommandLine.Bool("v", false, "the host's own") })
	}
	st, err := bolt.Open(t.TempDir(), bolt.Options{})
	require.NoError(t, err)
	defer st.Close()
	e, err := engine.New(st, engine.Options{})
	require.NoError(t, err)
	defer e.Close()
	res, err := e.Run(context.Background(), engine.Request{Reply: "<execute_python>\nSTATUS, answer_text = \"success\", \"ok\"\n</execute_python>"})
	require.NoError(t, err)
	assert.Equal(t, "success", res.Status, "%+v", res.Diagnostics)
}
