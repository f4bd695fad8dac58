package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/starplan/starplan/access"
)

// Who may call which operation. Every request carries a principal (auth.go resolves it: a
// stored token, the legacy admin token, a page session, or over MCP on stdio the local user),
// and every operation needs one right of package access; require is the one check, called for
// HTTP by enforce (keyed by the route) and for MCP by mcpGuard (keyed by the tool). A refusal is
// 403 forbidden-role, or over MCP a tool error with the same code and the run's page.

// routeRights is the right each HTTP route needs, by pattern and method. A route of the mux that
// is not here is refused (fail closed); the page's own paths ("/") are decided by authorize.
var routeRights = map[string]map[string]access.Right{
	"/v1/describe":         {http.MethodGet: access.Read},
	"/v1/check":            {http.MethodPost: access.Propose},
	"/v1/runs":             {http.MethodGet: access.Read, http.MethodPost: access.Propose},
	"/v1/runs/{id}":        {http.MethodGet: access.Read},
	"/v1/runs/{id}/apply":  {http.MethodPost: access.Approve},
	"/v1/runs/{id}/reject": {http.MethodPost: access.Propose}, // and its own run, or Approve: Reject
	"/v1/runs/{id}/replay": {http.MethodPost: access.Administer},
	"/v1/ask":              {http.MethodPost: access.Propose},
	"/v1/events":           {http.MethodGet: access.Read},
	MCPPath:                {"": access.Read}, // each tool: toolRights
	"/":                    {"": access.Read},
}

// toolRights is the right each MCP tool needs. A tool that is not here is refused.
var toolRights = map[string]access.Right{
	"describe":   access.Read,
	"check_plan": access.Propose,
	"run_plan":   access.Propose,
	"apply_run":  access.Approve,
	"reject_run": access.Propose, // and its own run, or Approve: Reject
	"list_runs":  access.Read,
	"show_run":   access.Read,
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

// runPage is the review page's address of a run: Options.PageURL, then #/runs/ID.
func (s *Server) runPage(id string) string {
	return s.opts.PageURL + "/#/runs/" + url.PathEscape(id)
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
		right, ok := rights[r.Method]
		if !ok {
			right, ok = rights[""]
		}
		if ok {
			if _, proven := r.Context().Value(callerKey{}).(caller); proven {
				if err := s.require(r.Context(), right, r.Method+" "+pattern, r.PathValue("id")); err != nil {
					writeError(w, err)
					return
				}
			}
		}
		mux.ServeHTTP(w, r)
	})
}

// mcpPrincipalKey is where mcpAuth leaves the principal in the SDK's token info.
const mcpPrincipalKey = "starplan/principal"

// mcpAuth hands the principal that guard proved to the MCP SDK as its token info, so a tool call
// knows who calls it (mcpGuard) and a stateful session stays with the principal that opened it
// (the SDK refuses another's requests in it). Only bearer tokens reach MCP: a page session has no
// Authorization header and is refused.
func (s *Server) mcpAuth(next http.Handler) http.Handler {
	verify := func(ctx context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		who, ok := r.Context().Value(callerKey{}).(caller)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: who.p.Name, Extra: map[string]any{mcpPrincipalKey: who}}, nil
	}
	return auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(next)
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
		right, ok := toolRights[params.Name]
		if !ok {
			right = access.Administer // a tool without a declared right: admins only
		}
		if err := s.require(ctx, right, params.Name, runIDOf(params)); err != nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, nil
		}
		return next(ctx, method, req)
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
