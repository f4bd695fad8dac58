package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCPPath is where the streamable HTTP MCP endpoint is mounted.
const MCPPath = "/mcp"

// Handler returns the HTTP API: /v1/... (JSON) and MCPPath (streamable MCP), behind bearer-token
// auth, with bounded bodies. Every error is {"error": {"code", "message", "hint"}}.
func (s *Server) Handler() http.Handler {
	mux, _ := s.mux()
	// traceparent: the caller's trace context (trace.go); observeRequests: each request's route,
	// status and time (requests.go); enforce: the right each route needs (rights.go)
	return traceparent(s.observeRequests(mux, s.guard(s.enforce(mux))))
}

// mux is Handler's router and the patterns it holds: the operations' routes, MCPPath and the
// review page (TestOperationParity checks that nothing else is served).
func (s *Server) mux() (*http.ServeMux, []string) {
	mux := &patternMux{ServeMux: http.NewServeMux()}
	s.routes(mux) // the operations (ops.go)
	mux.Handle(MCPPath, s.mcpAuth(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, &mcp.StreamableHTTPOptions{
		// Sessions, so that apply_run can ask the person over HTTP as over stdio (an older
		// protocol's client answers elicitation/create within its session); idle ones end after
		// MCPSessionTimeout, and no standalone stream is served (mcpAuth), so a drain never
		// waits on an idle MCP stream.
		SessionTimeout:      MCPSessionTimeout,
		MaxRequestBodyBytes: s.opts.MaxBody,
	})))
	mux.Handle("/", s.reviewPage()) // the review page, its login and its data (review.go)
	return mux.ServeMux, mux.patterns
}

// patternMux is a ServeMux that lists the patterns registered on it.
type patternMux struct {
	*http.ServeMux
	patterns []string
}

func (m *patternMux) Handle(pattern string, h http.Handler) {
	m.patterns = append(m.patterns, pattern)
	m.ServeMux.Handle(pattern, h)
}

