package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
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

	"github.com/starplan/starplan/server"
)

// TestServeMetricsAndLogs runs `starplan serve` in process with its sandbox workers, metrics on
// their own address and JSON logs: a dry run over HTTP and one relayed from `exec` are counted
// by origin, the worker pool's families come from the real pool, /metrics needs no token and
// the API's address serves no /metrics, and the log lines are JSON objects without the token.
func TestServeMetricsAndLogs(t *testing.T) {
	t.Parallel()
	ctx := deadline(t)
	base, err := os.MkdirTemp("", "sp") // a short path: the relay's unix socket
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	dir := filepath.Join(base, "store")
	const token = "a-token-for-the-metrics-test"
	errb := &syncBuffer{}
	sctx, stop := context.WithCancel(ctx)
	code := make(chan int, 1)
	go func() {
		ios := IOStreams{In: strings.NewReader(""), Out: io.Discard, Err: errb, Getenv: func(k string) string {
			return map[string]string{"STARPLAN_TOKEN": token}[k]
		}}
		code <- MainContext(sctx, []string{"--db", dir, "serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
			"--log-format", "json", "--log-level", "info"}, ios)
	}()
	t.Cleanup(func() { stop(); <-code })
	var api, metrics string
	for api == "" || metrics == "" || !strings.Contains(errb.String(), "go through") {
		select {
		case c := <-code:
			t.Fatalf("serve exited with %d: %s", c, errb)
		case <-ctx.Done():
			t.Fatalf("serve never listened: %s", errb)
		default:
			waitABit()
		}
		if m := regexp.MustCompile(`listening on (http://\S+)`).FindStringSubmatch(errb.String()); m != nil {
			api = m[1]
		}
		if m := regexp.MustCompile(`metrics on (http://\S+)`).FindStringSubmatch(errb.String()); m != nil {
			metrics = m[1]
		}
	}

	body, err := json.Marshal(server.RunRequest{Program: readFile(t, example("02_purchase_wayfarer.star"))})
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(ctx, "POST", api+"/v1/runs", strings.NewReader(string(body)))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	var out, cerr syncBuffer
	c := MainContext(ctx, []string{"--db", dir, "exec", example("01_round_under_100.star")}, IOStreams{In: strings.NewReader(""), Out: &out, Err: &cerr,
		Getenv: func(string) string { return "" }})
	require.Equal(t, ExitOK, c, "%s %s", out.String(), cerr.String())

	resp, err = http.Get(api + "/metrics")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the API's address serves no metrics")

	resp, err = http.Get(metrics) // no token
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	runs := map[string]float64{}
	for _, m := range fams["starplan_runs_total"].GetMetric() {
		l := map[string]string{}
		for _, lp := range m.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		assert.Equal(t, "inventory", l["domain"])
		runs[l["origin"]+" "+l["outcome"]] += m.GetCounter().GetValue()
	}
	assert.Equal(t, map[string]float64{"serve:http ok": 1, "exec ok": 1}, runs)
	require.Contains(t, fams, "starplan_worker_pool_size")
	assert.Equal(t, dto.MetricType_GAUGE, fams["starplan_worker_pool_size"].GetType())
	assert.Greater(t, fams["starplan_worker_pool_size"].GetMetric()[0].GetGauge().GetValue(), 0.0, "the real pool's bound")
	workers := 0.0
	for _, m := range fams["starplan_workers"].GetMetric() {
		workers += m.GetGauge().GetValue()
	}
	assert.Greater(t, workers, 0.0, "a warm worker at least")
	require.Contains(t, fams, "starplan_worker_kills_total")
	assert.Len(t, fams["starplan_worker_kills_total"].GetMetric(), 6, "every reason")

	// The log: JSON objects (the start's own lines are plain), never the token.
	var runLines int
	sc := bufio.NewScanner(strings.NewReader(errb.String()))
	for sc.Scan() {
		if !strings.HasPrefix(sc.Text(), "{") {
			continue
		}
		var l map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l), sc.Text())
		if l["msg"] == "run" {
			runLines++
			assert.Contains(t, l, "run_id")
			assert.Contains(t, l, "origin")
		}
	}
	assert.Equal(t, 2, runLines, "%s", errb)
	assert.NotContains(t, errb.String(), token)
	// Nor an admin's one-time login link (review: standard error is the log, not a terminal).
	assert.NotContains(t, errb.String(), "/login")
	assert.NotContains(t, errb.String(), "code=")
	assert.Contains(t, errb.String(), "a one-time login link is printed only on a terminal")
}

// TestServeTelemetryFlags: an unknown log format or level, or a metrics address that cannot be
// listened on, stops serve at the start with a usage error that names the choices.
func TestServeTelemetryFlags(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	o := s.run(false, "", "serve", "--log-format", "xml")
	assert.Equal(t, ExitUsage, o.code)
	assert.Contains(t, o.err, `log format "xml" is not one of text, json`)
	o = s.run(false, "", "serve", "--log-level", "loud")
	assert.Equal(t, ExitUsage, o.code)
	assert.Contains(t, o.err, "Try: give --log-format text or json, and --log-level debug, info, warn or error")
	o = s.run(false, "", "serve", "--listen", "127.0.0.1:0", "--metrics-listen", "256.0.0.1:1")
	assert.Equal(t, ExitUsage, o.code, o.err)
	assert.Contains(t, o.err, "listening for metrics on 256.0.0.1:1")
}
