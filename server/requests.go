package server

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/starplan/starplan/telemetry"
)

// Route names of requests that are no operation (telemetry.Request.Route).
const (
	RouteMCP   = "mcp"   // MCPPath
	RoutePage  = "page"  // the review page, its login and its data
	RouteOther = "other" // no route: 404, or a method the path does not serve
)

// observeRequests tells Options.Telemetry.Request about each request once it is answered: its
// route by name (an operation's, RouteMCP, RoutePage or RouteOther; never the path, which
// holds run ids), status, duration and error code. Without the hook it is next itself.
func (s *Server) observeRequests(mux *http.ServeMux, next http.Handler) http.Handler {
	tell := s.opts.Telemetry.Request
	if tell == nil {
		return next
	}
	routes := map[string]string{} // "METHOD path" -> the operation's name
	for _, op := range Operations {
		routes[op.Method+" "+op.Path] = op.Name
	}
	routeOf := func(r *http.Request) string {
		_, pattern := mux.Handler(r)
		switch pattern {
		case "":
			return RouteOther
		case MCPPath:
			return RouteMCP
		case "/":
			return RoutePage
		}
		if name, ok := routes[r.Method+" "+pattern]; ok {
			return name
		}
		return RouteOther
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		began := time.Now()
		route := routeOf(r)
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		tell(r.Context(), telemetry.Request{Route: route, Method: r.Method, Status: status, Duration: time.Since(began), Code: rec.code})
	})
}

// statusRecorder keeps the status and error code of an answer; it flushes, hijacks and unwraps
// as the writer it wraps does (event streams, MCP).
type statusRecorder struct {
	http.ResponseWriter
	status int
	code   string
}

func (w *statusRecorder) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusRecorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusRecorder) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if h, ok := w.ResponseWriter.(http.Hijacker); ok {
		return h.Hijack()
	}
	return nil, nil, errors.New("the connection cannot be hijacked")
}

func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// setCode records the code of the error answered (writeError).
func (w *statusRecorder) setCode(code string) { w.code = code }

// refused tells Options.Telemetry.Refused about an apply refused by role or rule.
func (s *Server) refused(ctx context.Context, runID string, e *Error) {
	if tell := s.opts.Telemetry.Refused; tell != nil && e != nil {
		tell(ctx, telemetry.Refusal{RunID: runID, Code: e.Code, By: principal(ctx).Name})
	}
}
