package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/starplan/starplan/diffview"
	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/internal/termsafe"
)

// The MCP tools' inputs that are not the HTTP API's bodies.
type (
	// RunRef names a run.
	RunRef struct {
		RunID string `json:"run_id" jsonschema:"the run's id, as run_plan returned it"`
	}
	// ApplyInput is the input of apply_run.
	ApplyInput struct {
		RunID  string `json:"run_id" jsonschema:"the run's id, as run_plan returned it"`
		Digest string `json:"digest" jsonschema:"the digest run_plan returned with the changes you reviewed; a run is applied only with its own digest"`
	}
	// RejectInput is the input of reject_run.
	RejectInput struct {
		RunID    string `json:"run_id" jsonschema:"the run's id, as run_plan returned it"`
		Feedback string `json:"feedback" jsonschema:"why the run is rejected: what the plan should do instead"`
	}
	// ListInput is the input of list_runs.
	ListInput struct {
		State  string `json:"state,omitempty" jsonschema:"only runs in this state: pending, applied, rejected, conflict, done or failed"`
		Limit  int    `json:"limit,omitempty" jsonschema:"the most runs to list (default 100, at most 1000)"`
		Cursor string `json:"cursor,omitempty" jsonschema:"the next_cursor of the previous page, to list the next one"`
	}
	// Empty is the input of tools that take none.
	Empty struct{}
)

// MCP returns the MCP server with starplan's tools, for any transport: Handler mounts it at
// MCPPath (streamable HTTP); the serve command runs it on stdio.
func (s *Server) MCP() *mcp.Server { return s.mcp }

// RunMCP serves MCP on one transport (stdio, an in-memory pipe) until the client disconnects or
// ctx ends. When ctx ends, the calls in flight finish (their own contexts are not cancelled)
// before the session closes: a drain, as for HTTP.
func (s *Server) RunMCP(ctx context.Context, t mcp.Transport) error {
	ss, err := s.mcp.Connect(context.WithoutCancel(ctx), t, nil)
	if err != nil {
		return fmt.Errorf("starting the MCP session: %w", err)
	}
	ended := make(chan error, 1)
	go func() { ended <- ss.Wait() }()
	select {
	case err := <-ended:
		return err
	case <-ctx.Done():
		ss.Close() // waits for the calls in flight
		<-ended
		return nil
	}
}

func (s *Server) newMCP() (*mcp.Server, error) {
	ref, err := s.eng.SystemPrompt()
	if err != nil {
		return nil, fmt.Errorf("rendering the plan reference for run_plan: %w", err)
	}
	version := s.opts.Version
	if version == "" {
		version = "dev"
	}
	m := mcp.NewServer(&mcp.Implementation{Name: "starplan", Title: "starplan", Version: version}, &mcp.ServerOptions{
		Instructions: "starplan runs plans (short Starlark programs) against a store with dry runs. " +
			"Write a plan from run_plan's reference, dry-run it with run_plan, show the person the changes " +
			"(the diff in changes) and, once they approve, apply_run with the run's digest; otherwise reject_run with feedback.",
		SchemaCache: toolSchemaCache,
	})
	m.AddReceivingMiddleware(s.mcpGuard) // who calls, and the right each tool needs (rights.go)
	if err := addTools(s, m, ref); err != nil {
		panic(fmt.Sprintf("the MCP tools' schemas: %v", err)) // Go types only: a defect
	}
	return m, nil
}

// The tools' handlers (Operations registers them).

func (s *Server) toolDescribe(ctx context.Context, _ *mcp.CallToolRequest, _ Empty) (*mcp.CallToolResult, *Description, error) {
	d, err := s.Describe()
	return nil, d, err
}

func (s *Server) toolCheck(ctx context.Context, _ *mcp.CallToolRequest, in CheckRequest) (*mcp.CallToolResult, *CheckReport, error) {
	rep, err := s.Check(in)
	return nil, rep, err
}

func (s *Server) toolRun(ctx context.Context, req *mcp.CallToolRequest, in RunRequest) (*mcp.CallToolResult, *RunDocument, error) {
	doc, err := s.run(ctx, in, OriginMCP, progress(ctx, req))
	return nil, doc, err
}

