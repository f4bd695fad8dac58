package server

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/starplan/starplan/access"
	"github.com/starplan/starplan/engine"
)

// Operation is one operation of the API, written once: Handler routes it, the MCP server
// registers its tool, describe's schemas and the README's API table (APITable) come from it.
// TestOperationParity checks that each is reachable on every transport it claims and that
// nothing is served outside the table.
type Operation struct {
	// Name is the operation's own name (run, apply, ...); Body's schema is
	// "<Name>_request" in describe's schemas.
	Name string
	// Method and Path are its HTTP route (Path as http.ServeMux reads it).
	Method, Path string
	// Body is the Go type of the HTTP request body; nil when the request has none.
	Body reflect.Type
	// Out is the Go type of the answer (the same over HTTP and MCP).
	Out reflect.Type
	// Doc is the operation's line in the README's API table (markdown).
	Doc string
	// Right is what a caller needs to run it (package access); the server's auth enforces it.
	Right access.Right
	// Act is what a refusal says the caller may not do ("apply runs").
	Act string
	// RightNote qualifies Right in the README ("own runs; approve for any"): reject needs
	// Propose for one's own run and Approve for anyone's.
	RightNote string
	// Tool is its MCP tool, or nil; NoTool then says why it has none.
	Tool   *ToolSpec
	NoTool string

	handle func(*Server, http.ResponseWriter, *http.Request)
}

// ToolSpec is an operation's MCP tool.
type ToolSpec struct {
	Name, Title string
	// In is the Go type of the tool's input.
	In          reflect.Type
	Annotations *mcp.ToolAnnotations
	// describe returns the tool's description; ref is the plan reference (run_plan carries it).
	describe func(ref string) string
	// outSchema, when set, derives the output schema in place of Out's (describe's, whose
	// field declarations nest).
	outSchema func() (*jsonschema.Schema, error)
	// add registers the tool with its handler on m.
	add func(s *Server, m *mcp.Server, t *mcp.Tool)
}

// toolFunc is a tool's handler: res may carry what the structured output cannot (an error flag,
// input requests); out is the structured output.
type toolFunc[In, Out any] func(s *Server, ctx context.Context, req *mcp.CallToolRequest, in In) (res *mcp.CallToolResult, out *Out, err error)

// tool makes the ToolSpec of a handler. The registered handler reports an error with its hint
// for tools (Error.forTools) and leaves null members out of its output (dropNulls), as the
// portable output schema says.
func tool[In, Out any](name, title string, ann *mcp.ToolAnnotations, describe func(ref string) string, h toolFunc[In, Out]) *ToolSpec {
	return &ToolSpec{
		Name: name, Title: title, In: reflect.TypeFor[In](), Annotations: ann, describe: describe,
		add: func(s *Server, m *mcp.Server, t *mcp.Tool) {
			mcp.AddTool(m, t, func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
				res, out, err := h(s, ctx, req, in)
				if err != nil {
					if e, ok := err.(*Error); ok {
						return nil, nil, e.forTools()
					}
					return nil, nil, err
				}
				if out == nil {
					return res, nil, nil
				}
				raw, err := dropNulls(out)
				if err != nil {
					return nil, nil, internal(fmt.Errorf("encoding %s's answer: %w", name, err)).forTools()
				}
				return res, raw, nil
			})
		},
	}
}

func fixed(s string) func(string) string { return func(string) string { return s } }

var (
	closed, open = false, true
	readOnly     = &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &closed}
)

