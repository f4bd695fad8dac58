package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/access"
	"github.com/starplan/starplan/isolate"
	"github.com/starplan/starplan/telemetry"
)

// syncBuffer is a log destination written from the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// telemetryFixture is a server whose engine and requests feed metrics and a JSON log at debug.
func telemetryFixture(t *testing.T) (*fixture, *telemetry.Metrics, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	logger, err := telemetry.NewLogger(logs, "json", "debug")
	require.NoError(t, err)
	var m *telemetry.Metrics
	lg := telemetry.NewLogs(logger)
	hooks := telemetry.Hooks{
		Request: func(ctx context.Context, r telemetry.Request) { telemetry.ServerHooks(m, lg).Request(ctx, r) },
		Refused: func(ctx context.Context, r telemetry.Refusal) { telemetry.ServerHooks(m, lg).Refused(ctx, r) },
	}
	f := newFixture(t, Options{Telemetry: hooks})
	m = telemetry.NewMetrics(telemetry.MetricsOptions{
		Domain: f.eng.Policy().Name,
		Audit:  f.eng.RunStats,
		// The server's tests run plans in process; the pool's families are read through the same
		// function the CLI gives (internal/cli's serve test scrapes a real pool).
		Pool: func() isolate.Stats {
			return isolate.Stats{MaxWorkers: 4, Live: 2, Idle: 1, Busy: 1, Started: 3, Discarded: 1, Kills: map[string]uint64{"timeout": 1, "cancel": 0}}
		},
	})
	stopM := f.eng.Observe(m.Observe)
	stopL := f.eng.Observe(lg.Observe)
	t.Cleanup(func() { stopM(); stopL() })
	return f, m, logs
}

// scrape parses the metrics with Prometheus's own text parser.
func scrape(t *testing.T, m *telemetry.Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, m.WriteText(&b))
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(&b)
	require.NoError(t, err, "%s", b.String())
	return fams
}

