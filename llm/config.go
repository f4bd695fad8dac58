// Package llm owns the model client: one chat completion against any OpenAI-compatible endpoint
// (OpenAI, Ollama, vLLM, llama.cpp server, LM Studio) through github.com/sashabaranov/go-openai,
// with a per-request timeout, retries with backoff on 429, 5xx and transport errors, the
// temperature sent even when it is 0, every answer's body read to at most Config.MaxReply
// bytes after decompression, and the usage and latency of every call reported.
//
// Failures are typed (*ConfigError, *UnreachableError, *AuthError, *ModelNotFoundError,
// *RateLimitError, *TimeoutError, *ResponseError, *ReplyTooLargeError, *HTTPError) so callers
// can tell them apart with errors.As, and each message says what to set or do next.
//
// The package knows nothing about plans: it must not import sandbox or store (or any later stage
// such as engine). Its test double, a scripted fake server, lives in llm/llmtest.
package llm

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// Environment variables read by ConfigFromEnv.
const (
	EnvAPIKey  = "OPENAI_API_KEY"  // the API key; local servers accept any or none
	EnvBaseURL = "OPENAI_BASE_URL" // the API root, usually ending in /v1
	EnvModel   = "STARPLAN_MODEL"  // the model name
)

// Defaults applied by ConfigFromEnv and by New for zero fields.
const (
	// DefaultBaseURL is OpenAI's API root. Only this endpoint requires an API key.
	DefaultBaseURL = "https://api.openai.com/v1"

	// DefaultModel is a current, inexpensive non-reasoning model: it honours temperature 0, so
	// the same request gives the same plan as often as the server allows. Any name the server
	// knows is accepted, including reasoning models (see ReasoningModel).
	DefaultModel = "gpt-4.1-mini"

	// DefaultTimeout bounds one HTTP request (one attempt), from sending it to reading the whole
	// reply. A retry gets a fresh timeout.
	DefaultTimeout = 60 * time.Second

	// DefaultMaxRetries is how many times a request is repeated after a 408, 429 or 5xx answer
	// or a transport error, so a call makes at most DefaultMaxRetries+1 attempts.
	DefaultMaxRetries = 3

	// DefaultBaseBackoff is the wait before the first retry when the server sends no
	// Retry-After; each later retry doubles it, up to DefaultMaxBackoff. A random jitter takes
	// up to half of each wait off, so concurrent clients do not retry in step.
	DefaultBaseBackoff = 500 * time.Millisecond

	// DefaultMaxBackoff caps the computed backoff between two attempts.
	DefaultMaxBackoff = 8 * time.Second

	// MaxRetryAfter is the longest Retry-After (or retry-after-ms) the client waits for. A server
	// that asks for longer (a daily quota, say) gets no retry: the call fails at once with a
	// *RateLimitError or *HTTPError that reports the requested wait.
	MaxRetryAfter = 30 * time.Second

	// DefaultMaxReply is the most bytes of one answer's body the client reads, counted after
	// any decompression: 4 MiB, some forty times the longest plan a model is asked for (a plan
	// is at most sandbox.DefaultMaxProgram, 64 KiB) with room for JSON escaping and prose. The
	// client stops reading there, so a small compressed body that expands without end (a gzip
	// bomb) costs at most this much. The CLI holds a reply or plan file to the same bound.
	DefaultMaxReply = 4 << 20
)

// Config configures a Client. The zero value of every field except APIKey is a usable default;
// ConfigFromEnv fills the fields from the environment, and flags may override them afterwards.
type Config struct {
	// APIKey is sent as "Authorization: Bearer KEY". Required for DefaultBaseURL; may be empty
	// for other endpoints (Ollama, vLLM, llama.cpp and LM Studio accept any key or none).
	APIKey string

	// BaseURL is the API root, such as "http://localhost:11434/v1"; "/chat/completions" is
	// appended. Empty means DefaultBaseURL.
	BaseURL string

	// Model is the model name sent with every request. Empty means DefaultModel.
	Model string

	// Temperature is sent on every request, also when it is 0 (the default), except to
	// reasoning models, which accept only their fixed temperature (see ReasoningModel).
	Temperature float32

	// Timeout bounds each attempt. Zero or negative means DefaultTimeout.
	Timeout time.Duration

	// MaxRetries is the number of retries after the first attempt. Zero means DefaultMaxRetries;
	// a negative value disables retries.
	MaxRetries int

	// MaxReply is the most bytes of one answer's body read, after decompression; a longer one
	// fails with a *ReplyTooLargeError. Zero or negative means DefaultMaxReply.
	MaxReply int64

	// HTTPClient sends the requests. Nil means a fresh http.Client. Its own Timeout, if any,
	// applies in addition to Timeout.
	HTTPClient *http.Client

	// Sleep waits d between attempts and must return early with ctx.Err() when ctx is done.
	// Nil means a real timer. Tests set it to record the waits and return at once.
	Sleep func(ctx context.Context, d time.Duration) error
}