// Operations is the API: every HTTP route under /v1 and every MCP tool, in the README's order.
// The review page's own routes (review.go), the MCP endpoint and the login are not operations.
var Operations = []Operation{
	{
		Name: "describe", Act: "describe the store", Method: http.MethodGet, Path: "/v1/describe", Out: reflect.TypeFor[Description](), Right: access.Read,
		Doc:    "tables and field types, helpers, contract, rules, limits, the plan reference a model writes from, JSON Schemas of the requests and the run document",
		handle: (*Server).handleDescribe,
		Tool: withOutSchema(tool("describe", "Describe the store", readOnly, fixed(
			"The store's tables and field types, the helpers a plan can call, the output contract, the mutation policy, the limits, and JSON Schemas of the documents."),
			(*Server).toolDescribe), descriptionSchema),
	},
	{
		Name: "check", Act: "check plans", Method: http.MethodPost, Path: "/v1/check", Body: reflect.TypeFor[CheckRequest](), Out: reflect.TypeFor[CheckReport](), Right: access.Propose,
		Doc:    "`{program | reply | plan_json}`: the check alone: every diagnostic, the rewrites",
		handle: (*Server).handleCheck,
		Tool: tool("check_plan", "Check a plan", readOnly, fixed(
			"Check a plan without running it: every problem at once, each with its line, code and a hint, "+
				"and the Python-isms rewritten to Starlark. Give the bare program as program, or a reply holding it as reply."),
			(*Server).toolCheck),
	},
	{
		Name: "run", Act: "dry-run plans", Method: http.MethodPost, Path: "/v1/runs", Body: reflect.TypeFor[RunRequest](), Out: reflect.TypeFor[RunDocument](), Right: access.Propose,
		Doc:    "`{program | reply | plan_json, request, limits?, subject?}`: a dry run: the result document plus `digest` and `state`; `limits` may only lower the defaults; `subject` is who the run acts for (403 `subject-mismatch` for another than the token's pinned one, 400 `subject-invalid`)",
		handle: (*Server).handleRun,
		Tool: tool("run_plan", "Dry-run a plan", readOnly, func(ref string) string {
			return "Dry-run a plan against the store: the answer, the STATUS, the diagnostics, and the changes it " +
				"would make, with the digest of those changes. Nothing is written: a run that changes data stays pending " +
				"until apply_run with its run_id and digest. Give the customer's request as request, and the id of the customer " +
				"the run acts for as subject when the domain works on someone's behalf.\n\n" +
				"How to write the plan (the program):\n\n" + ref
		}, (*Server).toolRun),
	},
	{
		Name: "apply", Act: "apply runs", Method: http.MethodPost, Path: "/v1/runs/{id}/apply", Body: reflect.TypeFor[ApplyRequest](), Out: reflect.TypeFor[RunDocument](), Right: access.Propose,
		RightNote: "a proposer only where an auto-approval rule of the domain lets the run through; else approve",
		Doc:       "`{digest}`: apply once (or record one of the N approvals the domain requires): 200 applied or approved, 409 conflict (with the run), `run-changed` (other servers kept writing the run meanwhile: look again, repeat), 412 `digest-mismatch`, 403 `forbidden-role`, `approval-required`, `run-expired`",
		handle:    (*Server).handleApply,
		Tool: tool("apply_run", "Apply a pending run", &mcp.ToolAnnotations{DestructiveHint: &open, IdempotentHint: true, OpenWorldHint: &closed}, fixed(
			"Write a pending run's changes, all or nothing, if digest is the digest of the changes that were "+
				"reviewed. When the client supports elicitation, the person is first asked to confirm, with a one-line "+
				"summary of the changes; if they do not, nothing is written, the result is an error ("+CodeDeclined+") "+
				"carrying the run, still pending, and it can be applied later with the same digest. "+
				"Applying an applied run again answers with the first result and writes nothing. If the data "+
				"moved since the dry run the outcome is conflict and nothing is written: run the plan again."),
			(*Server).toolApply),
	},
	{
		Name: "reject", Act: "reject runs", Method: http.MethodPost, Path: "/v1/runs/{id}/reject", Body: reflect.TypeFor[RejectRequest](), Out: reflect.TypeFor[RunDocument](), Right: access.Propose,
		RightNote: "own runs; approve for any",
		Doc: "`{feedback}`: record the decision; the run can never be applied (the CLI's `apply` refuses it too). For a run the model wrote, the model is asked again with the feedback, " +
			"in the background (at most 3 times per question): events `replanning`, then `finished` with `parent_run_id`; 409 `already-applied`, `run-changed` (other servers kept writing the run meanwhile: look again, repeat)",
		handle: (*Server).handleReject,
		Tool: tool("reject_run", "Reject a run", &mcp.ToolAnnotations{DestructiveHint: &closed, IdempotentHint: true, OpenWorldHint: &closed}, fixed(
			"Record that a run is rejected, with feedback saying what should be done instead. A pending run "+
				"can then never be applied. Rejecting it again answers with the first decision."),
			(*Server).toolReject),
	},
	{
		Name: "list", Act: "list runs", Method: http.MethodGet, Path: "/v1/runs", Out: reflect.TypeFor[RunList](), Right: access.Read,
		Doc:    "`?state=pending&limit=N&cursor=`: runs, newest first; states `pending`, `applied`, `rejected`, `conflict`, `done`, `failed`; `count` and `bytes` of the whole log",
		handle: (*Server).handleList,
		Tool: tool("list_runs", "List runs", readOnly, fixed(
			"The runs, newest first, optionally only those in one state (pending, applied, rejected, conflict, done, failed)."),
			(*Server).toolList),
	},
	{
		Name: "show", Act: "show runs", Method: http.MethodGet, Path: "/v1/runs/{id}", Out: reflect.TypeFor[RunDocument](), Right: access.Read,
		Doc:    "a run as the audit log holds it, with its digest, state and decision",
		handle: (*Server).handleShow,
		Tool: tool("show_run", "Show a run", readOnly, fixed(
			"A run as the audit log holds it: the result document, its digest, its state, and a reviewer's decision."),
			(*Server).toolShow),
	},
	{
		Name: "ask", Act: "ask the model for plans", Method: http.MethodPost, Path: "/v1/ask", Body: reflect.TypeFor[AskRequest](), Out: reflect.TypeFor[RunDocument](), Right: access.Propose,
		Doc: "`{request, subject?}`: the configured model writes the plan (repairs included); the run as `POST /v1/runs` returns it, with its `attempts` as `starplan ask --json` prints them. " +
			"Off (501 `no-model`) unless `serve` has a model: `OPENAI_API_KEY` / `OPENAI_BASE_URL` / `STARPLAN_MODEL` or `--model`, `--base-url`",
		handle: (*Server).handleAsk,
		NoTool: "an MCP client is the planner: it writes the plan itself and dry-runs it with run_plan; a tool would have starplan's model plan for another model",
	},
	{
		Name: "replay", Act: "replay runs", Method: http.MethodPost, Path: "/v1/runs/{id}/replay", Out: reflect.TypeFor[engine.ReplayReport](), Right: access.Administer,
		Doc:    "run the recorded program again (its request, limits and `now()`) against the current store: `identical`, or the `differences`; nothing is written (`starplan runs replay ID`)",
		handle: (*Server).handleReplay,
		Tool: tool("replay_run", "Replay a run", readOnly, fixed(
			"Run a recorded run's program again (its request, limits and now()) against the current store and say whether it gives "+
				"the recorded result (identical) or how it differs. Nothing is recorded or written."),
			(*Server).toolReplay),
	},
	{
		Name: "events", Act: "follow events", Method: http.MethodGet, Path: "/v1/events", Right: access.Read,
		Doc: "Server-Sent Events of every run the server's engine makes (HTTP, MCP, and CLI commands that go through it; `ask` tells each attempt): `started` (with the run id), `finished`, `applied`, `rejected`, `failed`; `Last-Event-ID` replays the last 1,024 (at most 4 MiB; an event's message and feedback are cut to 2 KiB); " +
			"at most 64 streams at once, then 503 `too-many-streams`",
		handle: (*Server).handleEvents,
		NoTool: "a tool answers once and a stream does not end: over MCP a run_plan or apply_run call with a progress token receives its run's events as progress notifications, and show_run has a run's recorded events",
	},
}

