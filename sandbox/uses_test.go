package sandbox

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/bolt"
	"github.com/starplan/starplan/table"
)

// inventoryEnv is the demo domain's environment (its tables and helpers) over a fresh demo store.
func inventoryEnv(t *testing.T) (*Env, *bolt.Store) {
	t.Helper()
	st, err := bolt.Open(t.TempDir(), bolt.Options{Domain: store.Inventory()})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	var schemas []*table.Schema
	for _, name := range st.Names() {
		s, _ := st.Schema(name)
		schemas = append(schemas, s)
	}
	env, ds := NewDomainEnv(schemas, st.Domain().Definition[HelpersFile])
	require.Empty(t, ds)
	return env, st
}

// TestProgramUsesWhatItNames: a checked plan records the environment's names its code refers
// to (inputs, tables, helpers, modules, and the guards the rewrite added), each once, and no
// name it binds itself or takes from Starlark's universe.
func TestProgramUsesWhatItNames(t *testing.T) {
	env, _ := inventoryEnv(t)
	c := env.CheckProgram(`
row = inventory_tbl.get({"name": "Aviator"})
n = len(user_request) * 2
s = "{}".format(math.floor(2.5))
def f(x):
    return next_transaction_id(transactions_tbl) + x
t = f(str(n)) + f("")
`, Limits{})
	require.NotNil(t, c.Program, c.Diagnostics.String())
	uses := slices.Sorted(slices.Values(c.Program.uses))
	assert.Equal(t, []string{"_sp_add", "_sp_method", "_sp_mul", "inventory_tbl", "len", "math", "next_transaction_id", "str", "transactions_tbl", "user_request"}, uses)
}

// TestRunPredeclaredMatchesTheWholeEnvironment: a run whose predeclared dict holds only the names
// its program uses ends as one given the whole environment, for every plan in the tests (the
// same outcome, diagnostics, output, globals, steps and writes).
func TestRunPredeclaredMatchesTheWholeEnvironment(t *testing.T) {
	env, st := inventoryEnv(t)
	whole := *env
	whole.wholeEnv, whole.checks = true, newCheckCache()
	now := time.Date(2026, 11, 21, 10, 30, 0, 0, time.UTC)
	ran := 0
	for name, src := range parseCorpus(t) {
		if strings.Contains(name, "adversarial") || strings.Contains(name, "(") {
			continue // hostile programs cost seconds; extracted and rewritten forms are run from their reply
		}
		var got [2]*Result
		var writes [2]any
		for i, e := range []*Env{env, &whole} {
			stage := st.Stage()
			res := e.Run(context.Background(), Request{
				Reply:  src,
				Inputs: map[string]any{"user_request": "two pairs of aviators", InputSubject: "alice"},
				Limits: Limits{MaxSteps: 200_000, MaxMemory: 16 << 20, Timeout: time.Minute},
				View:   stage, Now: now,
			})
			res.Duration, res.Phases = 0, Phases{}
			if res.Limit == LimitMemory {
				// Where a run is stopped for its memory, and what it held then, depends on the
				// heap's state: only that it was stopped is compared.
				for i := range res.Diagnostics {
					res.Diagnostics[i].Message, res.Diagnostics[i].Line, res.Diagnostics[i].Col = "", 0, 0
				}
				res.Globals, res.Stdout, res.Steps = nil, "", 0
			}
			got[i], writes[i] = res, stage.ChangeSet()
		}
		if !reflect.DeepEqual(got[1], got[0]) {
			require.Equal(t, got[1].Outcome, got[0].Outcome, name)
			require.Equal(t, got[1].Diagnostics, got[0].Diagnostics, name)
			require.Equal(t, got[1].Globals, got[0].Globals, name)
			require.Equal(t, got[1].Stdout, got[0].Stdout, name)
			require.Equal(t, got[1].Steps, got[0].Steps, name)
			require.Fail(t, "the results differ", name)
		}
		require.Equal(t, writes[1], writes[0], name)
		if got[0].Outcome == OutcomeOK && got[0].Steps > 0 {
			ran++
		}
	}
	require.Greater(t, ran, 20, "too few plans ran to the end to compare")
	t.Logf("%d plans ran to the end", ran)
}