// guard refuses requests without the bearer token or a review session (authorize), and requests
// to a loopback listener that name a foreign host (DNS rebinding), before any handler reads the
// body.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && isLoopback(local.String()) && !isLoopback(r.Host) {
			w.Header().Set("Connection", "close")
			writeError(w, errorf(http.StatusForbidden, CodeForbidden, "reach the server as 127.0.0.1, [::1] or localhost", "host %q is not this loopback server", clip(r.Host, 100)))
			return
		}
		who, credential, err := s.authorize(r) // a bearer token, or the review page's session (auth.go)
		if credential && err == nil {
			proven(r) // its connection may stay open, beyond the bounds of strangers' (conns.go)
		} else {
			w.Header().Set("Connection", "close") // a stranger's connection ends with its answer
		}
		if err != nil {
			if err.Status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="starplan"`)
			}
			writeError(w, err)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.opts.MaxBody)
		if credential {
			r = r.WithContext(withCaller(r.Context(), who))
		}
		next.ServeHTTP(w, r)
	})
}

// isLoopback reports whether a host or host:port names the loopback interface.
func isLoopback(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// methods routes a path by method; others get 405 with Allow.
type methods map[string]http.HandlerFunc

func (m methods) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h, ok := m[r.Method]; ok {
		h(w, r)
		return
	}
	allow := make([]string, 0, len(m))
	for k := range m {
		allow = append(allow, k)
	}
	sort.Strings(allow)
	w.Header().Set("Allow", strings.Join(allow, ", "))
	writeError(w, errorf(http.StatusMethodNotAllowed, CodeMethod, "use "+strings.Join(allow, " or "), "%s is not allowed on %s", r.Method, clip(r.URL.Path, 200)))
}

func (s *Server) handleDescribe(w http.ResponseWriter, r *http.Request) {
	d, err := s.Describe()
	respond(w, http.StatusOK, d, err)
}

func (s *Server) handleCheck(w http.ResponseWriter, r *http.Request) {
	var req CheckRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	rep, err := s.Check(req)
	respond(w, http.StatusOK, rep, err)
}

func (s *Server) handleRun(w http.ResponseWriter, r *http.Request) {
	var req RunRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	doc, err := s.Run(r.Context(), req, OriginHTTP)
	respond(w, http.StatusOK, doc, err)
}

func (s *Server) handleShow(w http.ResponseWriter, r *http.Request) {
	doc, err := s.showFor(r.Context(), r.PathValue("id"))
	respond(w, http.StatusOK, doc, err)
}

func (s *Server) handleApply(w http.ResponseWriter, r *http.Request) {
	var req ApplyRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	doc, err := s.Apply(r.Context(), r.PathValue("id"), req.Digest, OriginHTTP)
	status := http.StatusOK
	if doc != nil && doc.State == StateConflict {
		status = http.StatusConflict // the data moved: the body is the run with its conflict
	}
	respond(w, status, doc, err)
}

func (s *Server) handleReject(w http.ResponseWriter, r *http.Request) {
	var req RejectRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	doc, err := s.Reject(r.Context(), r.PathValue("id"), req.Feedback, OriginHTTP)
	respond(w, http.StatusOK, doc, err)
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			writeError(w, errorf(http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("give a limit between 1 and %d", MaxListLimit), "limit %q is not a number", clip(v, 40)))
			return
		}
		limit = n
	}
	list, err := s.listFor(r.Context(), q.Get("state"), limit, q.Get("cursor"))
	respond(w, http.StatusOK, list, err)
}

// decode reads a request body as exactly one JSON object of v's type: unknown fields and
// trailing data are errors, and a body over the limit is 413.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("more than one JSON value in the body")
	}
	if err == nil {
		return nil
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return errorf(http.StatusRequestEntityTooLarge, CodeTooLarge, "send a smaller program; GET /v1/describe gives the limits", "the request body is larger than %d bytes", mbe.Limit)
	}
	if errors.Is(err, io.EOF) {
		return errorf(http.StatusBadRequest, CodeBadRequest, "send a JSON object; GET /v1/describe has the request schemas", "the request body is empty")
	}
	return errorf(http.StatusBadRequest, CodeBadRequest, "send a JSON object; GET /v1/describe has the request schemas", "the request body is not valid: %s", clip(err.Error(), 300))
}

// respond writes v with status, or err in the error shape.
func respond(w http.ResponseWriter, status int, v any, err error) {
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, status, v)
}

func writeError(w http.ResponseWriter, err error) {
	e := asError(err)
	if rec, ok := w.(interface{ setCode(string) }); ok {
		rec.setCode(e.Code) // for the request's telemetry (requests.go)
	}
	writeJSON(w, e.Status, ErrorBody{Error: e})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		status, b = http.StatusInternalServerError, bytes.Buffer{}
		fmt.Fprintf(&b, `{"error":{"code":%q,"message":%q}}`+"\n", CodeInternal, "encoding the response: "+err.Error())
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// keepAlive is how often an idle event stream gets a comment line, so proxies keep it open.
const keepAlive = 25 * time.Second

// handleEvents streams run events as Server-Sent Events: "id", "event" (the type) and "data"
// (the Event as JSON). Last-Event-ID (header or ?last_event_id) replays what the server still
// holds after that id. The stream ends when the server drains, or when the client falls behind
// by more than subscriberBuffer events (it then reconnects with Last-Event-ID).
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, internal(errors.New("the connection cannot stream")))
		return
	}
	if e := eventsClosed(r.Context()); e != nil {
		writeError(w, e)
		return
	}
	last := r.Header.Get("Last-Event-ID")
	if last == "" {
		last = r.URL.Query().Get("last_event_id")
	}
	var lastID int64
	if last != "" {
		n, err := strconv.ParseInt(last, 10, 64)
		if err != nil || n < 0 {
			writeError(w, errorf(http.StatusBadRequest, CodeBadRequest, "Last-Event-ID is the id of the last event received", "Last-Event-ID %q is not an event id", clip(last, 40)))
			return
		}
		lastID = n
	}
	sub, missed, err := s.events.subscribe(lastID)
	switch {
	case errors.Is(err, errTooManyListeners):
		w.Header().Set("Retry-After", "30")
		writeError(w, errorf(http.StatusServiceUnavailable, CodeTooManyStreams,
			"close review pages or event streams of this server you no longer use, then reconnect; GET /v1/runs reads the runs without a stream",
			"%d event streams are open, the most this server serves at once", s.opts.MaxSubscribers))
		return
	case err != nil:
		writeError(w, errorf(http.StatusServiceUnavailable, CodeUnavailable, "connect to the next server", "the server is shutting down"))
		return
	}
	defer s.events.unsubscribe(sub)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	write := func(e Event) bool {
		data, err := json.Marshal(e)
		if err != nil {
			return false
		}
		_, err = fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.ID, e.Type, data)
		return err == nil
	}
	for _, e := range missed {
		if !write(e) {
			return
		}
	}
	_, _ = io.WriteString(w, ": subscribed\n\n") // tells the client the subscription is live
	flusher.Flush()
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		select {
		case e, open := <-sub.C:
			if !open {
				return
			}
			if !write(e) {
				return
			}
			// Send whatever else is already queued in the same flush.
			for n := len(sub.C); n > 0; n-- {
				if e, open = <-sub.C; !open || !write(e) {
					return
				}
			}
			flusher.Flush()
		case <-tick.C:
			if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil {
				return
			}
			flusher.Flush()
		case <-r.Context().Done():
			return
		case <-s.draining:
			return
		}
	}
}
