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

// Importing the engine once registered glog's flags (-v, -log_dir, ...) in the host's global
// flag set, through clover → badger → ristretto, so a host that defines -v panicked at start
// with "flag redefined: v". This test binary links the engine and everything under it: the only
// global flags are the test runner's and this package's own.
func TestEmbeddingLeavesTheHostsFlagsAlone(t *testing.T) {
	var foreign []string
	flag.CommandLine.VisitAll(func(f *flag.Flag) {
		if !strings.HasPrefix(f.Name, "test.") && f.Name != "update" && f.Name != "update-schemas" {
			foreign = append(foreign, f.Name)
		}
	})
	assert.Empty(t, foreign, "flags registered by an import")

	// A host defining -v imports and runs the engine.
	require.NotPanics(t, func() { flag.CommandLine.Bool("v", false, "the host's own") })
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
