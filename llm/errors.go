package llm

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// ConfigError reports a Config that cannot work, before any request is made. Field names the
// environment variable to set; Message is one paragraph that says what to set.
type ConfigError struct {
	Field   string
	Message string
}

func (e *ConfigError) Error() string { return e.Message }

// UnreachableError reports that no HTTP answer came back from the endpoint (connection refused,
// unknown host, TLS failure, connection reset) on any of Attempts attempts.
type UnreachableError struct {
	URL      string // the endpoint that was called
	Attempts int
	Err      error // the last transport error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach the model server at %s (%s): %v. "+
		"Check that %s is right (it is the API root, usually ending in /v1, such as %s or "+
		"http://localhost:11434/v1 for Ollama) and that the server is running and reachable from here",
		e.URL, attempts(e.Attempts), e.Err, EnvBaseURL, DefaultBaseURL)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// AuthError reports a 401 or 403 answer: the key is missing, wrong, or not allowed to use the
// model. It is never retried.
type AuthError struct {
	URL     string
	Model   string
	Status  int
	Message string // the server's message, if any
}

func (e *AuthError) Error() string {
	what := "rejected the API key"
	if e.Status == http.StatusForbidden {
		what = fmt.Sprintf("refused access to model %q with this API key", e.Model)
	}
	return fmt.Sprintf("the model server at %s %s (%s). "+
		"Check %s: it must hold a valid key for this server, with access to the model",
		e.URL, what, statusText(e.Status, e.Message), EnvAPIKey)
}

// ModelNotFoundError reports that the server does not serve the requested model (a 404, or a
// model that only the legacy completions API accepts). It is never retried.
type ModelNotFoundError struct {
	URL     string
	Model   string
	Message string
}

func (e *ModelNotFoundError) Error() string {
	return fmt.Sprintf("model %q was not found at %s (%s). "+
		"Set %s or pass --model with a model this server serves (for Ollama, see `ollama list`); "+
		"if the server reports an unknown path rather than an unknown model, %s probably lacks its /v1 suffix",
		e.Model, e.URL, statusText(http.StatusNotFound, e.Message), EnvModel, EnvBaseURL)
}

// RateLimitError reports 429 answers that outlasted every retry, or a Retry-After longer than
// MaxRetryAfter.
type RateLimitError struct {
	URL        string
	Attempts   int
	RetryAfter time.Duration // the wait the server last asked for; 0 if it named none
	Message    string
}

func (e *RateLimitError) Error() string {
	if e.RetryAfter > MaxRetryAfter {
		return fmt.Sprintf("the model server at %s is rate limiting (%s) and asks to wait %s, "+
			"longer than the %s starplan waits. Try again later, or check the plan and quota of the "+
			"account behind %s", e.URL, statusText(http.StatusTooManyRequests, e.Message),
			e.RetryAfter, MaxRetryAfter, EnvAPIKey)
	}
	return fmt.Sprintf("the model server at %s is still rate limiting after %s (%s). "+
		"Wait a minute and try again, send fewer requests at once (lower --concurrency), or check "+
		"the plan and quota of the account behind %s", e.URL, attempts(e.Attempts),
		statusText(http.StatusTooManyRequests, e.Message), EnvAPIKey)
}

// TimeoutError reports that an attempt got no complete answer within Timeout. A timed-out
// request is not retried: a server that was this slow once is likely to be so again.
type TimeoutError struct {
	URL      string
	Timeout  time.Duration
	Attempts int
	Err      error
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("no answer from the model server at %s within %s (the per-request timeout). "+
		"The server may be overloaded or still loading the model: try again, or raise the timeout "+
		"(the --timeout flag, llm.Config.Timeout)", e.URL, e.Timeout)
}

func (e *TimeoutError) Unwrap() error { return e.Err }

// ResponseError reports an answer that cannot be used: a body that is not the chat completion
// JSON, no choices, or a choice with no text. It is never retried.
type ResponseError struct {
	URL    string
	Reason string // what is wrong, such as "the reply has no choices"
	Body   string // the start of the body, when it could not be decoded
	Hint   string // what to do next
	Err    error  // the decoding error, if any
}

func (e *ResponseError) Error() string {
	msg := fmt.Sprintf("the model server at %s sent an unusable answer: %s", e.URL, e.Reason)
	if e.Body != "" {
		msg += fmt.Sprintf(" (the body starts %q)", e.Body)
	}
	return msg + ". " + e.Hint
}

func (e *ResponseError) Unwrap() error { return e.Err }

// ReplyTooLargeError reports an answer whose body, after any decompression, is longer than
// Limit (Config.MaxReply). The client stopped reading at Limit, so the answer cost at most that
// much memory whatever its size. It is never retried: a server that sent this once will likely
// do it again.
type ReplyTooLargeError struct {
	URL   string
	Limit int64 // bytes
}

func (e *ReplyTooLargeError) Error() string {
	return fmt.Sprintf("the model's reply from %s is larger than %s (counted after decompression), "+
		"the most starplan reads of one answer; it stopped reading there and did not retry. "+
		"A plan is far shorter: check that %s points at an OpenAI-compatible chat API, or try again "+
		"or choose another model with %s or --model", e.URL, byteSize(e.Limit), EnvBaseURL, EnvModel)
}

// byteSize writes n bytes in the largest binary unit that divides it, such as "4 MiB".
func byteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// HTTPError reports any other failing HTTP status: a 4xx other than 401, 403, 404 and 429
// (not retried), or a 408 or 5xx that outlasted every retry.
type HTTPError struct {
	URL      string
	Status   int
	Attempts int
	Message  string
}

func (e *HTTPError) Error() string {
	if e.Status == http.StatusRequestTimeout || e.Status >= 500 {
		return fmt.Sprintf("the model server at %s failed (%s) on %s. "+
			"It may be overloaded or down: try again later, or use another endpoint (%s)",
			e.URL, statusText(e.Status, e.Message), attempts(e.Attempts), EnvBaseURL)
	}
	return fmt.Sprintf("the model server at %s refused the request (%s). "+
		"Check that %s names a chat model this server serves and that %s points at an "+
		"OpenAI-compatible API", e.URL, statusText(e.Status, e.Message), EnvModel, EnvBaseURL)
}

func statusText(status int, message string) string {
	s := fmt.Sprintf("%d %s", status, http.StatusText(status))
	if message = strings.TrimRight(strings.TrimSpace(message), "."); message != "" {
		s += ": " + message
	}
	return s
}

func attempts(n int) string {
	if n == 1 {
		return "1 attempt"
	}
	return fmt.Sprintf("%d attempts", n)
}