func (s *Server) toolApply(ctx context.Context, req *mcp.CallToolRequest, in ApplyInput) (*mcp.CallToolResult, *RunDocument, error) {
	if err := s.mayApply(ctx, in.RunID); err != nil {
		return nil, nil, err // before the person is asked
	}
	if s.asks(req) {
		doc, pending, err := s.toApply(in.RunID, in.Digest)
		if err != nil {
			return nil, nil, err
		}
		if pending {
			answer := confirmation(req, doc)
			if answer == nil { // ask first: the SDK calls again with the answer
				return &mcp.CallToolResult{
					InputRequests: mcp.InputRequestMap{confirmKey: &mcp.ElicitParams{Message: confirmMessage(doc), RequestedSchema: confirmForm}},
					RequestState:  confirmState(doc),
				}, nil, nil
			}
			if answer.Action != "accept" {
				return declined(doc, answer.Action), doc, nil // nothing was written
			}
		}
	}
	doc, err := s.apply(ctx, in.RunID, in.Digest, OriginMCP, progress(ctx, req))
	if err != nil {
		return nil, nil, err
	}
	if doc.State == StateConflict {
		return &mcp.CallToolResult{IsError: true}, doc, nil // nothing was written; the document says why
	}
	if why := s.unasked(req); why != "" && doc.State == StateApplied {
		return unconfirmed(ctx, doc, why), doc, nil // never silently: the result says nobody was asked
	}
	return nil, doc, nil
}

func (s *Server) toolReject(ctx context.Context, _ *mcp.CallToolRequest, in RejectInput) (*mcp.CallToolResult, *RunDocument, error) {
	doc, err := s.Reject(ctx, in.RunID, in.Feedback, OriginMCP)
	return nil, doc, err
}

func (s *Server) toolList(ctx context.Context, _ *mcp.CallToolRequest, in ListInput) (*mcp.CallToolResult, *RunList, error) {
	list, err := s.listFor(ctx, in.State, in.Limit, in.Cursor)
	return nil, list, err
}

func (s *Server) toolShow(ctx context.Context, _ *mcp.CallToolRequest, in RunRef) (*mcp.CallToolResult, *RunDocument, error) {
	doc, err := s.showFor(ctx, in.RunID)
	return documentText(doc), doc, err
}

func (s *Server) toolReplay(ctx context.Context, _ *mcp.CallToolRequest, in RunRef) (*mcp.CallToolResult, *engine.ReplayReport, error) {
	rep, err := s.replayFor(ctx, in.RunID)
	return nil, rep, err
}

// confirmKey names apply_run's one input request: the person's confirmation.
const confirmKey = "confirm_apply"

// confirmForm is the schema of the confirmation: no fields, the person accepts or declines.
var confirmForm = map[string]any{"type": "object", "properties": map[string]any{}}

// asks reports whether apply_run asks the person before it writes: the client declared form
// elicitation and Options.NoElicit is not set. Without it the digest alone approves.
func (s *Server) asks(req *mcp.CallToolRequest) bool {
	if s.opts.NoElicit {
		return false
	}
	caps := req.ClientCapabilities()
	if caps == nil || caps.Elicitation == nil {
		return false
	}
	e := caps.Elicitation
	return e.Form != nil || e.URL == nil // neither set means form (the older protocol versions)
}

// unasked says why apply_run did not ask the person through this client, or "" when it did.
func (s *Server) unasked(req *mcp.CallToolRequest) string {
	switch {
	case s.asks(req):
		return ""
	case s.opts.NoElicit:
		return "the server was started with confirmation by elicitation turned off"
	}
	return "the client declared no form elicitation, so the person could not be asked through it"
}

// unconfirmed is apply_run's answer when it applied without asking the person: the run, and a
// first line that says so and on whose authority (the token's name and role) it was applied.
func unconfirmed(ctx context.Context, doc *RunDocument, why string) *mcp.CallToolResult {
	p := principal(ctx)
	note := fmt.Sprintf("Not confirmed by a person through this client: %s. Run %s was applied on the digest alone, by %s (%s).", why, doc.RunID, p.Name, p.Role)
	raw, _ := json.Marshal(doc)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: note}, &mcp.TextContent{Text: string(raw)}}}
}

