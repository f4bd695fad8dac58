package llm_test

import (
	"context"
	"errors"
	"net"
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

var question = []llm.Message{
	{Role: llm.RoleSystem, Content: "You write plans."},
	{Role: llm.RoleUser, Content: "How many widgets are in stock?"},
}

// newClient returns a client for srv, with edits applied to srv.Config().
func newClient(t *testing.T, srv *llmtest.Server, edits ...func(*llm.Config)) *llm.Client {
	t.Helper()
	cfg := srv.Config()
	for _, edit := range edits {
		edit(&cfg)
	}
	c, err := llm.New(cfg)
	require.NoError(t, err)
	return c
}

func TestCompleteReturnsContentAndUsage(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.ReplyWith(llmtest.Completion{
		Content: "<execute_python>answer_text = '3'</execute_python>", Model: "served-model-2026",
		PromptTokens: 120, CompletionTokens: 30,
	}))
	c := newClient(t, srv)

	rep, err := c.Complete(t.Context(), question)
	require.NoError(t, err)
	assert.Equal(t, "<execute_python>answer_text = '3'</execute_python>", rep.Content)
	assert.Equal(t, "served-model-2026", rep.Model)
	assert.Equal(t, "stop", rep.FinishReason)
	assert.Equal(t, 120, rep.PromptTokens)
	assert.Equal(t, 30, rep.CompletionTokens)
	assert.Equal(t, 150, rep.TotalTokens)
	assert.Equal(t, 1, rep.Attempts)
	assert.Positive(t, rep.Latency)

	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	assert.Equal(t, llmtest.Path, reqs[0].Path)
	assert.Equal(t, llmtest.Model, reqs[0].Model)
	assert.Equal(t, llmtest.APIKey, reqs[0].APIKey)
	assert.Equal(t, question, reqs[0].Messages)
	assert.Empty(t, srv.Waits())
}

func TestCompleteRejectsNoMessages(t *testing.T) {
	srv := llmtest.NewServer(t)
	_, err := newClient(t, srv).Complete(t.Context(), nil)
	require.Error(t, err)
	assert.Empty(t, srv.Requests())
}

func TestTemperatureZeroIsSentOnTheWire(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply("ok"))
	_, err := newClient(t, srv).Complete(t.Context(), question)
	require.NoError(t, err)

	req := srv.Requests()[0]
	require.NotNil(t, req.Temperature, "go-openai drops a zero temperature; the client must send it")
	assert.Equal(t, 0.0, *req.Temperature)
	assert.JSONEq(t, "0", string(req.Fields["temperature"]))
}

func TestTemperatureNonZeroIsSent(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply("ok"))
	c := newClient(t, srv, func(cfg *llm.Config) { cfg.Temperature = 0.7 })
	_, err := c.Complete(t.Context(), question)
	require.NoError(t, err)

	req := srv.Requests()[0]
	require.NotNil(t, req.Temperature)
	assert.InDelta(t, 0.7, *req.Temperature, 1e-6)
}

func TestReasoningModelsAreAcceptedWithoutTemperature(t *testing.T) {
	for _, model := range []string{"o1", "o3-mini", "o4-mini", "gpt-5", "gpt-5.6-luna", "gpt-6-luna", "openai/o3-mini"} {
		t.Run(model, func(t *testing.T) {
			srv := llmtest.NewServer(t, llmtest.Reply("ok"))
			c := newClient(t, srv, func(cfg *llm.Config) {
				cfg.Model = model
				cfg.Temperature = 0.2 // go-openai would reject this for o-series models
			})
			rep, err := c.Complete(t.Context(), question)
			require.NoError(t, err)
			assert.Equal(t, model, rep.Model)

			req := srv.Requests()[0]
			assert.Equal(t, model, req.Model)
			assert.Nil(t, req.Temperature, "reasoning models accept only their fixed temperature")
			assert.NotContains(t, req.Fields, "max_tokens")
		})
	}
}

func TestReasoningModel(t *testing.T) {
	for model, want := range map[string]bool{
		"o1": true, "o1-mini": true, "o3": true, "o3-mini-2025-01-31": true, "o4-mini": true,
		"gpt-5": true, "gpt-5-mini": true, "gpt-5.4-nano": true, "gpt-6-sol": true, "GPT-6.1-SOL": true,
		"openai/o3-mini":    true,
		"gpt-5-chat-latest": false, "gpt-4.1-mini": false, "gpt-4o": false, "llama3.2": false,
		"qwen2.5-coder:7b": false, "deepseek-r1": false, "o1x": false, "": false,
	} {
		assert.Equal(t, want, llm.ReasoningModel(model), model)
	}
}