// withOutSchema sets a tool's output schema derivation.
func withOutSchema(t *ToolSpec, f func() (*jsonschema.Schema, error)) *ToolSpec {
	t.outSchema = f
	return t
}

// routes registers every operation's HTTP route on mux, each path with its methods (others get
// 405 with Allow).
func (s *Server) routes(mux interface{ Handle(string, http.Handler) }) {
	byPath := map[string]methods{}
	var order []string
	for _, op := range Operations {
		if byPath[op.Path] == nil {
			byPath[op.Path] = methods{}
			order = append(order, op.Path)
		}
		handle := op.handle
		byPath[op.Path][op.Method] = func(w http.ResponseWriter, r *http.Request) { handle(s, w, r) }
	}
	for _, path := range order {
		mux.Handle(path, byPath[path])
	}
}

// addTools registers every operation's MCP tool on m, with portable input and output schemas
// (portable); ref is the plan reference run_plan's description carries.
func addTools(s *Server, m *mcp.Server, ref string) error {
	schemas, err := toolSchemas()
	if err != nil {
		return err
	}
	for i, op := range Operations {
		spec := op.Tool
		if spec == nil {
			continue
		}
		spec.add(s, m, &mcp.Tool{
			Name: spec.Name, Title: spec.Title, Description: spec.describe(ref), Annotations: spec.Annotations,
			InputSchema: schemas[i][0], OutputSchema: schemas[i][1],
		})
	}
	return nil
}

// toolSchemas are the input and output schemas of each operation's tool (by its index in
// Operations), made once per process: they follow from Go types alone. Every server passes the
// same schema values with toolSchemaCache, so the SDK resolves each once per process, not once
// per server (it was most of a server's start).
var toolSchemas = sync.OnceValues(func() ([][2]*jsonschema.Schema, error) {
	out := make([][2]*jsonschema.Schema, len(Operations))
	for i, op := range Operations {
		if op.Tool == nil {
			continue
		}
		in, err := toolSchema(op.Tool.In, nil)
		if err != nil {
			return nil, err
		}
		res, err := toolSchema(op.Out, op.Tool.outSchema)
		if err != nil {
			return nil, err
		}
		out[i] = [2]*jsonschema.Schema{in, res}
	}
	return out, nil
})

// toolSchemaCache holds what the SDK resolved of toolSchemas' values, for every server.
var toolSchemaCache = mcp.NewSchemaCache()

// APITable is the README's table of the API, generated from Operations: each operation's HTTP
// route, its MCP tool (or why none), the right it needs, and its doc line.
func APITable() string {
	var b strings.Builder
	b.WriteString("| endpoint | MCP tool | right | what it does |\n|---|---|---|---|\n")
	for _, op := range Operations {
		tool := "none: " + op.NoTool
		if op.Tool != nil {
			tool = "`" + op.Tool.Name + "`"
		}
		doc := op.Doc
		endpoint := "`" + op.Method + " " + op.Path + "`"
		if strings.HasPrefix(doc, "`") { // the body or query, in the endpoint's cell
			if i := strings.Index(doc, "`: "); i > 0 {
				endpoint += " " + doc[:i+1]
				doc = doc[i+3:]
			}
		}
		right := string(op.Right)
		if op.RightNote != "" {
			right += " (" + op.RightNote + ")"
		}
		cell := strings.NewReplacer("|", `\|`).Replace
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", cell(endpoint), cell(tool), right, cell(doc))
	}
	return b.String()
}
