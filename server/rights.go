package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/starplan/starplan/access"
	"github.com/starplan/starplan/engine"
)

// Who may call which operation. Every request carries a principal (auth.go resolves it: a
// stored token, the legacy admin token, a page session, or over MCP on stdio the local user),
// and every operation needs one right of package access; require is the one check, called for
// HTTP by enforce (keyed by the route) and for MCP by mcpGuard (keyed by the tool). A refusal is
// 403 forbidden-role, or over MCP a tool error with the same code and the run's page.

// op is an operation as the rights see it: the right it needs, and what it does, for a refusal.
type op struct {
	right access.Right
	what  string
}

// routeRights is the operation of each HTTP route, by pattern and method ("" for any method):
// the operations' table (Operations), MCPPath (each tool: toolRights) and the review page. A
// route of the mux that is not here is refused (fail closed); the page's own paths ("/") are
// decided by authorize. toolRights is the right each MCP tool needs; a tool that is not there
// needs the admin right.
var routeRights, toolRights = rightsOf(Operations)

func rightsOf(ops []Operation) (map[string]map[string]op, map[string]op) {
	routes := map[string]map[string]op{
		MCPPath: {"": {access.Read, "use MCP"}},
		"/":     {"": {access.Read, "read the review page"}},
	}
	tools := map[string]op{}
	for _, o := range ops {
		if routes[o.Path] == nil {
			routes[o.Path] = map[string]op{}
		}
		routes[o.Path][o.Method] = op{o.Right, o.Act}
		if o.Tool != nil {
			tools[o.Tool.Name] = op{o.Right, o.Act}
		}
	}
	return routes, tools
}

// callerKey is the context key of a request's caller (withCaller).
type callerKey struct{}

// withCaller returns ctx carrying who: its principal for the engine (access.NewContext) and the
// token it proved for the server.
func withCaller(ctx context.Context, who caller) context.Context {
	return access.NewContext(context.WithValue(ctx, callerKey{}, who), who.p)
}

// principal is who acts in ctx. A call of the Go API without one (an embedding program) is the
// local user's; HTTP and MCP always set one.
func principal(ctx context.Context) access.Principal {
	if p, ok := access.FromContext(ctx); ok {
		return p
	}
	return access.Local()
}

// require returns nil when the principal of ctx holds right x, else a forbidden-role *Error
// that names the principal, its role, the operation (what) and, when the operation concerns a
// run, where a person who may can review it.
func (s *Server) require(ctx context.Context, x access.Right, what, runID string) *Error {
	p := principal(ctx)
	if p.Can(x) {
		return nil
	}
	return s.forbidden(p, x, what, runID)
}

// forbidden is the refusal of what to p, which lacks right x.
func (s *Server) forbidden(p access.Principal, x access.Right, what, runID string) *Error {
	who := map[access.Right]string{
		access.Read:       "any role",
		access.Propose:    "a proposer, an approver or an admin",
		access.Approve:    "an approver or an admin",
		access.Administer: "an admin",
	}[x]
	hint := "ask an admin for a token with the role it needs (starplan token create NAME --role ROLE)"
	if runID != "" {
		hint = "a person with an approver's token reviews run " + runID + " on the review page: " + s.runPage(runID)
	}
	return errorf(http.StatusForbidden, CodeForbiddenRole, hint,
		"%s (%s) may not %s: that needs the %s right, which %s holds", p.Name, p.Role, what, x, who)
}

// SetPageURL tells the server the address its review page is reached at
// ("http://127.0.0.1:7410"), for the links to a run that a refusal carries (an MCP client whose
// token may not apply it gets where a person can). Until it is set the links are relative.
func (s *Server) SetPageURL(base string) { s.pageURL.Store(&base) }

// runPage is the review page's address of a run: the page's address, then #/runs/ID.
func (s *Server) runPage(id string) string {
	base := ""
	if p := s.pageURL.Load(); p != nil {
		base = *p
	}
	return base + "/#/runs/" + url.PathEscape(id)
}

// enforce refuses a request whose principal lacks the right of its route (routeRights), before
// the route's handler reads the body. Methods a route does not take pass on to its 405.
func (s *Server) enforce(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, pattern := mux.Handler(r)
		rights, known := routeRights[pattern]
		if !known {
			writeError(w, errorf(http.StatusForbidden, CodeForbiddenRole, "this is a defect of starplan: report it", "no right is declared for %s", clip(pattern, 100)))
			return
		}
		o, ok := rights[r.Method]
		if !ok {
			o, ok = rights[""]
		}
		_, proven := r.Context().Value(callerKey{}).(caller)
		switch {
		case !proven && pattern != "/":
			// Only the page's public files and its login go without a credential (authorize);
			// an operation never runs as nobody, nor falls back to the Go API's local user.
			writeError(w, errUnauthorized())
			return
		case ok && proven:
			if err := s.require(r.Context(), o.right, o.what, runIDIn(pattern, r.URL.Path)); err != nil {
				writeError(w, err)
				return
			}
		}
		mux.ServeHTTP(w, r)
	})
}

// mcpPrincipalKey is where mcpAuth leaves the principal in the SDK's token info.
const mcpPrincipalKey = "starplan/principal"

// MCPSessionTimeout is how long an MCP session over streamable HTTP lives without a request.
const MCPSessionTimeout = 10 * time.Minute

