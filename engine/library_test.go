package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarktest"
	"go.starlark.net/syntax"

	"github.com/starplan/starplan/builtins"
	"github.com/starplan/starplan/builtins/tables"
	"github.com/starplan/starplan/domains"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/bolt"
)

// libraryEngine is an engine over a fresh store of the library domain (domains/library), its
// clock at fixedNow.
func libraryEngine(t testing.TB) *Engine {
	t.Helper()
	return builtinEngine(t, domains.Library)
}

// builtinEngine is an engine over a fresh store of a built-in domain, its clock at fixedNow.
func builtinEngine(t testing.TB, name string) *Engine {
	t.Helper()
	dir, ok := domains.Builtin(name)
	require.True(t, ok, name)
	dom, errs := LoadDomain(dir)
	require.Empty(t, errs)
	return domainEngine(t, dom)
}

// domainEngine is an engine over a fresh store of dom, its clock at fixedNow.
func domainEngine(t testing.TB, dom *store.Domain) *Engine {
	t.Helper()
	st, err := bolt.Open(t.TempDir(), bolt.Options{Domain: dom})
	require.NoError(t, err)
	e, err := New(st, Options{Now: func() time.Time { return fixedNow }})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, e.Close())
		assert.NoError(t, st.Close())
	})
	return e
}

// runScript runs a Starlark test script (testdata/domains) as a plan on e's store would see its
// names, with the assert module, and fails the test with the script's backtrace.
func runScript(t *testing.T, e *Engine, path string) {
	t.Helper()
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	assertMod, err := starlarktest.LoadAssertModule()
	require.NoError(t, err)
	pre := starlark.StringDict{"assert": assertMod["assert"]}
	for k, v := range e.Env().Registry().Predeclared() {
		pre[k] = v
	}
	thread := &starlark.Thread{Name: "script"}
	starlarktest.SetReporter(thread, t)
	tables.Bind(thread, e.st.StageFor(context.Background(), store.RunLimits{}), fixedNow)
	_, err = starlark.ExecFileOptions(&syntax.FileOptions{While: true, TopLevelControl: true, GlobalReassign: true},
		thread, filepath.Base(path), src, pre)
	var ee *starlark.EvalError
	if errors.As(err, &ee) {
		t.Fatal(ee.Backtrace())
	}
	require.NoError(t, err)
}

// The library is a domain like any other: its directory on disk and its embedded copy load with
// no problem, its four tables, its five rules in Starlark bound.
func TestLibraryDomainLoads(t *testing.T) {
	dom, errs := LoadDomain(os.DirFS("../domains/library"))
	require.Empty(t, errs)
	assert.Equal(t, "library", dom.Name)
	var names []string
	for _, s := range dom.Tables {
		names = append(names, s.Name)
	}
	assert.Equal(t, []string{"members", "books", "loans", "fines"}, names)
	for _, f := range []string{"policy.json", "prompt.json", "helpers.star", "invariants.star", "example.star"} {
		assert.Contains(t, dom.Definition, f)
	}
	e := libraryEngine(t)
	assert.Equal(t, []string{"borrower_in_good_standing", "fine_for_own_loan", "fines_match_ledger", "loan_status_machine", "loans_out_counts", "member_acts_for_self", "one_loan_per_book"},
		e.Policy().InvariantFunctions())
}

// The library's helpers, checked as a plan sees them (testdata/domains/library_helpers.star).
func TestLibraryHelpers(t *testing.T) {
	e := libraryEngine(t)
	runScript(t, e, "../testdata/domains/library_helpers.star")

	h, ok := e.Env().Registry().Lookup("due_date")
	require.True(t, ok)
	assert.Equal(t, builtins.GroupDomain, h.Group)
	assert.Equal(t, "due_date(days=14, start=None)", h.Signature)
	_, ok = e.Env().Registry().Lookup("_day")
	assert.False(t, ok, "names starting with _ are the file's own")
}