// ConfigFromEnv returns a Config with every default filled in and the key, endpoint and model
// taken from OPENAI_API_KEY, OPENAI_BASE_URL and STARPLAN_MODEL where those are set and not
// blank. getenv is usually os.Getenv (nil means os.Getenv); tests pass a map lookup. Values are
// trimmed of spaces.
// Command-line flags take precedence over the environment by overwriting fields afterwards.
func ConfigFromEnv(getenv func(string) string) Config {
	if getenv == nil {
		getenv = os.Getenv
	}
	cfg := Config{
		BaseURL:    DefaultBaseURL,
		Model:      DefaultModel,
		Timeout:    DefaultTimeout,
		MaxRetries: DefaultMaxRetries,
		MaxReply:   DefaultMaxReply,
	}
	if v := strings.TrimSpace(getenv(EnvAPIKey)); v != "" {
		cfg.APIKey = v
	}
	if v := strings.TrimSpace(getenv(EnvBaseURL)); v != "" {
		cfg.BaseURL = v
	}
	if v := strings.TrimSpace(getenv(EnvModel)); v != "" {
		cfg.Model = v
	}
	return cfg
}

// withDefaults returns cfg with every zero field replaced by its default and BaseURL without a
// trailing slash, then checks it.
func (cfg Config) withDefaults() (Config, error) {
	cfg.BaseURL = strings.TrimRight(strings.TrimSpace(cfg.BaseURL), "/")
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	cfg.Model = strings.TrimSpace(cfg.Model)
	if cfg.Model == "" {
		cfg.Model = DefaultModel
	}
	cfg.APIKey = strings.TrimSpace(cfg.APIKey)
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	switch {
	case cfg.MaxRetries == 0:
		cfg.MaxRetries = DefaultMaxRetries
	case cfg.MaxRetries < 0:
		cfg.MaxRetries = 0
	}
	if cfg.MaxReply <= 0 {
		cfg.MaxReply = DefaultMaxReply
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{}
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sleep
	}

	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return cfg, &ConfigError{
			Field: EnvBaseURL,
			Message: fmt.Sprintf("the model endpoint %q is not an http:// or https:// URL: "+
				"set %s to the API root of an OpenAI-compatible server, such as %s or "+
				"http://localhost:11434/v1 for a local Ollama", cfg.BaseURL, EnvBaseURL, DefaultBaseURL),
		}
	}
	if cfg.APIKey == "" && strings.EqualFold(u.Hostname(), "api.openai.com") {
		return cfg, &ConfigError{
			Field: EnvAPIKey,
			Message: fmt.Sprintf("no API key for %s: set %s to an OpenAI API key "+
				"(create one at https://platform.openai.com/api-keys), or set %s to another "+
				"OpenAI-compatible server that needs no key, such as a local Ollama at "+
				"http://localhost:11434/v1; choose the model with %s (now %q)",
				cfg.BaseURL, EnvAPIKey, EnvBaseURL, EnvModel, cfg.Model),
		}
	}
	return cfg, nil
}

// ReasoningModel reports whether the model is a reasoning model (the o1, o3 and o4 series, and
// gpt-5 and later except their "-chat" variants), judged by the part of the name after the last
// "/" so that router names like "openai/o3-mini" count too. Such models accept only their fixed
// temperature, so the client does not send one to them.
func ReasoningModel(model string) bool {
	name := strings.ToLower(model)
	if i := strings.LastIndex(name, "/"); i >= 0 {
		name = name[i+1:]
	}
	for _, p := range []string{"o1", "o3", "o4"} {
		if name == p || strings.HasPrefix(name, p+"-") {
			return true
		}
	}
	if strings.HasPrefix(name, "gpt-") && !strings.Contains(name, "-chat") {
		rest := name[len("gpt-"):]
		major := 0
		for _, c := range rest {
			if c < '0' || c > '9' {
				break
			}
			major = major*10 + int(c-'0')
		}
		return major >= 5
	}
	return false
}
