package server

import (
	"context"
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

// metaTraceparent puts the W3C trace context a tool call carries in its _meta ("traceparent",
// and "tracestate"; the convention of MCP hosts, and the only way over stdio) in ctx, so the
// call's run is a child of the caller's span. It takes precedence over the HTTP request's
// headers: it is the call's own. A call without one leaves ctx as it is.
func metaTraceparent(ctx context.Context, meta map[string]any) context.Context {
	tp, _ := meta["traceparent"].(string)
	if tp == "" {
		return ctx
	}
	carrier := propagation.MapCarrier{"traceparent": tp}
	if ts, ok := meta["tracestate"].(string); ok {
		carrier["tracestate"] = ts
	}
	return propagation.TraceContext{}.Extract(ctx, carrier)
}
