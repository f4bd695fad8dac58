package llm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// Message roles.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Message is one chat message: a role (RoleSystem, RoleUser or RoleAssistant) and its text.
type Message struct {
	Role    string
	Content string
}

// Reply is the model's answer to one Complete call and what it cost.
type Reply struct {
	Content      string // the text of the first choice
	Model        string // the model that answered, as the server names it (else Config.Model)
	FinishReason string // such as "stop" or "length"; empty if the server sent none

	// Token usage as the server reports it (0 when it reports none).
	PromptTokens, CompletionTokens, TotalTokens int

	Latency  time.Duration // wall time of the whole call: every attempt and every wait
	Attempts int           // HTTP requests made, 1 when the first succeeded
}

// Client sends chat completions to one endpoint with one model. It is safe for concurrent use.
type Client struct {
	cfg      Config
	endpoint string
	api      *openai.Client
}

// New returns a Client for cfg, with defaults for its zero fields (see Config). It makes no
// request. It returns a *ConfigError when BaseURL is not an http(s) URL, or when APIKey is
// empty and BaseURL is OpenAI's (other servers may need no key).
func New(cfg Config) (*Client, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	d := &doer{hc: cfg.HTTPClient, maxReply: cfg.MaxReply}
	if !ReasoningModel(cfg.Model) {
		t := cfg.Temperature
		d.temperature = &t
	}
	oc := openai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = cfg.BaseURL
	oc.HTTPClient = d
	return &Client{
		cfg:      cfg,
		endpoint: cfg.BaseURL + "/chat/completions",
		api:      openai.NewClientWithConfig(oc),
	}, nil
}

// Model returns the model name sent with every request.
func (c *Client) Model() string { return c.cfg.Model }

// BaseURL returns the API root requests go to, without a trailing slash.
func (c *Client) BaseURL() string { return c.cfg.BaseURL }

// Complete sends msgs and returns the first choice's text with its usage.
//
// Each attempt is bounded by Config.Timeout. A 408, 429 or 5xx answer, or a transport error, is
// retried up to Config.MaxRetries times: after the wait the server asks for in Retry-After (up
// to MaxRetryAfter), or else after an exponential backoff with jitter (DefaultBaseBackoff
// doubling up to DefaultMaxBackoff). Other failures are not retried.
//
// An answer's body is read to at most Config.MaxReply bytes after decompression; a longer one
// fails with a *ReplyTooLargeError and is not retried.
//
// Errors are typed: *UnreachableError, *AuthError, *ModelNotFoundError, *RateLimitError,
// *TimeoutError, *ResponseError, *ReplyTooLargeError or *HTTPError. When ctx is done, during a
// request or a wait, Complete stops and returns an error that wraps ctx.Err(). The Reply's
// Attempts, Latency and Model are set even on error, and its usage too when the server reported
// any.
func (c *Client) Complete(ctx context.Context, msgs []Message) (Reply, error) {
	start := time.Now()
	rep := Reply{Model: c.cfg.Model}
	if len(msgs) == 0 {
		return rep, errors.New("llm: Complete needs at least one message")
	}
	req := openai.ChatCompletionRequest{Model: c.cfg.Model}
	for _, m := range msgs {
		req.Messages = append(req.Messages, openai.ChatCompletionMessage{Role: m.Role, Content: m.Content})
	}
	for {
		rep.Attempts++
		resp, ex, timedOut, err := c.attempt(ctx, req)
		rep.Latency = time.Since(start)
		if err == nil {
			return c.reply(rep, resp)
		}
		if ctx.Err() != nil {
			return rep, fmt.Errorf("llm: request to %s abandoned: %w", c.endpoint, ctx.Err())
		}
		err, wait, retry := c.classify(err, ex, timedOut, rep.Attempts)
		if !retry || rep.Attempts > c.cfg.MaxRetries {
			return rep, err
		}
		if serr := c.cfg.Sleep(ctx, wait); serr != nil {
			rep.Latency = time.Since(start)
			return rep, fmt.Errorf("llm: request to %s abandoned while waiting %s to retry (%v): %w",
				c.endpoint, wait, err, serr)
		}
	}
}

