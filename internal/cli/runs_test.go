package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/internal/termsafe"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/bolt"
)

func TestParseAge(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{
		"30d": 30 * 24 * time.Hour, "1d": 24 * time.Hour, "12h": 12 * time.Hour, "90m": 90 * time.Minute,
		"1h30m": 90 * time.Minute, "1s": time.Second,
	} {
		got, err := parseAge(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "0", "0d", "0s", "-1h", "-3d", "30", "1.5d", "d", "abc", "30 d", "99999999999999d"} {
		_, err := parseAge(in)
		assert.Error(t, err, "%q", in)
	}
}

// oldRuns runs plans in the session's store with a clock days in the past: a read-only run and
// a pending one. It returns their ids.
func (s *session) oldRuns(days int) (readOnly, pending string) {
	s.t.Helper()
	require.NoError(s.t, os.MkdirAll(s.dir, 0o755))
	st, err := bolt.Open(s.dir, bolt.Options{})
	require.NoError(s.t, err)
	then := time.Now().Add(-time.Duration(days) * 24 * time.Hour)
	e, err := engine.New(st, engine.Options{Now: func() time.Time { return then }})
	require.NoError(s.t, err)
	ctx := context.Background()
	for i, name := range []string{"01_round_under_100.star", "02_purchase_wayfarer.star"} {
		b, err := os.ReadFile(example(name))
		require.NoError(s.t, err)
		res, err := e.Run(ctx, engine.Request{Reply: string(b), Origin: "test"})
		require.NoError(s.t, err)
		if i == 0 {
			readOnly = res.RunID
		} else {
			require.True(s.t, res.Pending)
			pending = res.RunID
		}
	}
	require.NoError(s.t, e.Close())
	require.NoError(s.t, st.Close())
	return readOnly, pending
}

func TestRunsPrune(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	_, oldPending := s.oldRuns(40)
	o := s.run(false, "", "exec", example("01_round_under_100.star"))
	require.Equal(t, ExitOK, o.code, o.err)
	var fresh engine.Result
	require.NoError(t, json.Unmarshal([]byte(o.out), &fresh))

	// The listing says how big the log is, on a terminal and in JSON.
	o = s.run(true, "", "runs")
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Regexp(t, `3 runs; the audit log holds [0-9.]+ KiB of records`, o.out)
	o = s.run(true, "", "runs", "--limit", "1")
	assert.Regexp(t, `1 of 3 runs shown; the audit log holds [0-9.]+ KiB of records`, o.out)
	var runs []engine.RunSummary
	require.NoError(t, json.Unmarshal([]byte(s.run(false, "", "runs").out), &runs))
	require.Len(t, runs, 3)
	for _, r := range runs {
		assert.Positive(t, r.Bytes, r.ID)
	}

	// A bad age is a usage error and removes nothing.
	for _, age := range []string{"0", "-30d", "soon"} {
		o = s.run(false, "", "runs", "prune", "--older-than", age)
		assert.Equal(t, ExitUsage, o.code, age)
		assert.Contains(t, o.err, "Try: give an age such as --older-than 30d")
	}
	o = s.run(false, "", "runs", "prune")
	assert.Equal(t, ExitUsage, o.code)
	assert.Contains(t, o.err, "--older-than is required")

	o = s.run(true, "", "runs", "prune", "--older-than", "30d")
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Contains(t, o.out, "Removed 1 run older than 30d")
	assert.Contains(t, o.out, "Kept 1 pending run older than that: apply it")
	assert.Contains(t, o.out, "does not shrink")

	require.NoError(t, json.Unmarshal([]byte(s.run(false, "", "runs").out), &runs))
	var left []string
	for _, r := range runs {
		left = append(left, r.ID)
	}
	assert.ElementsMatch(t, []string{oldPending, fresh.RunID}, left)

	// Piped, the report is JSON; --pending removes the old pending run too.
	o = s.run(false, "", "runs", "prune", "--older-than", "30d", "--pending")
	require.Equal(t, ExitOK, o.code, o.err)
	var rep engine.PruneReport
	require.NoError(t, json.Unmarshal([]byte(o.out), &rep))
	assert.Equal(t, 1, rep.Removed)
	assert.Zero(t, rep.KeptPending)
	assert.Positive(t, rep.Bytes)
	o = s.run(false, "", "runs", "show", oldPending)
	assert.Equal(t, ExitUsage, o.code, "the pruned run is gone")
}

// runs show says when the log keeps only the start of a reply, and what the record cut.
func TestRunsShowSaysWhatTheRecordCut(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	reply := strings.Repeat("thinking\n", 4<<10) + "<execute_python>\nSTATUS = \"success\"\nanswer_text = \"ok\"\n</execute_python>\n"
	o := s.run(false, "", "exec", writeFile(t, "reply.txt", reply))
	require.Equal(t, ExitOK, o.code, o.err)
	var res engine.Result
	require.NoError(t, json.Unmarshal([]byte(o.out), &res))
	o = s.run(true, "", "runs", "show", res.RunID)
	require.Equal(t, ExitOK, o.code, o.err)
	sum := sha256.Sum256([]byte(reply))
	assert.Contains(t, o.out, "Reply: 36.1 KiB in all, sha256 "+hex.EncodeToString(sum[:]))
	assert.Contains(t, o.out, "Cut to stay bounded: reply")
}

// runs filters by state and age, names every run's state (never a blank column), shows times
// with their zone, and calls a run's id run_id in JSON as everywhere else.
func TestRunsFilters(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	oldDone, oldPending := s.oldRuns(40)
	o := s.run(false, "", "exec", "--request", "bomb", example("05_hostile_memory_bomb.star"))
	require.NotEqual(t, ExitOK, o.code)

	list := func(args ...string) []engine.RunSummary {
		t.Helper()
		o := s.run(false, "", append([]string{"runs", "--json"}, args...)...)
		require.Equal(t, ExitOK, o.code, o.err)
		assert.Contains(t, o.out, `"run_id"`)
		assert.NotContains(t, o.out, `"id"`)
		var runs []engine.RunSummary
		require.NoError(t, json.Unmarshal([]byte(o.out), &runs))
		return runs
	}
	ids := func(runs []engine.RunSummary) []string {
		var out []string
		for _, r := range runs {
			out = append(out, r.ID)
		}
		return out
	}
	all := list()
	require.Len(t, all, 3)
	for _, r := range all {
		assert.NotEmpty(t, r.State, r.ID)
	}
	assert.Equal(t, engine.StateFailed, all[0].State, "the memory bomb, newest")
	assert.Equal(t, []string{oldPending}, ids(list("--state", "pending")))
	assert.Equal(t, []string{oldDone}, ids(list("--state", "done")))
	assert.Len(t, list("--since", "7d"), 1, "only the bomb is younger than a week")
	assert.Len(t, list("--since", time.Now().AddDate(0, 0, -60).Format(time.DateOnly)), 3)

	o = s.run(true, "", "runs")
	require.Equal(t, ExitOK, o.code, o.err)
	zone, _ := time.Now().Zone()
	for _, line := range strings.Split(strings.TrimSpace(o.out), "\n")[1:4] {
		assert.Contains(t, line, " "+zone+" ", "times carry their zone")
		assert.Regexp(t, `(pending|done|failed)`, line)
	}

	o = s.run(false, "", "runs", "--state", "sideways")
	assert.Equal(t, ExitUsage, o.code)
	assert.Contains(t, o.err, "pending, applied, rejected")
	o = s.run(false, "", "runs", "--since", "last tuesday")
	assert.Equal(t, ExitUsage, o.code)
}

// runs show --diff prints only the changes, as Markdown for a review comment or as JSON with the
// changed fields.
func TestRunsShowDiff(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	_, pending := s.oldRuns(1)
	o := s.run(false, "", "runs", "show", pending, "--diff", "markdown")
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Contains(t, o.out, "### inventory: 1 updated")
	assert.Contains(t, o.out, "~~6~~ → **3**")
	o = s.run(false, "", "runs", "show", pending, "--diff", "json")
	require.Equal(t, ExitOK, o.code, o.err)
	var doc map[string]struct {
		Updated []struct {
			Fields []string `json:"fields"`
		} `json:"updated"`
	}
	require.NoError(t, json.Unmarshal([]byte(o.out), &doc))
	assert.Equal(t, []string{"quantity_in_stock"}, doc["inventory"].Updated[0].Fields)
	o = s.run(false, "", "runs", "show", pending, "--diff", "html")
	assert.Equal(t, ExitUsage, o.code)
}

func TestRunsReplay(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	readOnly, pending := s.oldRuns(1)
	o := s.run(false, "", "exec", example("02_purchase_wayfarer.star"))
	require.Equal(t, ExitOK, o.code, o.err)
	var other engine.Result
	require.NoError(t, json.Unmarshal([]byte(o.out), &other))
	o = s.run(true, "", "runs", "replay", pending)
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Contains(t, o.out, "Identical:")
	o = s.run(false, "", "apply", pending)
	require.Equal(t, ExitOK, o.code, o.err)

	// Another apply moved the data a pending run read: it differs, exit 5.
	o = s.run(true, "", "runs", "replay", other.RunID)
	assert.Equal(t, ExitConflict, o.code, o.err)
	assert.Contains(t, o.out, "Differs:")
	assert.NotContains(t, o.out, "as expected")
	// The run's own apply moved the data it read: it differs now, as expected, and that is not
	// the apply conflict exit 5 stands for.
	o = s.run(false, "", "runs", "replay", pending)
	assert.Equal(t, ExitOK, o.code, o.err)
	var rep engine.ReplayReport
	require.NoError(t, json.Unmarshal([]byte(o.out), &rep))
	assert.False(t, rep.Identical)
	assert.Contains(t, rep.Differences, "changes")
	assert.Contains(t, rep.Note, "its own apply changed the data it read")
	o = s.run(true, "", "runs", "replay", pending)
	assert.Equal(t, ExitOK, o.code, o.err)
	assert.Contains(t, o.out, "Differs, as expected:")
	assert.Contains(t, o.out, "was applied at")
	o = s.run(false, "", "runs", "replay", readOnly)
	assert.Equal(t, ExitOK, o.code, "the question read no row the purchase changed: %s", o.out)
}

// badRecord is an audit record that does not decode, with its index entry (as damage after it
// was written leaves it).
var badRecord = store.SysDoc{Collection: "runs", ID: "r_bad", Value: map[string]any{"time": "yesterday"},
	Index: &store.SysIndex{Order: "0", Group: engine.StateDone}}

// One audit record that does not decode: runs lists the others and fails naming it, and no
// command tells the user to "run the command again".
func TestRunsWithAnUnreadableRecord(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	readOnly, _ := s.oldRuns(1)
	st, err := bolt.Open(s.dir, bolt.Options{})
	require.NoError(t, err)
	require.NoError(t, st.PutSysDocs(context.Background(), badRecord))
	require.NoError(t, st.Close())

	o := s.run(false, "", "runs")
	assert.Equal(t, ExitInternal, o.code)
	var runs []engine.RunSummary
	require.NoError(t, json.Unmarshal([]byte(o.out), &runs))
	assert.Len(t, runs, 2, "the readable runs are listed")
	assert.Contains(t, o.err, "audit record r_bad is unreadable")
	assert.Contains(t, o.err, "Try: starplan db check reports every unreadable record")

	o = s.run(true, "", "runs")
	assert.Equal(t, ExitInternal, o.code)
	assert.Contains(t, o.out, readOnly)

	for _, args := range [][]string{{"runs", "show", "r_bad"}, {"runs", "prune", "--older-than", "1h"}} {
		o = s.run(false, "", args...)
		assert.Equal(t, ExitInternal, o.code, args)
		assert.Contains(t, o.err, "audit record r_bad is unreadable", args)
		assert.NotContains(t, o.err, "run the command again", args)
	}
}

// db check decodes every audit record as runs does, and names the one that does not.
func TestDBCheckNamesAnUnreadableRecord(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	s.oldRuns(1)
	st, err := bolt.Open(s.dir, bolt.Options{})
	require.NoError(t, err)
	require.NoError(t, st.PutSysDocs(context.Background(), badRecord))
	require.NoError(t, st.Close())
	o := s.run(true, "", "db", "check")
	assert.Equal(t, ExitInternal, o.code)
	assert.Contains(t, o.out, "audit record r_bad of _runs is unreadable")
}

// On a terminal the request column gets what the other columns leave of its width: all of a
// long request on a wide terminal, cut with "…" to fit a narrow one, and 48 columns when the
// width is not known.
func TestRunsRequestColumnFollowsTheTerminalWidth(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	request := strings.Repeat("Do you have round sunglasses under $100, and aviators? ", 3)
	request = strings.TrimSpace(request)
	require.Greater(t, termsafe.Width(request), 150)
	o := s.run(false, "", "exec", "--request", request, example("01_round_under_100.star"))
	require.Equal(t, ExitOK, o.code, o.err)

	runs := func(width int) string {
		var out, errb bytes.Buffer
		ios := IOStreams{In: strings.NewReader(""), Out: &out, Err: &errb, OutTTY: true, Width: width, Getenv: func(string) string { return "" }}
		require.Equal(t, ExitOK, Main([]string{"--db", s.dir, "--color", "never", "runs"}, ios), errb.String())
		return out.String()
	}
	wide := runs(270)
	assert.Contains(t, wide, request, "a 270-column terminal shows the whole request")
	narrow := runs(120)
	assert.NotContains(t, narrow, request)
	assert.Contains(t, narrow, "…")
	row := strings.Split(narrow, "\n")[1]
	assert.Equal(t, 120, termsafe.Width(row), "the run's line fills the width: %q", row)
	unknown := runs(0)
	assert.Contains(t, unknown, termsafe.Truncate(request, 48)+"\n")
}

// runs --cursor pages through the log: JSON is then {runs, next_cursor}, and following the
// cursors lists every run once, newest first; a terminal names the next page's cursor.
func TestRunsPagesWithACursor(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	s.oldRuns(3)
	s.oldRuns(2)
	s.oldRuns(1)
	var all []engine.RunSummary
	require.NoError(t, json.Unmarshal([]byte(s.run(false, "", "runs").out), &all), "without --cursor, the JSON is the list as before")
	require.Len(t, all, 6)

	var paged []string
	args := []string{"runs", "--json", "--limit", "4", "--cursor", ""}
	for range 3 {
		o := s.run(false, "", args...)
		require.Equal(t, ExitOK, o.code, o.err)
		var page struct {
			Runs       []engine.RunSummary `json:"runs"`
			NextCursor string              `json:"next_cursor"`
		}
		require.NoError(t, json.Unmarshal([]byte(o.out), &page), o.out)
		for _, r := range page.Runs {
			paged = append(paged, r.ID)
		}
		if page.NextCursor == "" {
			break
		}
		args = []string{"runs", "--json", "--limit", "4", "--cursor", page.NextCursor}
	}
	var want []string
	for _, r := range all {
		want = append(want, r.ID)
	}
	assert.Equal(t, want, paged)

	o := s.run(true, "", "runs", "--limit", "2", "--state", "pending")
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Contains(t, o.out, "2 of 6 runs shown (3 match; --limit 0 lists them all)")
	assert.Regexp(t, `next page: the same command with --cursor c1\.\S+`, o.out)

	o = s.run(false, "", "runs", "--cursor", "bogus")
	assert.Equal(t, ExitUsage, o.code)
	assert.Contains(t, o.err, "next_cursor")
}