func TestRateLimitThenSuccessHonoursRetryAfter(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Status(http.StatusTooManyRequests, "Retry-After: 2"), llmtest.Reply("ok"))
	rep, err := newClient(t, srv).Complete(t.Context(), question)
	require.NoError(t, err)
	assert.Equal(t, "ok", rep.Content)
	assert.Equal(t, 2, rep.Attempts)
	assert.Equal(t, []time.Duration{2 * time.Second}, srv.Waits())
	assert.Len(t, srv.Requests(), 2)
}

func TestRateLimitHonoursRetryAfterMs(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Status(http.StatusTooManyRequests, "retry-after-ms: 1500"), llmtest.Reply("ok"))
	_, err := newClient(t, srv).Complete(t.Context(), question)
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{1500 * time.Millisecond}, srv.Waits())
}

func TestServerErrorsAreRetriedWithGrowingBackoff(t *testing.T) {
	srv := llmtest.NewServer(t,
		llmtest.Status(http.StatusServiceUnavailable),
		llmtest.Respond(http.StatusBadGateway, "<html>502 Bad Gateway</html>", "Content-Type: text/html"),
		llmtest.Reply("ok"))
	rep, err := newClient(t, srv).Complete(t.Context(), question)
	require.NoError(t, err)
	assert.Equal(t, "ok", rep.Content)
	assert.Equal(t, 3, rep.Attempts)

	waits := srv.Waits()
	require.Len(t, waits, 2)
	base := llm.DefaultBaseBackoff
	assert.GreaterOrEqual(t, waits[0], base/2)
	assert.LessOrEqual(t, waits[0], base)
	assert.GreaterOrEqual(t, waits[1], base)
	assert.LessOrEqual(t, waits[1], 2*base)
}

func TestRequestTimeoutStatusIsRetried(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Status(http.StatusRequestTimeout), llmtest.Reply("ok"))
	rep, err := newClient(t, srv).Complete(t.Context(), question)
	require.NoError(t, err)
	assert.Equal(t, 2, rep.Attempts)
}

func TestRateLimitRetriesExhausted(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Always(llmtest.Status(http.StatusTooManyRequests, "Retry-After: 1")))
	rep, err := newClient(t, srv).Complete(t.Context(), question)

	var rl *llm.RateLimitError
	require.ErrorAs(t, err, &rl)
	assert.Equal(t, llm.DefaultMaxRetries+1, rl.Attempts)
	assert.Equal(t, time.Second, rl.RetryAfter)
	assert.Contains(t, rl.Message, "Rate limit reached")
	assert.Contains(t, err.Error(), "after 4 attempts")
	assert.Contains(t, err.Error(), srv.URL)
	assert.Equal(t, 4, rep.Attempts)
	assert.Len(t, srv.Requests(), 4)
	assert.Len(t, srv.Waits(), 3)
}

func TestMaxRetriesIsConfigurable(t *testing.T) {
	for _, tc := range []struct{ maxRetries, attempts int }{{-1, 1}, {1, 2}, {5, 6}} {
		srv := llmtest.NewServer(t, llmtest.Always(llmtest.Status(http.StatusInternalServerError)))
		_, err := newClient(t, srv, func(cfg *llm.Config) { cfg.MaxRetries = tc.maxRetries }).
			Complete(t.Context(), question)

		var he *llm.HTTPError
		require.ErrorAs(t, err, &he)
		assert.Equal(t, http.StatusInternalServerError, he.Status)
		assert.Equal(t, tc.attempts, he.Attempts)
		assert.Len(t, srv.Requests(), tc.attempts)
	}
}

func TestServerErrorRetriesExhausted(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Always(
		llmtest.Respond(http.StatusBadGateway, "<html>502 Bad Gateway</html>", "Content-Type: text/html")))
	_, err := newClient(t, srv).Complete(t.Context(), question)

	var he *llm.HTTPError
	require.ErrorAs(t, err, &he)
	assert.Equal(t, http.StatusBadGateway, he.Status)
	assert.Equal(t, 4, he.Attempts)
	assert.Contains(t, he.Message, "502 Bad Gateway")
	assert.Contains(t, err.Error(), "4 attempts")
}

