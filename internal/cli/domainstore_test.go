package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/contracts"
	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/server"
)

// runNoStore runs a command with no --db and no environment that names a store (no HOME, no
// STARPLAN_DB): any command that needed a store would fail to find one.
func runNoStore(t *testing.T, tty bool, args ...string) output {
	t.Helper()
	var out, errb bytes.Buffer
	ios := IOStreams{In: strings.NewReader(""), Out: &out, Err: &errb, OutTTY: tty,
		Getenv: func(k string) string {
			if k == "NO_COLOR" {
				return "1"
			}
			return ""
		}}
	code := Main(append([]string{"--in-process"}, args...), ios)
	return output{code, out.String(), errb.String()}
}

// libraryCopy copies domains/library to a temporary directory and returns it.
func libraryCopy(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "library")
	require.NoError(t, os.CopyFS(dir, os.DirFS("../../domains/library")))
	return dir
}

func writePlan(t *testing.T, src string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "plan.star")
	require.NoError(t, os.WriteFile(p, []byte(src), 0o644))
	return p
}

// check --domain checks a plan against the domain's own tables and helpers, with no store: the
// library's tables are known, the shop's are not.
func TestCheckWithDomainNeedsNoStore(t *testing.T) {
	t.Parallel()
	dom := libraryCopy(t)
	o := runNoStore(t, false, "check", "--domain", dom, writePlan(t, lendPlan))
	require.Equal(t, ExitOK, o.code, o.out+o.err)
	assert.Contains(t, o.out, ": ok")

	// The shop's table is unknown to the library: without --domain the same plan would be
	// checked against the built-in inventory domain.
	shop := writePlan(t, "r = inventory_tbl.get({\"name\": \"x\"})\nSTATUS = \"not_found\"\nanswer_text = \"\"\n")
	o = runNoStore(t, false, "check", "--domain", dom, shop)
	assert.Equal(t, ExitRejected, o.code, o.out)
	assert.Contains(t, o.out, "inventory_tbl")
	o = runNoStore(t, false, "check", "--domain", dom, writePlan(t, lendPlan[:40]+"\nmay_borrow(1, 2, 3)\n"))
	assert.Equal(t, ExitRejected, o.code, "the library's helper is checked by its own signature: %s", o.out)
}

