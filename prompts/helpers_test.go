package prompts_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/contracts"
	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/prompts"
	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/store/bolt"
)

// openDemo opens a new store seeded with the demo data in a temporary directory.
func openDemo(t *testing.T) *bolt.Store {
	t.Helper()
	st, err := bolt.Open(t.TempDir(), bolt.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st
}

// demoInput builds the system prompt's input the way the engine does: the live store's tables,
// the sandbox's registry and the domain's contract.
func demoInput(t *testing.T, st *bolt.Store) prompts.Input {
	t.Helper()
	infos, err := prompts.TablesOf(st.Stage())
	require.NoError(t, err)
	policy, err := contracts.Load(st.Domain().Name)
	require.NoError(t, err)
	return prompts.Input{
		Tables:   infos,
		Registry: mustEnv(t, st).Registry(),
		Policy:   policy,
	}
}

func demoSystem(t *testing.T) string {
	t.Helper()
	s, err := prompts.System(demoInput(t, openDemo(t)))
	require.NoError(t, err)
	return s
}

// mustEnv is the environment of plans over st, its domain's helpers included.
func mustEnv(t *testing.T, st *bolt.Store) *sandbox.Env {
	t.Helper()
	env, err := engine.EnvOf(st)
	require.NoError(t, err)
	return env
}