func TestRetryAfterLongerThanTheCapFailsAtOnce(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Status(http.StatusTooManyRequests, "Retry-After: 3600"), llmtest.Reply("ok"))
	_, err := newClient(t, srv).Complete(t.Context(), question)

	var rl *llm.RateLimitError
	require.ErrorAs(t, err, &rl)
	assert.Equal(t, time.Hour, rl.RetryAfter)
	assert.Contains(t, err.Error(), "asks to wait 1h0m0s")
	assert.Len(t, srv.Requests(), 1)
	assert.Empty(t, srv.Waits())
	assert.Equal(t, 1, srv.Pending())
}

func TestHungServerTimesOut(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Hang(), llmtest.Reply("too late"))
	c := newClient(t, srv, func(cfg *llm.Config) { cfg.Timeout = 50 * time.Millisecond })
	rep, err := c.Complete(t.Context(), question)

	var te *llm.TimeoutError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, 50*time.Millisecond, te.Timeout)
	assert.Contains(t, err.Error(), "within 50ms")
	assert.Contains(t, err.Error(), "--timeout")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, 1, rep.Attempts, "a timed-out request is not retried")
	assert.Equal(t, 1, srv.Pending())
}

func TestCancelDuringRequest(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	srv := llmtest.NewServer(t, llmtest.Func(func(llmtest.Request) llmtest.Step {
		cancel()
		return llmtest.Hang()
	}))
	_, err := newClient(t, srv).Complete(ctx, question)

	require.ErrorIs(t, err, context.Canceled)
	var te *llm.TimeoutError
	assert.False(t, errors.As(err, &te), "a cancelled request is not a timeout")
	var ue *llm.UnreachableError
	assert.False(t, errors.As(err, &ue), "a cancelled request is not a transport failure")
	assert.Empty(t, srv.Waits(), "a cancelled request is not retried")
}

func TestCancelDuringBackoffWait(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	srv := llmtest.NewServer(t, llmtest.Status(http.StatusServiceUnavailable, "Retry-After: 20"), llmtest.Reply("ok"))
	var waited []time.Duration
	c := newClient(t, srv, func(cfg *llm.Config) {
		// The context ends during the wait. (That the real timer stops early is tested in
		// wire_internal_test.go.)
		cfg.Sleep = func(ctx context.Context, d time.Duration) error {
			waited = append(waited, d)
			cancel()
			<-ctx.Done()
			return ctx.Err()
		}
	})
	rep, err := c.Complete(ctx, question)

	require.ErrorIs(t, err, context.Canceled)
	assert.Contains(t, err.Error(), "waiting 20s to retry")
	var he *llm.HTTPError
	assert.False(t, errors.As(err, &he), "cancellation is reported as such")
	assert.Equal(t, []time.Duration{20 * time.Second}, waited)
	assert.Equal(t, 1, rep.Attempts)
	assert.Len(t, srv.Requests(), 1)
	assert.Equal(t, 1, srv.Pending())
}

func TestMalformedJSON(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Raw("<html><body>Welcome to nginx!</body></html>"), llmtest.Reply("ok"))
	_, err := newClient(t, srv).Complete(t.Context(), question)

	var re *llm.ResponseError
	require.ErrorAs(t, err, &re)
	assert.Contains(t, re.Body, "<html><body>Welcome")
	assert.Contains(t, err.Error(), "not chat completion JSON")
	assert.Contains(t, err.Error(), llm.EnvBaseURL)
	assert.Len(t, srv.Requests(), 1, "a malformed answer is not retried")
}

func TestNoChoices(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.NoChoices())
	rep, err := newClient(t, srv).Complete(t.Context(), question)

	var re *llm.ResponseError
	require.ErrorAs(t, err, &re)
	assert.Contains(t, re.Reason, "no choices")
	assert.Contains(t, err.Error(), llm.EnvBaseURL)
	assert.Positive(t, rep.PromptTokens, "usage is reported even when the answer is unusable")
}

