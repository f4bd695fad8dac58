package server

import (
	"context"
	"embed"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/starplan/starplan/access"
	"github.com/starplan/starplan/contracts"
	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/diffview"
	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

// The review page: a queue of runs and one run at a time, for a person who approves or rejects
// them. It is three embedded files (web/) and two JSON documents made for it (the queue with who
// proposed each run, its counts and one line of what it changes row by row; a run with its diff
// laid out cell by cell and its diagnostics most serious first); approving, rejecting and the live updates go through the /v1 API and /v1/events, like
// any other client. The page builds its DOM with textContent only, so every value a plan
// controls is text; the Content-Security-Policy allows no inline script and nothing from
// elsewhere, and the page works offline.

//go:embed web
var webFiles embed.FS

// pageCSP is the Content-Security-Policy of the page: its own files only, no inline script or
// style, no framing, no form posts elsewhere.
const pageCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Queue filters of GET /review/queue?filter=. "failed" takes the runs the plan failed and the
// applies that found the data moved (conflict).
var queueFilters = map[string][]string{
	"pending":  {StatePending},
	"applied":  {StateApplied},
	"rejected": {StateRejected},
	"failed":   {StateFailed, StateConflict},
	"all":      nil,
}

// QueueItem is one run in the review queue.
type QueueItem struct {
	ID       string         `json:"id"`
	Time     time.Time      `json:"time"`
	Request  string         `json:"request"`
	Proposer string         `json:"proposer"`          // "CLI (exec)", "API", "MCP", "ask (gpt-4o)", ...
	Subject  string         `json:"subject,omitempty"` // who the run acts for, when it names someone
	Outcome  engine.Outcome `json:"outcome"`
	Status   string         `json:"status"`
	State    string         `json:"state"`
	Summary  string         `json:"summary"` // "inventory: 2 updated; transactions: 2 inserted"
	// Headline is what the run changes, row by row, in one line of at most
	// diffview.MaxHeadline characters: "SG002 Wayfarer: quantity_in_stock 6→3; +TXN002 Alice
	// 285.0" (diffview.Headline). Absent for a run that changes nothing.
	Headline string `json:"headline,omitempty"`
}

// Queue is the answer of GET /review/queue: runs newest first.
type Queue struct {
	Filter string      `json:"filter"`
	Runs   []QueueItem `json:"runs"`
}

// RunReview is the answer of GET /review/runs/{id}: the run as /v1/runs/{id} returns it, who
// proposed it, and its changes laid out cell by cell.
type RunReview struct {
	Run      *RunDocument          `json:"run"`
	Proposer string                `json:"proposer"`
	Summary  string                `json:"summary"`
	Headline string                `json:"headline,omitempty"` // as QueueItem's
	Tables   []diffview.TableCells `json:"tables"`
	// Diagnostics are the run's diagnostics, the most serious first (bySeriousness): what the
	// page leads with on a failed run.
	Diagnostics diag.List `json:"diagnostics"`
	// Replans says whether rejecting this run asks the model for a new plan: it came from a
	// model and the server has one (Options.Model).
	Replans bool `json:"replans"`
}

// reviewPage serves the page at "/", its files, its login and logout and its JSON documents;
// any other path is the API's 404.
func (s *Server) reviewPage() http.Handler {
	static, _ := fs.Sub(webFiles, "web")
	files := http.FileServerFS(static)
	mux := http.NewServeMux()
	page := func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", pageCSP)
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	}
	mux.Handle("/{$}", methods{http.MethodGet: page})
	mux.Handle("/assets/", methods{http.MethodGet: page})
	mux.Handle("/login", methods{http.MethodPost: s.handleLogin, http.MethodGet: s.handleLoginLink})
	mux.Handle("/logout", methods{http.MethodPost: s.handleLogout})
	mux.Handle("/review/queue", methods{http.MethodGet: s.handleQueue})
	mux.Handle("/review/runs/{id}", methods{http.MethodGet: s.handleRunReview})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errorf(http.StatusNotFound, CodeNotFound, "the API is under /v1 (GET /v1/describe), MCP at "+MCPPath+" and the review page at /", "no endpoint %s %s", r.Method, clip(r.URL.Path, 200)))
	})
	return mux
}