// attempt makes one request under its own timeout. timedOut reports that the timeout, not ctx,
// ended it.
func (c *Client) attempt(ctx context.Context, req openai.ChatCompletionRequest) (
	resp openai.ChatCompletionResponse, ex *exchange, timedOut bool, err error,
) {
	actx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	ex = &exchange{}
	resp, err = c.api.CreateChatCompletion(context.WithValue(actx, exchangeKey{}, ex), req)
	if err != nil && ctx.Err() == nil {
		var ne net.Error
		timedOut = errors.Is(actx.Err(), context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
	}
	return resp, ex, timedOut, err
}

// classify turns a failed attempt into the error to report, and says whether to retry and
// after what wait.
//
//lint:ignore ST1008 the error is what classify makes; wait and retry only qualify it
func (c *Client) classify(err error, ex *exchange, timedOut bool, n int) (_ error, wait time.Duration, retry bool) {
	switch {
	case ex.tooLarge:
		return &ReplyTooLargeError{URL: c.endpoint, Limit: c.cfg.MaxReply}, 0, false
	case timedOut:
		return &TimeoutError{URL: c.endpoint, Timeout: c.cfg.Timeout, Attempts: n, Err: err}, 0, false
	case errors.Is(err, openai.ErrChatCompletionInvalidModel):
		return &ModelNotFoundError{URL: c.endpoint, Model: c.cfg.Model,
			Message: "it is a legacy completions model, not a chat model"}, 0, false
	case ex.status == 0:
		return &UnreachableError{URL: c.endpoint, Attempts: n, Err: err}, backoff(n), true
	case ex.status < 400:
		return &ResponseError{
			URL:    c.endpoint,
			Reason: fmt.Sprintf("%d %s with a body that is not chat completion JSON (%v)", ex.status, http.StatusText(ex.status), err),
			Body:   string(ex.body),
			Hint:   baseURLHint,
			Err:    err,
		}, 0, false
	}

	msg := serverMessage(err)
	asked, hasAsked := retryAfter(ex.header, time.Now())
	wait = backoff(n)
	if hasAsked {
		wait = asked
	}
	switch status := ex.status; {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return &AuthError{URL: c.endpoint, Model: c.cfg.Model, Status: status, Message: msg}, 0, false
	case status == http.StatusNotFound:
		return &ModelNotFoundError{URL: c.endpoint, Model: c.cfg.Model, Message: msg}, 0, false
	case status == http.StatusTooManyRequests:
		e := &RateLimitError{URL: c.endpoint, Attempts: n, Message: msg}
		if hasAsked {
			e.RetryAfter = asked
		}
		return e, wait, !hasAsked || asked <= MaxRetryAfter
	case status == http.StatusRequestTimeout || status >= 500:
		return &HTTPError{URL: c.endpoint, Status: status, Attempts: n, Message: msg}, wait, !hasAsked || asked <= MaxRetryAfter
	default:
		return &HTTPError{URL: c.endpoint, Status: status, Attempts: n, Message: msg}, 0, false
	}
}

const baseURLHint = "Check that " + EnvBaseURL + " points at the root of an OpenAI-compatible API " +
	"(usually ending in /v1), not at a web page, a proxy's error page or another kind of API"

// reply checks a decoded answer and copies it into rep.
func (c *Client) reply(rep Reply, resp openai.ChatCompletionResponse) (Reply, error) {
	if resp.Model != "" {
		rep.Model = resp.Model
	}
	rep.PromptTokens = resp.Usage.PromptTokens
	rep.CompletionTokens = resp.Usage.CompletionTokens
	rep.TotalTokens = resp.Usage.TotalTokens
	if len(resp.Choices) == 0 {
		return rep, &ResponseError{URL: c.endpoint, Reason: "the reply has no choices", Hint: baseURLHint}
	}
	choice := resp.Choices[0]
	rep.Content = choice.Message.Content
	rep.FinishReason = string(choice.FinishReason)
	if strings.TrimSpace(rep.Content) == "" {
		hint := "The model wrote nothing: try again, or choose another model with " + EnvModel + " or --model"
		if choice.FinishReason == openai.FinishReasonLength {
			hint = "The model used up its output tokens before writing any text (reasoning models spend " +
				"tokens thinking): try again, or choose another model with " + EnvModel + " or --model"
		}
		return rep, &ResponseError{
			URL:    c.endpoint,
			Reason: fmt.Sprintf("the first choice has no text (finish_reason %q)", rep.FinishReason),
			Hint:   hint,
		}
	}
	return rep, nil
}

// serverMessage returns the explanation a failing answer carried: the OpenAI error message, or
// the start of a body that is not OpenAI error JSON.
func serverMessage(err error) string {
	var apiErr *openai.APIError
	if errors.As(err, &apiErr) {
		return apiErr.Message
	}
	var reqErr *openai.RequestError
	if errors.As(err, &reqErr) {
		body := strings.Join(strings.Fields(string(reqErr.Body)), " ")
		if len(body) > bodyPrefixSize {
			body = body[:bodyPrefixSize] + "…"
		}
		return body
	}
	return ""
}
