package server

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// protocols are the MCP versions the confirmation is tested on: the latest, where the client
// answers the server's input request and calls again (multi round-trip), and older ones, where
// the SDK's server middleware sends elicitation/create itself. 2025-06-18 declares elicitation
// as {} (form implied).
var protocols = []string{"", "2025-11-25", "2025-06-18"}

// person answers elicitations as scripted and remembers the questions.
type person struct {
	mu        sync.Mutex
	answers   []string // actions, in order; "accept" once they run out
	questions []string
}

func (p *person) handler(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.questions = append(p.questions, req.Params.Message)
	action := "accept"
	if len(p.answers) > 0 {
		action, p.answers = p.answers[0], p.answers[1:]
	}
	return &mcp.ElicitResult{Action: action}, nil
}

func (p *person) asked() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.questions...)
}

func dryRunPurchase(t *testing.T, cs *mcp.ClientSession, request string) RunDocument {
	t.Helper()
	var run RunDocument
	res := call(t, cs, "run_plan", RunRequest{Program: example(t, "02_purchase_wayfarer.star"), Request: request}, &run)
	require.False(t, res.IsError, text(res))
	require.Equal(t, StatePending, run.State)
	return run
}

func TestMCPApplyAsksThePersonFirst(t *testing.T) {
	t.Parallel()
	for _, version := range protocols {
		for _, overHTTP := range []bool{false, true} {
			t.Run(label(version)+map[bool]string{false: "/pipe", true: "/http"}[overHTTP], func(t *testing.T) {
				f := newFixture(t, Options{})
				p := &person{}
				cs := mcpClientWith(t, f, overHTTP, &mcp.ClientOptions{ElicitationHandler: p.handler}, version)
				run := dryRunPurchase(t, cs, "Purchase 3 Wayfarer sunglasses for customer Alice.")
				ledger := f.count("transactions")

				res := call(t, cs, "apply_run", ApplyInput{RunID: run.RunID, Digest: "sha256:0000"}, nil)
				assert.Contains(t, text(res), CodeDigestMismatch)
				assert.Empty(t, p.asked(), "a wrong digest is refused before the person is asked")

				var applied RunDocument
				res = call(t, cs, "apply_run", ApplyInput{RunID: run.RunID, Digest: run.Digest}, &applied)
				require.False(t, res.IsError, text(res))
				assert.Equal(t, StateApplied, applied.State)
				assert.Equal(t, int64(3), f.committed("inventory", "SG002")["quantity_in_stock"])
				assert.Equal(t, ledger+1, f.count("transactions"))

				asked := p.asked()
				require.Len(t, asked, 1, "the person is asked once, before the write")
				assert.Equal(t, `Apply run `+run.RunID+`? It writes inventory: 1 updated; transactions: 1 inserted (digest `+run.Digest[:len("sha256:")+12]+`…). `+
					`The request it answers, as the proposer wrote it: "Purchase 3 Wayfarer sunglasses for customer Alice."`, asked[0])

				res = call(t, cs, "apply_run", ApplyInput{RunID: run.RunID, Digest: run.Digest}, nil)
				require.False(t, res.IsError, text(res))
				assert.Len(t, p.asked(), 1, "an applied run is answered without asking again")
			})
		}
	}
}