// publicPage reports whether r may be served without a session: the page and its files, and
// logging in.
func publicPage(r *http.Request) bool {
	p := r.URL.Path
	return p == "/" || p == "/login" || strings.HasPrefix(p, "/assets/") && !strings.Contains(p, "..")
}

// LoginRequest is the body of POST /login: the bearer token, or the code of a one-time link.
type LoginRequest struct {
	Token string `json:"token,omitempty"`
	Code  string `json:"code,omitempty"`
}

// LoginAnswer is the answer of a login: the session's key, which every request under the
// session's cookie must carry (SessionKeyHeader). Nothing else ever sends it.
type LoginAnswer struct {
	SessionKey string `json:"session_key"`
}

// handleLogin trades an approver's or an admin's bearer token, or a one-time code (the local
// user's), for a session: the cookie, and its key in the body. A proposer's token is refused
// with forbidden-role. authorize has checked the page's CSRF proof.
func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	var req LoginRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	var who caller
	if req.Code != "" {
		if !s.sessions.useCode(req.Code) {
			writeError(w, errorf(http.StatusUnauthorized, CodeUnauthorized, "sign in with the token, or start starplan serve again for a new link", "that login link was used already or has expired"))
			return
		}
		who = caller{p: access.Local()} // the link was printed to whoever started serve
	} else {
		var err *Error
		if who, err = s.bearer(r.Context(), req.Token); err != nil {
			if err.Code == CodeUnauthorized && err.Hint == errUnauthorized().Hint {
				err = errorf(http.StatusUnauthorized, CodeUnauthorized, "sign in with an approver's token (starplan token create NAME --role approver) or the admin token in serve.token in the store directory", "that is not a token of this server")
			}
			writeError(w, err)
			return
		}
		if !who.p.Can(access.Approve) {
			writeError(w, errorf(http.StatusForbidden, CodeForbiddenRole,
				"the page is for people who approve: sign in with an approver's or an admin's token (an admin makes one with starplan token create NAME --role approver)",
				"token %s is a %s's: it may propose runs, not approve them, so it cannot sign in to the review page", who.p.Name, who.p.Role))
			return
		}
	}
	id, key := s.sessions.start(who)
	setSession(w, r, id, SessionTTL)
	writeJSON(w, http.StatusOK, LoginAnswer{SessionKey: key})
}