func TestEmptyContent(t *testing.T) {
	srv := llmtest.NewServer(t,
		llmtest.Reply("  \n"),
		llmtest.ReplyWith(llmtest.Completion{FinishReason: "length", CompletionTokens: 4096}))
	c := newClient(t, srv)

	_, err := c.Complete(t.Context(), question)
	var re *llm.ResponseError
	require.ErrorAs(t, err, &re)
	assert.Contains(t, re.Reason, "no text")
	assert.Contains(t, err.Error(), llm.EnvModel)

	rep, err := c.Complete(t.Context(), question)
	require.ErrorAs(t, err, &re)
	assert.Contains(t, err.Error(), `finish_reason "length"`)
	assert.Contains(t, err.Error(), "used up its output tokens")
	assert.Equal(t, 4096, rep.CompletionTokens)
}

func TestAuthErrors(t *testing.T) {
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		srv := llmtest.NewServer(t, llmtest.Status(status), llmtest.Reply("ok"))
		_, err := newClient(t, srv).Complete(t.Context(), question)

		var ae *llm.AuthError
		require.ErrorAs(t, err, &ae, "status %d", status)
		assert.Equal(t, status, ae.Status)
		assert.Contains(t, err.Error(), llm.EnvAPIKey)
		assert.Len(t, srv.Requests(), 1, "status %d is not retried", status)
	}
}

func TestModelNotFound(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Status(http.StatusNotFound), llmtest.Reply("ok"))
	c := newClient(t, srv, func(cfg *llm.Config) { cfg.Model = "gpt-nonexistent" })
	_, err := c.Complete(t.Context(), question)

	var me *llm.ModelNotFoundError
	require.ErrorAs(t, err, &me)
	assert.Equal(t, "gpt-nonexistent", me.Model)
	assert.Contains(t, me.Message, "does not exist")
	assert.Contains(t, err.Error(), llm.EnvModel)
	assert.Contains(t, err.Error(), "--model")
	assert.Len(t, srv.Requests(), 1)
}

func TestBaseURLWithoutV1IsReportedAsNotFound(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply("ok"))
	c := newClient(t, srv, func(cfg *llm.Config) { cfg.BaseURL = strings.TrimSuffix(srv.URL, "/v1") })
	_, err := c.Complete(t.Context(), question)

	var me *llm.ModelNotFoundError
	require.ErrorAs(t, err, &me)
	assert.Contains(t, err.Error(), "/v1 suffix")
}

func TestLegacyCompletionsModelIsNotFound(t *testing.T) {
	srv := llmtest.NewServer(t)
	c := newClient(t, srv, func(cfg *llm.Config) { cfg.Model = "text-davinci-003" })
	_, err := c.Complete(t.Context(), question)

	var me *llm.ModelNotFoundError
	require.ErrorAs(t, err, &me)
	assert.Empty(t, srv.Requests())
}

func TestBadRequestIsNotRetried(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Status(http.StatusBadRequest), llmtest.Reply("ok"))
	_, err := newClient(t, srv).Complete(t.Context(), question)

	var he *llm.HTTPError
	require.ErrorAs(t, err, &he)
	assert.Equal(t, http.StatusBadRequest, he.Status)
	assert.Contains(t, err.Error(), "refused the request")
	assert.Len(t, srv.Requests(), 1)
}

func TestUnreachableEndpoint(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.Close() // nothing listens on its port any more
	rep, err := newClient(t, srv).Complete(t.Context(), question)

	var ue *llm.UnreachableError
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, srv.URL+"/chat/completions", ue.URL)
	assert.Contains(t, err.Error(), srv.URL)
	assert.Contains(t, err.Error(), llm.EnvBaseURL)
	assert.Contains(t, err.Error(), "server is running")
	var opErr *net.OpError
	assert.ErrorAs(t, err, &opErr, "the transport error is kept")
	assert.Equal(t, 4, ue.Attempts, "transport errors are retried")
	assert.Equal(t, 4, rep.Attempts)
	assert.Len(t, srv.Waits(), 3)
}

func TestConcurrentCalls(t *testing.T) {
	srv := llmtest.NewServer(t,
		llmtest.Status(http.StatusTooManyRequests, "Retry-After: 0"),
		llmtest.Always(llmtest.Func(func(r llmtest.Request) llmtest.Step {
			return llmtest.Reply("re: " + r.LastUser())
		})))
	c := newClient(t, srv)

	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			q := []llm.Message{{Role: llm.RoleUser, Content: strings.Repeat("x", i+1)}}
			rep, err := c.Complete(t.Context(), q)
			if assert.NoError(t, err) {
				assert.Equal(t, "re: "+q[0].Content, rep.Content)
			}
		})
	}
	wg.Wait()
	assert.Len(t, srv.Requests(), 9)
}