func TestMCPApplyNotConfirmedWritesNothing(t *testing.T) {
	t.Parallel()
	// Each protocol version on both transports; the answer alternates so that a decline and a
	// cancel each cross both transports (the full product is twice the time for no other path).
	for v, version := range protocols {
		for h, overHTTP := range []bool{false, true} { // issue 27: over HTTP it applied without asking
			action := []string{"decline", "cancel"}[(v+h)%2]
			t.Run(label(version)+"/"+action+map[bool]string{false: "/pipe", true: "/http"}[overHTTP], func(t *testing.T) {
				f := newFixture(t, Options{})
				p := &person{answers: []string{action}}
				cs := mcpClientWith(t, f, overHTTP, &mcp.ClientOptions{ElicitationHandler: p.handler}, version)
				run := dryRunPurchase(t, cs, "Purchase 3 Wayfarer sunglasses for customer Alice.")
				ledger := f.count("transactions")

				var doc RunDocument
				res := call(t, cs, "apply_run", ApplyInput{RunID: run.RunID, Digest: run.Digest}, &doc)
				assert.True(t, res.IsError, "an apply that wrote nothing is a tool error")
				assert.Contains(t, text(res), CodeDeclined)
				assert.Contains(t, text(res), "nothing was written")
				assert.Equal(t, StatePending, doc.State, "the result carries the run, still pending")
				assert.Equal(t, run.Digest, doc.Digest)
				assert.Equal(t, int64(6), f.committed("inventory", "SG002")["quantity_in_stock"])
				assert.Equal(t, ledger, f.count("transactions"))
				var shown RunDocument
				call(t, cs, "show_run", RunRef{RunID: run.RunID}, &shown)
				assert.Equal(t, StatePending, shown.State)

				// Asked again, the person agrees: the same digest applies the run.
				var applied RunDocument
				res = call(t, cs, "apply_run", ApplyInput{RunID: run.RunID, Digest: run.Digest}, &applied)
				require.False(t, res.IsError, text(res))
				assert.Equal(t, StateApplied, applied.State)
				assert.Equal(t, int64(3), f.committed("inventory", "SG002")["quantity_in_stock"])
				assert.Len(t, p.asked(), 2)
			})
		}
	}
}

// A client without elicitation keeps the digest as the approval; so does a server that turned the
// question off.
func TestMCPApplyWithoutElicitationAppliesOnTheDigest(t *testing.T) {
	t.Parallel()
	for _, version := range protocols {
		t.Run(label(version), func(t *testing.T) {
			f := newFixture(t, Options{})
			cs := mcpClientWith(t, f, false, nil, version)
			run := dryRunPurchase(t, cs, "")
			var applied RunDocument
			res := call(t, cs, "apply_run", ApplyInput{RunID: run.RunID, Digest: run.Digest}, &applied)
			require.False(t, res.IsError, text(res))
			assert.Equal(t, StateApplied, applied.State)
			assert.Equal(t, int64(3), f.committed("inventory", "SG002")["quantity_in_stock"])
		})
	}
	// Over HTTP too (each protocol), a client without elicitation is told that nobody was asked.
	for _, version := range protocols {
		t.Run(label(version)+"/http", func(t *testing.T) {
			f := newFixture(t, Options{})
			cs := mcpClientWith(t, f, true, nil, version)
			run := dryRunPurchase(t, cs, "")
			var applied RunDocument
			res := call(t, cs, "apply_run", ApplyInput{RunID: run.RunID, Digest: run.Digest}, &applied)
			require.False(t, res.IsError, text(res))
			assert.Equal(t, StateApplied, applied.State)
			require.NotEmpty(t, res.Content)
			first, ok := res.Content[0].(*mcp.TextContent)
			require.True(t, ok)
			assert.Equal(t, "Not confirmed by a person through this client: the client declared no form elicitation, so the person could not be asked through it. "+
				"Run "+run.RunID+" was applied on the digest alone, by admin (admin).", first.Text)
		})
	}
	// Apply asks with a form: a client that declared only URL elicitation is not asked.
	t.Run("url-only", func(t *testing.T) {
		f := newFixture(t, Options{})
		p := &person{answers: []string{"decline"}}
		cs := mcpClientWith(t, f, false, &mcp.ClientOptions{ElicitationHandler: p.handler,
			Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}}, "")
		run := dryRunPurchase(t, cs, "")
		var applied RunDocument
		res := call(t, cs, "apply_run", ApplyInput{RunID: run.RunID, Digest: run.Digest}, &applied)
		require.False(t, res.IsError, text(res))
		assert.Equal(t, StateApplied, applied.State)
		assert.Empty(t, p.asked())
	})
	t.Run("NoElicit", func(t *testing.T) {
		f := newFixture(t, Options{NoElicit: true})
		p := &person{answers: []string{"decline"}}
		cs := mcpClientWith(t, f, false, &mcp.ClientOptions{ElicitationHandler: p.handler}, "")
		run := dryRunPurchase(t, cs, "")
		var applied RunDocument
		res := call(t, cs, "apply_run", ApplyInput{RunID: run.RunID, Digest: run.Digest}, &applied)
		require.False(t, res.IsError, text(res))
		assert.Equal(t, StateApplied, applied.State)
		assert.Contains(t, text(res), "Not confirmed by a person through this client: the server was started with confirmation by elicitation turned off")
		assert.Empty(t, p.asked())
	})
}

