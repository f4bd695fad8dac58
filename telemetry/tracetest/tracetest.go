// Package tracetest is an OTLP/HTTP trace receiver in process, for tests: it decodes each
// ExportTraceServiceRequest an exporter posts and keeps its spans.
package tracetest

import (
	"bytes"
	"cmp"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	collpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Receiver receives spans at URL+"/v1/traces".
type Receiver struct {
	URL   string
	mu    sync.Mutex
	spans []*tracepb.Span
}

// NewReceiver starts a receiver, closed when the test ends.
func NewReceiver(t testing.TB) *Receiver {
	r := &Receiver{}
	web := httptest.NewServer(r)
	t.Cleanup(web.Close)
	r.URL = web.URL
	return r
}

func (o *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(r.Body)
	var req collpb.ExportTraceServiceRequest
	if err == nil && r.URL.Path == "/v1/traces" {
		err = proto.Unmarshal(raw, &req)
	}
	if err != nil || r.URL.Path != "/v1/traces" {
		http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			o.spans = append(o.spans, ss.Spans...)
		}
	}
	o.mu.Unlock()
	out, _ := proto.Marshal(&collpb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// Spans returns the spans received so far.
func (o *Receiver) Spans() []*tracepb.Span {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]*tracepb.Span(nil), o.spans...)
}

// Named returns the spans called name whose starplan.run_id is runID ("": any).
func (o *Receiver) Named(name, runID string) []*tracepb.Span {
	var out []*tracepb.Span
	for _, s := range o.Spans() {
		if s.Name == name && (runID == "" || Attr(s, "starplan.run_id") == runID) {
			out = append(out, s)
		}
	}
	return out
}

// Children returns the spans whose parent is span, in the order they began.
func (o *Receiver) Children(span *tracepb.Span) []*tracepb.Span {
	var out []*tracepb.Span
	for _, s := range o.Spans() {
		if bytes.Equal(s.ParentSpanId, span.SpanId) && bytes.Equal(s.TraceId, span.TraceId) {
			out = append(out, s)
		}
	}
	slices.SortStableFunc(out, func(a, b *tracepb.Span) int { return cmp.Compare(a.StartTimeUnixNano, b.StartTimeUnixNano) })
	return out
}

// Names are the spans' names, in order.
func Names(spans []*tracepb.Span) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name
	}
	return out
}

// Attr is span's attribute key: a string, or a string list's first.
func Attr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			if v := kv.Value.GetStringValue(); v != "" {
				return v
			}
			if a := kv.Value.GetArrayValue(); a != nil && len(a.Values) > 0 {
				return a.Values[0].GetStringValue()
			}
		}
	}
	return ""
}

// IntAttr is the integer attribute key of s, and whether s has it.
func IntAttr(s *tracepb.Span, key string) (int64, bool) {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			if v, ok := kv.Value.GetValue().(*commonpb.AnyValue_IntValue); ok {
				return v.IntValue, true
			}
		}
	}
	return 0, false
}
