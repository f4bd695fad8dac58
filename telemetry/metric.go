package telemetry

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// A small metrics registry and the Prometheus text exposition format (version 0.0.4), written
// here rather than taken from prometheus/client_golang: starplan needs counters, gauges read at
// scrape time and histograms, and a counted event costs one atomic add (a lookup of its series
// under a read lock when it has labels). Nothing is computed when nothing scrapes.

// MaxLabels is the most labels a family may have.
const MaxLabels = 4

// labelKey is a series' label values, in the family's label order; unused slots are "".
type labelKey [MaxLabels]string

// Registry holds metric families and writes them in the text format, in the order they were
// registered. It is safe for concurrent use.
type Registry struct {
	mu       sync.Mutex
	families []family
	names    map[string]bool
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{names: map[string]bool{}} }

type family interface {
	writeTo(w *bufio.Writer)
}

// meta is what every family has: its name, help, type and label names.
type meta struct {
	name, help, typ string
	labels          []string
}

func (r *Registry) add(m meta, f family) {
	if len(m.labels) > MaxLabels {
		panic(fmt.Sprintf("telemetry: %s has %d labels; at most %d", m.name, len(m.labels), MaxLabels))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.names[m.name] {
		panic("telemetry: metric " + m.name + " registered twice")
	}
	r.names[m.name] = true
	r.families = append(r.families, f)
}

func (m *meta) header(w *bufio.Writer) {
	w.WriteString("# HELP ")
	w.WriteString(m.name)
	w.WriteByte(' ')
	w.WriteString(escapeHelp(m.help))
	w.WriteString("\n# TYPE ")
	w.WriteString(m.name)
	w.WriteByte(' ')
	w.WriteString(m.typ)
	w.WriteByte('\n')
}

// key makes the label key of values, which must be as many as the family's labels.
func (m *meta) key(values []string) labelKey {
	if len(values) != len(m.labels) {
		panic(fmt.Sprintf("telemetry: %s takes %d label values, got %d", m.name, len(m.labels), len(values)))
	}
	var k labelKey
	copy(k[:], values)
	return k
}

// series is a family's series by label values, created on first use.
type series[T any] struct {
	mu sync.RWMutex
	m  map[labelKey]*T
}

func (s *series[T]) get(k labelKey, make func() *T) *T {
	s.mu.RLock()
	v := s.m[k]
	s.mu.RUnlock()
	if v != nil {
		return v
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if v = s.m[k]; v == nil {
		if s.m == nil {
			s.m = map[labelKey]*T{}
		}
		v = make()
		s.m[k] = v
	}
	return v
}

// sorted returns the series ordered by their label values.
func (s *series[T]) sorted() ([]labelKey, []*T) {
	s.mu.RLock()
	keys := make([]labelKey, 0, len(s.m))
	for k := range s.m {
		keys = append(keys, k)
	}
	s.mu.RUnlock()
	slices.SortFunc(keys, func(a, b labelKey) int { return slices.Compare(a[:], b[:]) })
	vals := make([]*T, len(keys))
	s.mu.RLock()
	for i, k := range keys {
		vals[i] = s.m[k]
	}
	s.mu.RUnlock()
	return keys, vals
}

// Counter is a count that only goes up.
type Counter struct{ n atomic.Uint64 }

// Inc adds one.
func (c *Counter) Inc() { c.n.Add(1) }

// Add adds n.
func (c *Counter) Add(n uint64) { c.n.Add(n) }

// Value is the count so far.
func (c *Counter) Value() uint64 { return c.n.Load() }

// CounterVec is a family of counters, one per combination of label values.
type CounterVec struct {
	meta
	s series[Counter]
}

// Counter registers a counter family. name ends in _total by the format's convention.
func (r *Registry) Counter(name, help string, labels ...string) *CounterVec {
	c := &CounterVec{meta: meta{name: name, help: help, typ: "counter", labels: labels}}
	r.add(c.meta, c)
	return c
}

// With is the counter of the label values, in the family's label order.
func (c *CounterVec) With(values ...string) *Counter {
	return c.s.get(c.key(values), func() *Counter { return new(Counter) })
}

func (c *CounterVec) writeTo(w *bufio.Writer) {
	c.header(w)
	keys, vals := c.s.sorted()
	for i, k := range keys {
		sample(w, c.name, "", c.labels, k, "", "", float64(vals[i].Value()))
	}
}

// GaugeFunc is a family of gauges read when the registry is written: collect calls emit once per
// series. A collect that fails emits nothing for its family (the scrape still answers).
type GaugeFunc struct {
	meta
	collect func(emit func(v float64, values ...string))
}

// GaugeFunc registers a gauge family read at scrape time.
func (r *Registry) GaugeFunc(name, help string, labels []string, collect func(emit func(v float64, values ...string))) *GaugeFunc {
	g := &GaugeFunc{meta: meta{name: name, help: help, typ: "gauge", labels: labels}, collect: collect}
	r.add(g.meta, g)
	return g
}

// CounterFunc registers a counter family read at scrape time (a count kept elsewhere, such as
// the worker pool's).
func (r *Registry) CounterFunc(name, help string, labels []string, collect func(emit func(v float64, values ...string))) *GaugeFunc {
	g := &GaugeFunc{meta: meta{name: name, help: help, typ: "counter", labels: labels}, collect: collect}
	r.add(g.meta, g)
	return g
}

func (g *GaugeFunc) writeTo(w *bufio.Writer) {
	g.header(w)
	type point struct {
		k labelKey
		v float64
	}
	var points []point
	g.collect(func(v float64, values ...string) {
		points = append(points, point{g.key(values), v})
	})
	slices.SortFunc(points, func(a, b point) int { return slices.Compare(a.k[:], b.k[:]) })
	for _, p := range points {
		sample(w, g.name, "", g.labels, p.k, "", "", p.v)
	}
}

// Histogram counts observations into buckets by their upper bounds, with their sum.
type Histogram struct {
	bounds  []float64       // upper bounds, ascending, without +Inf
	buckets []atomic.Uint64 // counts per bucket (not cumulative); the last is +Inf's
	sumBits atomic.Uint64   // the sum, as float64 bits
}

// Observe records v (seconds, for the duration histograms here).
func (h *Histogram) Observe(v float64) {
	i, _ := slices.BinarySearch(h.bounds, v) // the first bound >= v: le is inclusive
	h.buckets[i].Add(1)
	for {
		old := h.sumBits.Load()
		if h.sumBits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			break
		}
	}
}

// Count is how many observations were made.
func (h *Histogram) Count() uint64 {
	var n uint64
	for i := range h.buckets {
		n += h.buckets[i].Load()
	}
	return n
}

// HistogramVec is a family of histograms, one per combination of label values.
type HistogramVec struct {
	meta
	bounds []float64
	s      series[Histogram]
}

// DurationBuckets are the upper bounds, in seconds, of the duration histograms: 1 ms to 60 s.
var DurationBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// Histogram registers a histogram family with the given upper bounds (ascending).
func (r *Registry) Histogram(name, help string, bounds []float64, labels ...string) *HistogramVec {
	if !slices.IsSorted(bounds) {
		panic("telemetry: " + name + "'s buckets are not ascending")
	}
	h := &HistogramVec{meta: meta{name: name, help: help, typ: "histogram", labels: labels}, bounds: slices.Clone(bounds)}
	r.add(h.meta, h)
	return h
}

// With is the histogram of the label values, in the family's label order.
func (h *HistogramVec) With(values ...string) *Histogram {
	return h.s.get(h.key(values), func() *Histogram {
		return &Histogram{bounds: h.bounds, buckets: make([]atomic.Uint64, len(h.bounds)+1)}
	})
}

func (h *HistogramVec) writeTo(w *bufio.Writer) {
	h.header(w)
	keys, vals := h.s.sorted()
	for i, k := range keys {
		v := vals[i]
		// +Inf and _count are the buckets' sum as read, so they agree even when observations
		// land during the scrape (the sum may then be a little ahead).
		var cum uint64
		for j, b := range h.bounds {
			cum += v.buckets[j].Load()
			sample(w, h.name, "_bucket", h.labels, k, "le", formatFloat(b), float64(cum))
		}
		cum += v.buckets[len(h.bounds)].Load()
		sample(w, h.name, "_bucket", h.labels, k, "le", "+Inf", float64(cum))
		sample(w, h.name, "_sum", h.labels, k, "", "", math.Float64frombits(v.sumBits.Load()))
		sample(w, h.name, "_count", h.labels, k, "", "", float64(cum))
	}
}

// sample writes one line: name+suffix{labels,extra="value"} v.
func sample(w *bufio.Writer, name, suffix string, labels []string, k labelKey, extra, extraValue string, v float64) {
	w.WriteString(name)
	w.WriteString(suffix)
	if len(labels) > 0 || extra != "" {
		w.WriteByte('{')
		for i, l := range labels {
			if i > 0 {
				w.WriteByte(',')
			}
			w.WriteString(l)
			w.WriteString(`="`)
			w.WriteString(escapeLabel(k[i]))
			w.WriteByte('"')
		}
		if extra != "" {
			if len(labels) > 0 {
				w.WriteByte(',')
			}
			w.WriteString(extra)
			w.WriteString(`="`)
			w.WriteString(extraValue)
			w.WriteByte('"')
		}
		w.WriteByte('}')
	}
	w.WriteByte(' ')
	w.WriteString(formatFloat(v))
	w.WriteByte('\n')
}

func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

var (
	labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

func escapeLabel(s string) string { return labelEscaper.Replace(s) }
func escapeHelp(s string) string  { return helpEscaper.Replace(s) }

// WriteText writes every family in the Prometheus text exposition format.
func (r *Registry) WriteText(out io.Writer) error {
	r.mu.Lock()
	families := slices.Clone(r.families)
	r.mu.Unlock()
	w := bufio.NewWriter(out)
	for _, f := range families {
		f.writeTo(w)
	}
	return w.Flush()
}

// ContentType is the media type of the text exposition format.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"
