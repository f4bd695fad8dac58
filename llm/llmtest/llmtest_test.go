package llmtest_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/llm"
	"github.com/starplan/starplan/llm/llmtest"
)

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestReplyCountsUsageInWords(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply("one two three"))
	c, err := llm.New(srv.Config())
	require.NoError(t, err)

	rep, err := c.Complete(t.Context(), []llm.Message{
		{Role: llm.RoleSystem, Content: "be brief"},
		{Role: llm.RoleUser, Content: "count to three"},
	})
	require.NoError(t, err)
	assert.Equal(t, "one two three", rep.Content)
	assert.Equal(t, llmtest.Model, rep.Model, "the requested model is echoed")
	assert.Equal(t, 5, rep.PromptTokens)
	assert.Equal(t, 3, rep.CompletionTokens)
	assert.Equal(t, 8, rep.TotalTokens)
}

func TestFuncScriptsByRequestAndAlwaysRepeats(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Always(llmtest.Func(func(r llmtest.Request) llmtest.Step {
		if strings.Contains(r.LastUser(), "fail") {
			return llmtest.Status(http.StatusBadRequest)
		}
		return llmtest.Reply("echo: " + r.LastUser())
	})))
	c, err := llm.New(srv.Config())
	require.NoError(t, err)

	for _, q := range []string{"a", "b", "c"} {
		rep, err := c.Complete(t.Context(), []llm.Message{{Role: llm.RoleUser, Content: q}})
		require.NoError(t, err)
		assert.Equal(t, "echo: "+q, rep.Content)
	}
	_, err = c.Complete(t.Context(), []llm.Message{{Role: llm.RoleUser, Content: "please fail"}})
	var he *llm.HTTPError
	assert.ErrorAs(t, err, &he)
	assert.Equal(t, 1, srv.Pending(), "an Always step is never consumed")
	assert.Len(t, srv.Requests(), 4)
}

func TestRequestsRecordTheWire(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply("x"), llmtest.Reply("y"))
	post(t, srv.URL+"/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"seed":7}`)
	post(t, srv.URL+"/chat/completions", `{"model":"m","temperature":0,"messages":[]}`)

	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	assert.Equal(t, "m", reqs[0].Model)
	assert.Equal(t, []llm.Message{{Role: "user", Content: "hi"}}, reqs[0].Messages)
	assert.Nil(t, reqs[0].Temperature, "absent on the wire")
	assert.JSONEq(t, "7", string(reqs[0].Fields["seed"]))
	require.NotNil(t, reqs[1].Temperature)
	assert.Equal(t, 0.0, *reqs[1].Temperature)
}

func TestUnknownPathDoesNotConsumeAStep(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply("x"))
	resp := post(t, strings.TrimSuffix(srv.URL, "/v1")+"/chat/completions", `{}`)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Equal(t, 1, srv.Pending())
}

func TestStatusAndRespondSetHeaders(t *testing.T) {
	srv := llmtest.NewServer(t,
		llmtest.Status(http.StatusTooManyRequests, "Retry-After: 3", "X-Extra: a"),
		llmtest.Respond(http.StatusBadGateway, "<html>", "Content-Type: text/html"))
	resp := post(t, srv.URL+"/chat/completions", `{}`)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.Equal(t, "3", resp.Header.Get("Retry-After"))
	assert.Equal(t, "a", resp.Header.Get("X-Extra"))
	resp = post(t, srv.URL+"/chat/completions", `{}`)
	assert.Equal(t, http.StatusBadGateway, resp.StatusCode)
	assert.Equal(t, "text/html", resp.Header.Get("Content-Type"))

	assert.PanicsWithValue(t, `llmtest: header "Retry-After=3" is not "Name: value"`, func() {
		llmtest.Status(http.StatusTooManyRequests, "Retry-After=3")
	})
}

func TestPushExtendsTheScript(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.Push(llmtest.Reply("late addition"))
	assert.Equal(t, 1, srv.Pending())
	c, err := llm.New(srv.Config())
	require.NoError(t, err)
	rep, err := c.Complete(t.Context(), []llm.Message{{Role: llm.RoleUser, Content: "q"}})
	require.NoError(t, err)
	assert.Equal(t, "late addition", rep.Content)
	assert.Equal(t, 0, srv.Pending())
}

// recorder is a testing.TB that records Errorf instead of failing the test.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func TestExhaustedScriptFailsTheTest(t *testing.T) {
	rec := &recorder{TB: t}
	srv := llmtest.NewServer(rec)
	resp := post(t, srv.URL+"/chat/completions", `{"model":"m","messages":[{"role":"user","content":"anyone?"}]}`)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Len(t, rec.errors, 1)
	assert.Contains(t, rec.errors[0], `request 1 (model "m", last user message "anyone?") has no scripted response`)
}

func TestCloseReleasesHangingRequests(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Hang())
	cfg := srv.Config()
	cfg.Timeout = time.Hour
	c, err := llm.New(cfg)
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() {
		_, err := c.Complete(context.Background(), []llm.Message{{Role: llm.RoleUser, Content: "q"}})
		done <- err
	}()
	for len(srv.Requests()) == 0 {
		time.Sleep(time.Millisecond)
	}
	srv.Close() // would block forever if Hang ignored the server closing
	assert.Error(t, <-done)
}