// confirmState ties the answer to the question: the answer counts only for the run and digest it
// was asked about. It is opaque to the client, which echoes it with the answer.
func confirmState(doc *RunDocument) string { return "confirm " + doc.RunID + " " + doc.Digest }

// confirmation returns the person's answer to the question asked about doc, or nil when it has
// not been asked yet. The client relays the answer: as everything an MCP client reports, it is
// the client's word, and the digest stays what binds an apply to the reviewed changes.
func confirmation(req *mcp.CallToolRequest, doc *RunDocument) *mcp.ElicitResult {
	if req.Params.RequestState != confirmState(doc) {
		return nil
	}
	answer, _ := req.Params.InputResponses[confirmKey].(*mcp.ElicitResult)
	return answer
}

// MaxQuotedRequest is the most bytes of a proposer's request that a question to a person
// quotes (the MCP confirmation); a longer one is cut and says how long it was.
const MaxQuotedRequest = 200

// confirmMessage is the question, on one line: starplan's own words first (the run, what it
// changes per table, the start of the digest), then the customer's request after a label, as a
// quoted string (termsafe.Quote: its quotes, line breaks and unsafe characters escaped, cut at
// MaxQuotedRequest). The request is the proposer's text: quoted so, it cannot end the quote and
// go on in words that read as starplan's ("no changes, nothing will be written").
func confirmMessage(doc *RunDocument) string {
	msg := "Apply run " + doc.RunID + "? It writes " + diffview.Summary(doc.Changes) + " (digest " + clip(doc.Digest, len(digestPrefix)+12) + ")."
	if doc.Request != "" {
		msg += " The request it answers, as the proposer wrote it: " + termsafe.Quote(doc.Request, MaxQuotedRequest)
	}
	return msg
}

// declined is apply_run's answer when the person did not confirm: a tool error that carries the
// run (still pending) as its structured content.
func declined(doc *RunDocument, action string) *mcp.CallToolResult {
	how := "did not agree to apply"
	switch action {
	case "decline":
		how = "declined to apply"
	case "cancel":
		how = "dismissed the question whether to apply"
	}
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(
		"%s: the person %s run %s; nothing was written. The run is still pending: apply_run again with the same digest "+
			"once they agree, or reject_run with their feedback.", CodeDeclined, how, doc.RunID)}}}
}

// progress returns the observer that sends a call's events to its client as progress
// notifications, or nil when the call carries no progress token. Each event is one step: its
// message is the event's type and a short, escaped detail, and its _meta holds the event. A
// notification that cannot be sent is dropped: progress never fails the call.
func progress(ctx context.Context, req *mcp.CallToolRequest) observer {
	token := req.Params.GetProgressToken()
	if token == nil {
		return nil
	}
	step := 0
	return func(e Event) {
		step++
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: token, Progress: float64(step), Message: progressMessage(e),
			Meta: mcp.Meta{progressEventKey: e},
		})
	}
}

// progressEventKey is the _meta key of a progress notification's event, as /v1/events sends it.
const progressEventKey = "starplan/event"

// progressMessage is an event on one line: "finished r_…: outcome ok, state pending, 2 rows".
// Only the event's message can hold text from elsewhere (an error, a plan's diagnostic): it is
// escaped and cut.
func progressMessage(e Event) string {
	var details []string
	add := func(label, v string) {
		if v != "" {
			details = append(details, label+v)
		}
	}
	add("outcome ", string(e.Outcome))
	add("state ", e.State)
	if e.Rows > 0 {
		add("", fmt.Sprintf("%d rows", e.Rows))
	}
	add("code ", e.Code)
	add("", termsafe.Truncate(termsafe.Escape(e.Message, 0), 160))
	msg := e.Type
	if id := e.RunID; id != "" {
		msg += " " + id
	} else if e.RequestID != "" {
		msg += " " + e.RequestID
	}
	if len(details) > 0 {
		msg += ": " + strings.Join(details, ", ")
	}
	return msg
}