// The question is one line whatever the request holds: a control character the client planted
// in the customer's request is shown escaped, not sent raw to the person's screen.
func TestMCPApplyQuestionEscapesTheRequest(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	p := &person{answers: []string{"decline"}}
	cs := mcpClientWith(t, f, false, &mcp.ClientOptions{ElicitationHandler: p.handler}, "")
	run := dryRunPurchase(t, cs, "Alice\x1b[2J\nwants \u202eWayfarers")
	call(t, cs, "apply_run", ApplyInput{RunID: run.RunID, Digest: run.Digest}, nil)
	asked := p.asked()
	require.Len(t, asked, 1)
	assert.True(t, strings.HasSuffix(asked[0], `as the proposer wrote it: "Alice\x1b[2J\nwants \u202eWayfarers"`), "%s", asked[0])
	assert.NotContains(t, asked[0], "\x1b")
	assert.NotContains(t, asked[0], "\n")
	assert.NotContains(t, asked[0], "\u202e")
}

// An answer counts only for the question it answers: one the client sends unasked, or one given
// about another run, does not approve an apply.
func TestMCPApplyAnswerIsBoundToItsQuestion(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	p := &person{answers: []string{"decline", "decline"}}
	cs := mcpClientWith(t, f, false, &mcp.ClientOptions{ElicitationHandler: p.handler}, "")
	other := dryRunPurchase(t, cs, "")
	run := dryRunPurchase(t, cs, "")
	yes := mcp.InputResponseMap{confirmKey: &mcp.ElicitResult{Action: "accept"}}
	for _, state := range []string{"", confirmState(&other)} {
		res, err := cs.CallTool(testContext(t), &mcp.CallToolParams{Name: "apply_run",
			Arguments: ApplyInput{RunID: run.RunID, Digest: run.Digest}, InputResponses: yes, RequestState: state})
		require.NoError(t, err)
		assert.True(t, res.IsError)
		assert.Contains(t, text(res), CodeDeclined, "the person was asked, and declined")
	}
	assert.Len(t, p.asked(), 2)
	assert.Equal(t, int64(6), f.committed("inventory", "SG002")["quantity_in_stock"])
}

// A proposer's request cannot pass for starplan's words in the question: starplan's own words
// come first, and the request follows its label as one quoted string that ends where it ends.
func TestMCPConfirmationQuotesAHostileRequest(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	hostile := "Purchase 3 Wayfarer\": no changes, nothing will be written (digest sha256:0000…)? Yes is safe.\n" +
		"Apply run r_0: no changes, nothing will be written … Yes is safe \u202e\"x"
	p := &person{}
	cs := mcpClientWith(t, f, false, &mcp.ClientOptions{ElicitationHandler: p.handler}, "")
	run := dryRunPurchase(t, cs, hostile)
	res := call(t, cs, "apply_run", ApplyInput{RunID: run.RunID, Digest: run.Digest}, nil)
	require.False(t, res.IsError, text(res))

	asked := p.asked()
	require.Len(t, asked, 1)
	q := asked[0]
	assert.NotContains(t, q, "\n", "one line")
	assert.NotContains(t, q, "\u202e", "no raw bidi control")
	ours, quoted, ok := strings.Cut(q, " The request it answers, as the proposer wrote it: ")
	require.True(t, ok, "%s", q)
	assert.Equal(t, `Apply run `+run.RunID+`? It writes inventory: 1 updated; transactions: 1 inserted (digest `+run.Digest[:len("sha256:")+12]+`…).`, ours,
		"starplan's words come first and hold nothing of the request")
	quoted, _, _ = strings.Cut(quoted, "… (cut:")
	got, err := strconv.Unquote(quoted)
	require.NoError(t, err, "the request is one quoted string: %s", quoted)
	assert.True(t, strings.HasPrefix(hostile, got), "the quote holds the request (or its start) and nothing else: %q", got)
}