// value is the sample of fam whose labels include want (a counter's or gauge's value, a
// histogram's count); -1 when there is none.
func value(fams map[string]*dto.MetricFamily, fam string, want map[string]string) float64 {
	f := fams[fam]
	if f == nil {
		return -1
	}
next:
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if labels[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	return -1
}

// TestMetricsAndLogsOfRuns: dry runs (one stopped by a limit, one over MCP), an apply, a
// conflict, applies refused by role and by rule, and a refused credential show in /metrics
// (parsed by Prometheus's parser: every family with its type, counts matching the runs made)
// and in the JSON log (each line an object with the expected fields, and never a token, a
// program or a row's value).
func TestMetricsAndLogsOfRuns(t *testing.T) {
	t.Parallel()
	f, m, logs := telemetryFixture(t)
	proposer := f.token("agent-1", access.Proposer, 0)
	approver := f.token("alice", access.Approver, 0)

	a := f.run(purchase("Aviator", 1, "Ann"), "one Aviator")
	b := f.run(purchase("Aviator", 1, "Bob"), "one Aviator")
	f.run(`answer_text = "hello"
STATUS = "success"
`, "say hello")
	r := f.call("POST", "/v1/runs", RunRequest{Program: "x = (\n"})
	require.Equal(t, http.StatusOK, r.status)
	r = f.call("POST", "/v1/runs", RunRequest{Program: "n = 0\nfor i in range(1000000):\n    n += 1\n", Limits: &Limits{MaxSteps: 1000}})
	require.Equal(t, http.StatusOK, r.status)
	var limited RunDocument
	r.decode(t, &limited)
	require.Equal(t, "steps", string(limited.Limit), "%v", limited.Diagnostics)
	require.Equal(t, http.StatusOK, f.call("POST", "/v1/runs/"+a.RunID+"/apply", ApplyRequest{Digest: a.Digest}).status)
	require.Equal(t, http.StatusConflict, f.call("POST", "/v1/runs/"+b.RunID+"/apply", ApplyRequest{Digest: b.Digest}).status)

	// A proposer may not apply (the demo domain has no auto rule): refused by role.
	r = f.callWith(proposer, "POST", "/v1/runs", RunRequest{Program: purchase("Wayfarer", 1, "Cy"), Request: "one Wayfarer"})
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var byProposer RunDocument
	r.decode(t, &byProposer)
	r = f.callWith(proposer, "POST", "/v1/runs/"+byProposer.RunID+"/apply", ApplyRequest{Digest: byProposer.Digest})
	require.Equal(t, http.StatusForbidden, r.status)
	require.Equal(t, CodeForbiddenRole, r.errorCode(t))
	// An approver may not apply their own run (four eyes): refused by rule.
	r = f.callWith(approver, "POST", "/v1/runs", RunRequest{Program: purchase("Wayfarer", 1, "Di"), Request: "one Wayfarer"})
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var byApprover RunDocument
	r.decode(t, &byApprover)
	r = f.callWith(approver, "POST", "/v1/runs/"+byApprover.RunID+"/apply", ApplyRequest{Digest: byApprover.Digest})
	require.Equal(t, http.StatusForbidden, r.status)
	require.Equal(t, CodeApprovalRequired, r.errorCode(t))

	// Over MCP (streamable HTTP, through the request recorder) a dry run counts by its origin.
	cs := mcpAs(t, f, testToken, nil)
	res, err := cs.CallTool(testContext(t), &mcp.CallToolParams{Name: "run_plan", Arguments: map[string]any{"program": "answer_text = 'hi'\nSTATUS = 'success'\n"}})
	require.NoError(t, err)
	require.False(t, res.IsError)
	// An event stream flushes through the recorder.
	stream, err := http.NewRequestWithContext(testContext(t), "GET", f.web.URL+"/v1/events", nil)
	require.NoError(t, err)
	stream.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := f.web.Client().Do(stream)
	require.NoError(t, err)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && sc.Text() != ": subscribed" { // the backlog first, flushed with the mark
	}
	require.Equal(t, ": subscribed", sc.Text())
	resp.Body.Close()

	require.Equal(t, http.StatusUnauthorized, f.callWith("not-the-token-0123456789", "GET", "/v1/runs", nil).status)
	require.Equal(t, http.StatusOK, f.call("GET", "/v1/runs/"+a.RunID, nil).status)

	fams := scrape(t, m)
	types := map[string]dto.MetricType{
		"starplan_runs_total":                     dto.MetricType_COUNTER,
		"starplan_phase_duration_seconds":         dto.MetricType_HISTOGRAM,
		"starplan_applies_total":                  dto.MetricType_COUNTER,
		"starplan_runs_limited_total":             dto.MetricType_COUNTER,
		"starplan_runs_pending":                   dto.MetricType_GAUGE,
		"starplan_audit_log_runs":                 dto.MetricType_GAUGE,
		"starplan_audit_log_bytes":                dto.MetricType_GAUGE,
		"starplan_worker_pool_size":               dto.MetricType_GAUGE,
		"starplan_workers":                        dto.MetricType_GAUGE,
		"starplan_worker_restarts_total":          dto.MetricType_COUNTER,
		"starplan_worker_kills_total":             dto.MetricType_COUNTER,
		"starplan_model_request_duration_seconds": dto.MetricType_HISTOGRAM,
		"starplan_model_tokens_total":             dto.MetricType_COUNTER,
		"starplan_model_errors_total":             dto.MetricType_COUNTER,
		"starplan_http_requests_total":            dto.MetricType_COUNTER,
		"starplan_http_request_duration_seconds":  dto.MetricType_HISTOGRAM,
	}
	for name, typ := range types {
		if assert.Contains(t, fams, name) {
			assert.Equal(t, typ, fams[name].GetType(), name)
		}
	}
	assert.Len(t, fams, len(types), "no family beside these")

	domain := f.eng.Policy().Name
	ok := map[string]string{"outcome": "ok", "origin": OriginHTTP, "domain": domain}
	assert.Equal(t, 5.0, value(fams, "starplan_runs_total", ok))
	assert.Equal(t, 1.0, value(fams, "starplan_runs_total", map[string]string{"outcome": "check_failed"}))
	assert.Equal(t, 1.0, value(fams, "starplan_runs_total", map[string]string{"outcome": "limit_exceeded"}))
	assert.Equal(t, 1.0, value(fams, "starplan_runs_limited_total", map[string]string{"limit": "steps"}))
	assert.Equal(t, 1.0, value(fams, "starplan_runs_total", map[string]string{"outcome": "ok", "origin": OriginMCP}))
	for result, n := range map[string]float64{"applied": 1, "conflict": 1, "refused_role": 1, "refused_rule": 1, "expired": 0} {
		assert.Equal(t, n, value(fams, "starplan_applies_total", map[string]string{"result": result}), result)
	}
	assert.Equal(t, 8.0, value(fams, "starplan_phase_duration_seconds", map[string]string{"phase": "dry_run"}))
	assert.Equal(t, 2.0, value(fams, "starplan_phase_duration_seconds", map[string]string{"phase": "apply"}))
	// The apply's steps: the applied one committed, the conflict did not; both were checked.
	assert.Equal(t, 1.0, value(fams, "starplan_phase_duration_seconds", map[string]string{"phase": "apply_commit"}), "only the apply that committed")
	assert.GreaterOrEqual(t, value(fams, "starplan_phase_duration_seconds", map[string]string{"phase": "apply_check"}), 2.0)
	assert.GreaterOrEqual(t, value(fams, "starplan_phase_duration_seconds", map[string]string{"phase": "apply_policy"}), 1.0)
	assert.Equal(t, 1.0, value(fams, "starplan_phase_duration_seconds", map[string]string{"phase": "check"}), "only the check that failed")
	assert.GreaterOrEqual(t, value(fams, "starplan_phase_duration_seconds", map[string]string{"phase": "run"}), 5.0)
	assert.GreaterOrEqual(t, value(fams, "starplan_phase_duration_seconds", map[string]string{"phase": "contract"}), 5.0)
	// The runner's phases: every run extracted, rewritten and checked, those that ran executed;
	// in process, no worker waited for.
	phase := func(p string) float64 {
		return value(fams, "starplan_phase_duration_seconds", map[string]string{"phase": p})
	}
	assert.Equal(t, 8.0, phase("extract"))
	assert.Equal(t, 8.0, phase("static_check"))
	assert.Equal(t, phase("run"), phase("execute"), "each run that ran")
	assert.Equal(t, 0.0, phase("worker_wait"))
	assert.Equal(t, 0.0, phase("worker_setup"))
	assert.Equal(t, phase("contract"), phase("diff"), "a change set before each contract")
	assert.Equal(t, 2.0, value(fams, "starplan_runs_pending", nil), "the two refused runs wait")
	assert.Equal(t, 1.0, value(fams, "starplan_audit_log_runs", map[string]string{"state": "applied"}))
	assert.Equal(t, 1.0, value(fams, "starplan_audit_log_runs", map[string]string{"state": "conflict"}))
	assert.Greater(t, value(fams, "starplan_audit_log_bytes", nil), 0.0)
	assert.Equal(t, 4.0, value(fams, "starplan_worker_pool_size", nil))
	assert.Equal(t, 1.0, value(fams, "starplan_workers", map[string]string{"state": "busy"}))
	assert.Equal(t, 1.0, value(fams, "starplan_worker_kills_total", map[string]string{"reason": "timeout"}))
	assert.Equal(t, 0.0, value(fams, "starplan_model_tokens_total", map[string]string{"kind": "prompt"}))

	http := func(route, status string) float64 {
		return value(fams, "starplan_http_requests_total", map[string]string{"route": route, "status": status})
	}
	assert.Equal(t, 7.0, http("run", "200"))
	assert.Equal(t, 1.0, http("apply", "200"))
	assert.Equal(t, 1.0, http("apply", "409"))
	assert.Equal(t, 2.0, http("apply", "403"))
	assert.Equal(t, 1.0, http("list", "401"), "a refused credential is counted by its route")
	assert.Equal(t, 1.0, http("show", "200"))
	assert.Greater(t, http("mcp", "200"), 0.0)
	assert.Eventually(t, func() bool { // the stream's request is told once its handler returns
		return value(scrape(t, m), "starplan_http_requests_total", map[string]string{"route": "events", "status": "200"}) == 1
	}, time.Minute, 10*time.Millisecond)
	for _, mf := range fams["starplan_http_requests_total"].GetMetric() {
		for _, l := range mf.GetLabel() {
			assert.NotContains(t, l.GetValue(), "/", "a route is a name, never a path")
		}
	}

	// The log: one JSON object a line, with the expected fields.
	type line map[string]any
	var lines []line
	sc = bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var l line
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l), "%s", sc.Text())
		lines = append(lines, l)
	}
	find := func(want line) line {
		t.Helper()
	next:
		for _, l := range lines {
			for k, v := range want {
				if l[k] != v {
					continue next
				}
			}
			return l
		}
		t.Errorf("no log line with %v in\n%s", want, logs.String())
		return nil
	}
	if l := find(line{"msg": "run", "run_id": a.RunID}); l != nil {
		assert.Equal(t, "INFO", l["level"])
		assert.Equal(t, OriginHTTP, l["origin"])
		assert.Equal(t, "pending", l["state"])
		assert.Contains(t, l, "duration_ms")
		assert.Contains(t, l, "time")
	}
	find(line{"msg": "decision", "run_id": a.RunID, "result": "applied", "by": "admin"})
	if l := find(line{"msg": "conflict", "run_id": b.RunID}); l != nil {
		assert.Equal(t, "WARN", l["level"])
		assert.Contains(t, l["codes"], "conflict", "one code per moved row")
	}
	find(line{"msg": "decision", "run_id": byProposer.RunID, "result": "refused", "code": CodeForbiddenRole, "by": "agent-1"})
	find(line{"msg": "decision", "run_id": byApprover.RunID, "result": "refused", "code": CodeApprovalRequired, "by": "alice"})
	find(line{"msg": "auth failed", "route": "list", "status": 401.0, "code": CodeUnauthorized, "level": "WARN"})
	find(line{"msg": "request", "route": "run", "method": "POST", "status": 200.0})
	find(line{"msg": "run started", "run_id": a.RunID, "level": "DEBUG"})
	find(line{"msg": "limit", "run_id": limited.RunID, "limit": "steps", "level": "WARN"})

	// Never a secret, a program or the data.
	out := logs.String()
	for _, secret := range []string{testToken, proposer, approver, "not-the-token-0123456789", "Aviator", "Ann", "Wayfarer", "one Aviator", "quantity_in_stock", "hello"} {
		assert.NotContains(t, out, secret)
	}
}