// handleLoginLink sends the browser that opened a one-time link (LoginLink) to the page, with the
// code in the fragment (which no request carries): the page trades it for a session with
// POST /login, whose answer is the only place the session's key is sent. A used or expired link
// sends it to the login form.
func (s *Server) handleLoginLink(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("Cache-Control", "no-store")
	code := r.URL.Query().Get("code")
	if !s.sessions.codeValid(code) {
		http.Redirect(w, r, "/#/login/expired", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/#/login/code/"+url.PathEscape(code), http.StatusSeeOther)
}

func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(SessionCookie); err == nil {
		s.sessions.end(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleQueue(w http.ResponseWriter, r *http.Request) {
	q, err := s.Queue(r.URL.Query().Get("filter"))
	respond(w, http.StatusOK, q, err)
}

func (s *Server) handleRunReview(w http.ResponseWriter, r *http.Request) {
	rv, err := s.Review(r.PathValue("id"))
	respond(w, http.StatusOK, rv, err)
}

// Queue lists the runs a filter takes ("pending" when empty), newest first, at most
// DefaultListLimit.
func (s *Server) Queue(filter string) (*Queue, error) {
	if filter == "" {
		filter = "pending"
	}
	states, ok := queueFilters[filter]
	if !ok {
		return nil, errorf(http.StatusBadRequest, CodeBadRequest, "filter is pending, applied, rejected, failed or all", "unknown filter %q", clip(filter, 40))
	}
	runs, err := s.listStates(states, DefaultListLimit)
	if err != nil {
		return nil, err
	}
	out := &Queue{Filter: filter, Runs: []QueueItem{}}
	var schemas map[string]*table.Schema
	for _, r := range runs {
		item := QueueItem{ID: r.ID, Time: r.Time, Request: r.Request, Subject: r.Subject, Outcome: r.Outcome, Status: r.Status, State: r.State, Proposer: proposer(r.Origin, nil)}
		if r.ChangedRows > 0 {
			rec, err := s.eng.Record(r.ID)
			if err != nil {
				return nil, internal(err)
			}
			if schemas == nil {
				schemas = s.schemas()
			}
			item.Summary, item.Proposer = diffview.Summary(rec.Changes), proposer(rec.Origin, rec.Model)
			item.Headline = diffview.Headline(rec.Changes, diffview.Options{Schemas: schemas})
		} else if r.Origin == "ask" {
			if rec, err := s.eng.Record(r.ID); err == nil {
				item.Proposer = proposer(rec.Origin, rec.Model)
			}
		}
		out.Runs = append(out.Runs, item)
	}
	return out, nil
}

// listStates lists the newest limit runs in any of states (every run for nil), newest first:
// a page of each state's, merged.
func (s *Server) listStates(states []string, limit int) ([]RunSummary, error) {
	if states == nil {
		states = []string{""}
	}
	var runs []RunSummary
	for _, state := range states {
		page, err := s.List(state, limit, "")
		if err != nil {
			return nil, err
		}
		runs = append(runs, page.Runs...)
	}
	slices.SortStableFunc(runs, func(a, b RunSummary) int {
		if c := b.Time.Compare(a.Time); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	return runs[:min(len(runs), limit)], nil
}

// Review returns a run with what the page shows of it.
func (s *Server) Review(id string) (*RunReview, error) {
	doc, err := s.Show(id)
	if err != nil {
		return nil, err
	}
	rec, err := s.eng.Record(id)
	if err != nil {
		return nil, internal(err)
	}
	opts := diffview.Options{Schemas: s.schemas()}
	return &RunReview{
		Run: doc, Proposer: proposer(rec.Origin, rec.Model), Summary: diffview.Summary(doc.Changes),
		Headline: diffview.Headline(doc.Changes, opts), Tables: diffview.Cells(doc.Changes, opts),
		Diagnostics: bySeriousness(doc.Diagnostics),
		Replans:     rec.Origin == "ask" && s.opts.Model != nil,
	}, nil
}

// bySeriousness orders a copy of a run's diagnostics most serious first, keeping the order of
// those equally serious: an apply that found the data moved; then what is wrong with the plan or
// the data it would write (a failed check or run, a broken rule of the domain's policy or
// invariants, changes under a STATUS that may not write); then a STATUS the contract refuses;
// then the answer's form; then the model's verdict on its attempts; last the count of those a
// result left out.
func bySeriousness(ds diag.List) diag.List {
	rank := func(d diag.Diagnostic) int {
		switch {
		case d.Code == engine.CodeMoreDiagnostics:
			return 5
		case d.Stage == diag.StageApply:
			return 0
		case d.Stage == diag.StageModel:
			return 4
		case d.Stage != diag.StageContract:
			return 1
		}
		switch d.Code {
		case contracts.CodeStatusMissing, contracts.CodeStatusType, contracts.CodeStatusInvalid:
			return 2
		case contracts.CodeAnswerMissing, contracts.CodeAnswerType, contracts.CodeAnswerEmpty, contracts.CodeAnswerTooLong,
			contracts.CodeAnswerSentences, contracts.CodeAnswerNotCustomer, contracts.CodeAnswerControl:
			return 3
		}
		return 1 // a policy rule or an invariant: the data would be wrong
	}
	out := slices.Clone(ds)
	if out == nil {
		out = diag.List{}
	}
	slices.SortStableFunc(out, func(a, b diag.Diagnostic) int { return rank(a) - rank(b) })
	return out
}

// schemas are the store's table schemas, for the diff's column order.
func (s *Server) schemas() map[string]*table.Schema {
	st := s.eng.Store()
	view := st.StageFor(context.Background(), store.RunLimits{})
	out := map[string]*table.Schema{}
	for _, name := range st.Names() {
		if t, ok := view.Table(name); ok {
			out[name] = t.Schema()
		}
	}
	return out
}

// proposer names who or what proposed a run, from its origin in the audit log.
func proposer(origin string, model *engine.ModelCall) string {
	switch origin {
	case OriginHTTP:
		return "API"
	case OriginMCP:
		return "MCP"
	case "exec", "demo":
		return "CLI (" + origin + ")"
	case "ask":
		if model != nil && model.Model != "" {
			return "ask (" + model.Model + ")"
		}
		return "ask"
	case "":
		return "unknown"
	}
	return origin
}