// exec --domain runs on a temporary store made from the directory: the plan sees its seed, its
// run is pending there, and nothing is left behind.
func TestExecWithDomainRunsOnATemporaryStore(t *testing.T) { // not parallel: sets TMPDIR
	dom := libraryCopy(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where the temporary store goes: empty again afterwards
	o := runNoStore(t, false, "exec", "--domain", dom, "--request", "Lend The Dispossessed to Ada Lovelace.", writePlan(t, lendPlan))
	require.Equal(t, ExitOK, o.code, o.out+o.err)
	var res engine.Result
	require.NoError(t, json.Unmarshal([]byte(o.out), &res), o.out)
	assert.Equal(t, "success", res.Status)
	assert.True(t, res.Pending)
	assert.Contains(t, res.Changes, "loans")
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	assert.Empty(t, left, "the temporary store is removed")

	// On a terminal the run is said not to be kept, instead of offering an apply that cannot be.
	o = runNoStore(t, true, "exec", "--domain", dom, writePlan(t, lendPlan))
	require.Equal(t, ExitOK, o.code, o.out+o.err)
	assert.Contains(t, o.out, "not kept: the run was made on a temporary store of")
	assert.NotContains(t, o.out, "starplan apply")

	// run --domain is the same run.
	o = runNoStore(t, false, "run", "--domain", dom, writePlan(t, lendPlan))
	require.Equal(t, ExitOK, o.code, o.out+o.err)
	require.NoError(t, json.Unmarshal([]byte(o.out), &res), o.out)
	assert.Equal(t, "success", res.Status)

	// A broken domain runs nothing and says where it is broken.
	require.NoError(t, os.WriteFile(filepath.Join(dom, "policy.json"), []byte(`{"contract": {"statuses": ["success"], "write_status": "nope"}}`), 0o644))
	o = runNoStore(t, false, "exec", "--domain", dom, writePlan(t, lendPlan))
	assert.Equal(t, ExitUsage, o.code)
	assert.Contains(t, o.err, "nothing was run")
}

// exec --domain --db makes the store from the domain when missing, and keeps it; a store that
// holds another definition is refused with the way to record the new one.
func TestExecWithDomainAndDB(t *testing.T) {
	t.Parallel()
	dom := libraryCopy(t)
	s := newSession(t)
	o := s.run(false, "", "exec", "--domain", dom, writePlan(t, lendPlan))
	require.Equal(t, ExitOK, o.code, o.out+o.err)
	assert.Contains(t, o.err, "seeded new store")
	var res engine.Result
	require.NoError(t, json.Unmarshal([]byte(o.out), &res), o.out)
	o = s.run(false, "", "apply", res.RunID)
	require.Equal(t, ExitOK, o.code, o.out+o.err)

	o = s.run(false, "", "exec", "--domain", dom, writePlan(t, lendPlan))
	require.Equal(t, ExitOK, o.code, "the same definition: the store is used as it is: %s", o.err)
	require.NoError(t, json.Unmarshal([]byte(o.out), &res), o.out)
	assert.Equal(t, "not_available", res.Status, "the applied loan was kept")

	prompt, err := os.ReadFile(filepath.Join(dom, "prompt.json"))
	require.NoError(t, err)
	edited := strings.Replace(string(prompt), "a careful library assistant", "a brief library assistant", 1)
	require.NoError(t, os.WriteFile(filepath.Join(dom, "prompt.json"), []byte(edited), 0o644))
	o = s.run(false, "", "exec", "--domain", dom, writePlan(t, lendPlan))
	assert.Equal(t, ExitUsage, o.code, o.out)
	assert.Contains(t, o.err, "holds another version of it")
	assert.Contains(t, o.err, "starplan domain upgrade "+dom)
}

// describe and prompt --domain describe the directory, not a store.
func TestDescribeAndPromptWithDomain(t *testing.T) {
	t.Parallel()
	dom := libraryCopy(t)
	o := runNoStore(t, false, "describe", "--json", "--domain", dom)
	require.Equal(t, ExitOK, o.code, o.err)
	var d server.Description
	require.NoError(t, json.Unmarshal([]byte(o.out), &d))
	assert.Equal(t, "library", d.Domain)
	var names []string
	for _, h := range d.Helpers {
		names = append(names, h.Name)
	}
	assert.Contains(t, names, "may_borrow")

	o = runNoStore(t, false, "prompt", "--domain", dom)
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Contains(t, o.out, "books_tbl")
	assert.Contains(t, o.out, "The Dispossessed", "the seed's rows are the sample rows")
}

// The built binary runs a plan of a domain directory with no store anywhere: its plans run in
// isolated workers on the temporary store, and neither the default store nor a temporary one is
// left behind.
func TestBinaryExecWithDomain(t *testing.T) {
	t.Parallel()
	bin := starplanBinary(t)
	dom := libraryCopy(t)
	home, tmp := t.TempDir(), t.TempDir()
	cmd := exec.Command(bin, "exec", "--domain", dom, "--json", writePlan(t, lendPlan))
	cmd.Env = []string{"HOME=" + home, "TMPDIR=" + tmp, "PATH=" + os.Getenv("PATH")}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	require.NoError(t, cmd.Run(), errb.String())
	var res engine.Result
	require.NoError(t, json.Unmarshal(out.Bytes(), &res), out.String())
	assert.Equal(t, "success", res.Status)
	assert.Equal(t, engine.OutcomeOK, res.Outcome)
	for _, dir := range []string{home, tmp} {
		left, err := os.ReadDir(dir)
		require.NoError(t, err)
		assert.Empty(t, left, "nothing is left in %s", dir)
	}
}

// starplan domain --help lists every rule kind with its parameters, from the kinds themselves.
func TestDomainHelpListsRuleKinds(t *testing.T) {
	t.Parallel()
	o := runNoStore(t, false, "domain", "--help")
	require.Equal(t, ExitOK, o.code, o.err)
	for _, k := range contracts.Kinds() {
		assert.Contains(t, o.out, k.Name)
		assert.Contains(t, o.out, "params: "+k.Params)
	}
}
