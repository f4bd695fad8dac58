package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/llm"
	"github.com/starplan/starplan/llm/llmtest"
)

func parse(t *testing.T, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	require.NoError(t, err, "%s", text)
	return fams
}

// TestTextFormat: counters, gauges read at scrape time and histograms, with label values that
// need escaping, are written as Prometheus's parser reads them: cumulative buckets, +Inf equal
// to the count, the sum, series in a stable order.
func TestTextFormat(t *testing.T) {
	r := NewRegistry()
	c := r.Counter("t_total", "A counter.\nSecond line with a \\.", "a", "b")
	c.With("x", `quote " back \ new
line`).Add(3)
	c.With("x", "y").Inc()
	r.GaugeFunc("t_gauge", "A gauge.", nil, func(emit func(float64, ...string)) { emit(2.5) })
	h := r.Histogram("t_seconds", "A histogram.", []float64{0.1, 1}, "phase")
	for _, v := range []float64{0.05, 0.1, 0.5, 3} {
		h.With("run").Observe(v)
	}
	var b bytes.Buffer
	require.NoError(t, r.WriteText(&b))
	var again bytes.Buffer
	require.NoError(t, r.WriteText(&again))
	assert.Equal(t, b.String(), again.String(), "the order is stable")

	fams := parse(t, b.String())
	require.Len(t, fams, 3)
	assert.Equal(t, dto.MetricType_COUNTER, fams["t_total"].GetType())
	assert.Equal(t, "A counter.\nSecond line with a \\.", fams["t_total"].GetHelp())
	vals := map[string]float64{}
	for _, m := range fams["t_total"].GetMetric() {
		vals[m.GetLabel()[1].GetValue()] = m.GetCounter().GetValue()
	}
	assert.Equal(t, map[string]float64{"y": 1, "quote \" back \\ new\nline": 3}, vals)
	assert.Equal(t, 2.5, fams["t_gauge"].GetMetric()[0].GetGauge().GetValue())

	hist := fams["t_seconds"].GetMetric()[0].GetHistogram()
	assert.Equal(t, uint64(4), hist.GetSampleCount())
	assert.InDelta(t, 3.65, hist.GetSampleSum(), 1e-9)
	var counts []uint64
	for _, bk := range hist.GetBucket() {
		counts = append(counts, bk.GetCumulativeCount())
	}
	assert.Equal(t, []uint64{2, 3, 4}, counts, "le is inclusive and buckets are cumulative (+Inf is the count)")
	assert.Contains(t, b.String(), `t_seconds_bucket{phase="run",le="+Inf"} 4`)
}

// TestRegistryRefusesMisuse: a name twice, too many labels, or the wrong number of values are
// programming errors, caught at once.
func TestRegistryRefusesMisuse(t *testing.T) {
	r := NewRegistry()
	c := r.Counter("a_total", "a", "x")
	assert.Panics(t, func() { r.Counter("a_total", "again") })
	assert.Panics(t, func() { r.Counter("b_total", "b", "1", "2", "3", "4", "5") })
	assert.Panics(t, func() { c.With("1", "2") })
	assert.Panics(t, func() { r.Histogram("h", "h", []float64{2, 1}) })
}

// TestModelMetrics: a wrapped model's calls count their latency by result, the tokens its
// endpoint reported, and errors by kind (classified by type).
func TestModelMetrics(t *testing.T) {
	fake := llmtest.NewServer(t,
		llmtest.ReplyWith(llmtest.Completion{Content: "ok", PromptTokens: 11, CompletionTokens: 7}),
		llmtest.Status(http.StatusUnauthorized))
	client, err := llm.New(fake.Config())
	require.NoError(t, err)
	m := NewMetrics(MetricsOptions{})
	model := m.Model(client)
	_, err = model.Complete(context.Background(), []llm.Message{{Role: llm.RoleUser, Content: "hi"}})
	require.NoError(t, err)
	_, err = model.Complete(context.Background(), []llm.Message{{Role: llm.RoleUser, Content: "hi"}})
	require.Error(t, err)

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	assert.Equal(t, ContentType, rec.Header().Get("Content-Type"))
	body, _ := io.ReadAll(rec.Body)
	fams := parse(t, string(body))
	get := func(fam, label, value string) *dto.Metric {
		for _, mt := range fams[fam].GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return mt
				}
			}
		}
		t.Fatalf("no %s{%s=%q}", fam, label, value)
		return nil
	}
	assert.Equal(t, 11.0, get("starplan_model_tokens_total", "kind", "prompt").GetCounter().GetValue())
	assert.Equal(t, 7.0, get("starplan_model_tokens_total", "kind", "completion").GetCounter().GetValue())
	assert.Equal(t, 1.0, get("starplan_model_errors_total", "kind", "auth").GetCounter().GetValue())
	assert.Equal(t, 0.0, get("starplan_model_errors_total", "kind", "other").GetCounter().GetValue())
	assert.Equal(t, uint64(1), get("starplan_model_request_duration_seconds", "result", "ok").GetHistogram().GetSampleCount())
	assert.Equal(t, uint64(1), get("starplan_model_request_duration_seconds", "result", "error").GetHistogram().GetSampleCount())

	rec = httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/metrics", nil))
	assert.Equal(t, http.StatusMethodNotAllowed, rec.Code)
}

// TestNewLogger: the formats and levels serve takes, and a clear error for others.
func TestNewLogger(t *testing.T) {
	var b bytes.Buffer
	l, err := NewLogger(&b, "json", "warn")
	require.NoError(t, err)
	l.Info("hidden")
	l.Warn("shown", "k", 1)
	assert.NotContains(t, b.String(), "hidden")
	assert.Contains(t, b.String(), `"msg":"shown","k":1`)
	b.Reset()
	l, err = NewLogger(&b, "text", "debug")
	require.NoError(t, err)
	l.Debug("d")
	assert.Contains(t, b.String(), "level=DEBUG msg=d")
	_, err = NewLogger(&b, "xml", "info")
	assert.ErrorContains(t, err, `log format "xml" is not one of text, json`)
	_, err = NewLogger(&b, "json", "loud")
	assert.ErrorContains(t, err, `log level "loud" is not one of debug, info, warn, error`)
}

// TestGrafanaDashboard: the dashboard in docs/grafana is JSON, and every metric its queries name
// is one these metrics write (a renamed family fails here, not on someone's screen).
func TestGrafanaDashboard(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "docs", "grafana", "starplan.json"))
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	require.NoError(t, json.Unmarshal(raw, &dash))
	var b bytes.Buffer
	require.NoError(t, NewMetrics(MetricsOptions{}).WriteText(&b))
	known := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (\S+) (\S+)$`).FindAllStringSubmatch(b.String(), -1) {
		known[m[1]] = true
		if m[2] == "histogram" {
			known[m[1]+"_bucket"], known[m[1]+"_sum"], known[m[1]+"_count"] = true, true, true
		}
	}
	names := 0
	for _, p := range dash.Panels {
		require.NotEmpty(t, p.Targets, p.Title)
		for _, tg := range p.Targets {
			for _, name := range regexp.MustCompile(`starplan_[a-z_]+`).FindAllString(tg.Expr, -1) {
				names++
				assert.True(t, known[name], "panel %q queries %s, which no family writes", p.Title, name)
			}
		}
	}
	assert.Greater(t, names, 10)
}
