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

// exec --subject through the library, with plans in isolated workers as a user's run: a loan to
// Ada (M001) made on behalf of M002 is refused by the library's subject rule; on behalf of M001
// it passes, and runs show prints its subject. A subject that cannot be an id is a usage error.
func TestExecSubject(t *testing.T) {
	t.Parallel()
	s := newIsolatedSession(t)
	o := s.run(false, "", "db", "init", "--domain", "../../domains/library")
	require.Equal(t, ExitOK, o.code, o.err)
	plan := filepath.Join(t.TempDir(), "lend.star")
	require.NoError(t, os.WriteFile(plan, []byte(lendPlan), 0o644))

	o = s.run(false, "", "exec", "--subject", "M002", plan)
	assert.Equal(t, ExitContract, o.code, o.out)
	assert.Contains(t, o.out, `"member_acts_for_self"`)
	assert.Contains(t, o.out, "the run acts for member M002 but changes a row of member M001")

	o = s.run(true, "", "exec", "--subject", "M001", plan)
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Contains(t, o.out, "Changes (dry run, not applied), on behalf of M001:", "the diff's header names the subject")
	o = s.run(false, "", "exec", "--subject", "M001", plan)
	require.Equal(t, ExitOK, o.code, o.err)
	var res engine.Result
	require.NoError(t, json.Unmarshal([]byte(o.out), &res))
	require.True(t, res.Pending, o.out)
	assert.Equal(t, "M001", res.Subject)

	o = s.run(false, "", "runs", "show", "--json", res.RunID)
	require.Equal(t, ExitOK, o.code, o.err)
	var doc engine.Document
	require.NoError(t, json.Unmarshal([]byte(o.out), &doc))
	assert.Equal(t, "M001", doc.Subject)
	o = s.run(true, "", "runs", "show", res.RunID)
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Contains(t, o.out, "Subject: M001")
	o = s.run(true, "", "runs")
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Regexp(t, `(?m)^run .*subject +request`, o.out, "a list with a run that acts for someone has a subject column")
	assert.Regexp(t, `(?m)^`+res.RunID+` .* M001 `, o.out)

	// The plan, in its worker, reads the subject too.
	who := filepath.Join(t.TempDir(), "who.star")
	require.NoError(t, os.WriteFile(who, []byte("STATUS = \"not_found\"\nanswer_text = \"For %s.\" % run_subject()\n"), 0o644))
	o = s.run(false, "", "exec", "--subject", "M003", who)
	require.Equal(t, ExitOK, o.code, o.err+o.out)
	require.NoError(t, json.Unmarshal([]byte(o.out), &res))
	assert.Equal(t, "For M003.", res.AnswerText)
	// run --subject: in the bare sandbox, and with --domain as exec runs it.
	o = s.run(false, "", "run", "--subject", "M004", who)
	require.Equal(t, ExitOK, o.code, o.err+o.out)
	assert.Contains(t, o.out, "answer_text: For M004.")
	o = s.run(false, "", "run", "--subject", "M005", "--domain", "../../domains/library", who)
	require.Equal(t, ExitOK, o.code, o.err+o.out)
	require.NoError(t, json.Unmarshal([]byte(o.out), &res))
	assert.Equal(t, "For M005.", res.AnswerText)
	o = s.run(false, "", "run", "--subject", " M4", who)
	assert.Equal(t, ExitUsage, o.code, o.out)
	assert.Contains(t, o.err, "has spaces at an end")

	o = s.run(false, "", "exec", "--subject", "M001 ", plan)
	assert.Equal(t, ExitUsage, o.code, o.out)
	assert.Contains(t, o.err, "has spaces at an end")
}

// token create --subject pins a proposer's token; another role's is refused.
func TestTokenCreateSubject(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	o := s.run(false, "", "db", "init")
	require.Equal(t, ExitOK, o.code, o.err)
	o = s.run(false, "", "token", "create", "agent-c1", "--role", "proposer", "--subject", "C1", "--json")
	require.Equal(t, ExitOK, o.code, o.err)
	var created tokenCreated
	require.NoError(t, json.Unmarshal([]byte(o.out), &created))
	assert.Equal(t, "C1", created.Subject)

	o = s.run(false, "", "token", "create", "boss", "--role", "approver", "--subject", "C1")
	assert.NotEqual(t, ExitOK, o.code)
	assert.Contains(t, o.err, "only a proposer's token can be pinned to a subject")
}