// mcpAuth hands the principal that guard proved to the MCP SDK as its token info, so a tool call
// knows who calls it (mcpGuard) and a session stays with the principal that opened it (the SDK
// refuses another's requests in it). Only bearer tokens reach MCP: a page session has no
// Authorization header and is refused. GET, the standalone stream of server messages, is 405
// (which the protocol allows): starplan sends nothing outside a call, and an idle stream would
// hold a drain.
func (s *Server) mcpAuth(next http.Handler) http.Handler {
	verify := func(ctx context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		who, ok := r.Context().Value(callerKey{}).(caller)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: who.p.Name, Extra: map[string]any{mcpPrincipalKey: who}}, nil
	}
	authed := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.Header().Set("Allow", "POST, DELETE")
			writeError(w, errorf(http.StatusMethodNotAllowed, CodeMethod, "POST MCP requests; this server sends nothing outside a call's answer", "no standalone MCP stream here"))
			return
		}
		authed.ServeHTTP(w, r)
	})
}

// mcpGuard is the MCP server's middleware: it puts the caller's principal in the context of
// every request (over HTTP the token's, from mcpAuth; over stdio or any transport without HTTP
// the local user, who started the process) and refuses a tool call whose principal lacks the
// tool's right (toolRights) with a tool error carrying forbidden-role and the run's page.
func (s *Server) mcpGuard(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		who := caller{p: access.Local()}
		if extra := req.GetExtra(); extra != nil && extra.Header != nil {
			// Over HTTP: the principal mcpAuth proved, and no other.
			ti := extra.TokenInfo
			var ok bool
			if ti != nil {
				who, ok = ti.Extra[mcpPrincipalKey].(caller)
			}
			if !ok {
				return nil, fmt.Errorf("%s: no credential reached the MCP server", CodeUnauthorized)
			}
		}
		ctx = withCaller(ctx, who)
		if method != "tools/call" {
			return next(ctx, method, req)
		}
		params, _ := req.GetParams().(*mcp.CallToolParamsRaw)
		if params == nil {
			return next(ctx, method, req)
		}
		o, ok := toolRights[params.Name]
		if !ok {
			o = op{access.Administer, "call " + params.Name} // a tool without a declared right: admins only
		}
		if err := s.require(ctx, o.right, o.what, runIDOf(params)); err != nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, nil
		}
		return next(metaTraceparent(ctx, params.Meta), method, req)
	}
}

// runIDOf is the run_id argument of a tool call, if it has one.
func runIDOf(p *mcp.CallToolParamsRaw) string {
	var args struct {
		RunID string `json:"run_id"`
	}
	_ = json.Unmarshal(p.Arguments, &args)
	return args.RunID
}

// mayReject refuses a rejection by a principal that may not reject run id: one with the approve
// right rejects any run; a proposer only the runs it proposed itself.
func (s *Server) mayReject(ctx context.Context, id string) *Error {
	p := principal(ctx)
	if p.Can(access.Approve) {
		return nil
	}
	if err := s.require(ctx, access.Propose, "reject runs", id); err != nil {
		return err
	}
	rec, err := s.eng.Record(id)
	if err != nil {
		return nil // the rejection answers unknown-run
	}
	if rec.ProposedBy == p.Name {
		return nil
	}
	return s.forbidden(p, access.Approve, "reject run "+id+", which "+rec.ProposedBy+" proposed (a proposer rejects only its own runs)", id)
}

// runIDIn is the run id of a path of a /v1/runs/{id} route ("" for other routes): the mux sets
// path values only once it serves the route, after enforce.
func runIDIn(pattern, path string) string {
	if !strings.HasPrefix(pattern, "/v1/runs/{id}") {
		return ""
	}
	id, _, _ := strings.Cut(strings.TrimPrefix(path, "/v1/runs/"), "/")
	if u, err := url.PathUnescape(id); err == nil {
		id = u
	}
	return clip(id, 100)
}

// refusedApproval is the answer to an apply the engine refused by the domain's approval rules:
// 403 with the engine's code (approval-required, run-expired), or forbidden-role when the caller's
// role cannot approve at all and no auto rule let the run through; the hint names where a
// person can review the run.
func (s *Server) refusedApproval(ctx context.Context, ae *engine.ApprovalError) *Error {
	p := principal(ctx)
	if !p.Can(access.Approve) && ae.Code == CodeApprovalRequired {
		e := s.forbidden(p, access.Approve, "apply run "+ae.RunID+", which no auto-approval rule of the domain lets through", ae.RunID)
		s.refused(ctx, ae.RunID, e)
		return e
	}
	hint := ae.Hint
	if hint == "" {
		hint = "a person with an approver's token reviews run " + ae.RunID + " on the review page"
	}
	e := errorf(http.StatusForbidden, ae.Code, hint+": "+s.runPage(ae.RunID), "%s; nothing was written", ae.Error())
	s.refused(ctx, ae.RunID, e)
	return e
}

// mayApply refuses at once an apply by a principal that cannot approve when the domain has no
// auto-approval rule that could let the run through, and one by a principal pinned to a subject
// of another subject's run (as unknown); otherwise the engine decides, on the change set it
// commits (refusedApproval).
func (s *Server) mayApply(ctx context.Context, id string) *Error {
	p := principal(ctx)
	if p.Subject != "" { // a pinned proposer applies (by auto-approval) its subject's runs only
		if rec, err := s.eng.Record(id); err == nil {
			if e := hiddenRun(ctx, id, rec.Subject); e != nil {
				return e
			}
		}
	}
	if p.Can(access.Approve) || len(s.eng.Policy().Approval.Auto) > 0 {
		return nil
	}
	e := s.forbidden(p, access.Approve, "apply runs (the domain declares no auto-approval rule)", id)
	s.refused(ctx, id, e)
	return e
}
