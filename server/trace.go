package server

import (
	"net/http"

	"go.opentelemetry.io/otel/propagation"
)

// traceparent puts the caller's W3C trace context (the traceparent and tracestate headers) in the
// request's context, so a run it starts (over /v1 or MCP) is a child of the caller's span when
// traces are on (telemetry). A request without the header costs one header lookup.
func traceparent(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Traceparent") != "" {
			r = r.WithContext(propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header)))
		}
		next.ServeHTTP(w, r)
	})
}
