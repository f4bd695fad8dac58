// Package llmtest provides a scripted fake of an OpenAI-compatible chat completions server for
// tests, so that the real go-openai client inside llm.Client is exercised over real HTTP.
//
// A Server answers each POST /v1/chat/completions with the next Step of its script and records
// every request as it arrived on the wire:
//
//	srv := llmtest.NewServer(t,
//		llmtest.Status(429, "Retry-After: 1"),
//		llmtest.Reply("<execute_python>answer_text = 'ok'</execute_python>"),
//	)
//	c, err := llm.New(srv.Config())
//	...
//	assert.Equal(t, []time.Duration{time.Second}, srv.Waits())
//	assert.Equal(t, 0.0, *srv.Requests()[0].Temperature)
//
// The server listens on 127.0.0.1 only and is closed by t.Cleanup. A request that finds the
// script empty fails the test. The package must not import anything above llm.
package llmtest

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/starplan/starplan/llm"
)

// The API key and model name that Server.Config sets.
const (
	APIKey = "llmtest-key"
	Model  = "llmtest-model"
)

// Path is the one path the server answers; requests to any other path get a 404 without
// consuming a step, as a real server would answer a base URL that lacks /v1.
const Path = "/v1/chat/completions"

// Server is a scripted fake OpenAI-compatible server. Its methods are safe for concurrent use.
type Server struct {
	// URL is the API root, "http://127.0.0.1:PORT/v1": use it as OPENAI_BASE_URL or
	// llm.Config.BaseURL.
	URL string

	t         testing.TB
	ts        *httptest.Server
	quit      chan struct{}
	closeOnce sync.Once

	mu    sync.Mutex
	steps []Step
	reqs  []Request
	waits []time.Duration
}

// NewServer starts a server that answers requests with steps, in order, and closes it when the
// test ends.
func NewServer(t testing.TB, steps ...Step) *Server {
	t.Helper()
	s := &Server{t: t, quit: make(chan struct{}), steps: steps}
	s.ts = httptest.NewServer(http.HandlerFunc(s.handle))
	s.URL = s.ts.URL + "/v1"
	t.Cleanup(s.Close)
	return s
}

// Push appends steps to the script.
func (s *Server) Push(steps ...Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.steps = append(s.steps, steps...)
}

// Pending returns the number of steps not yet consumed (an Always step counts as one).
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.steps)
}

// Requests returns every request received so far, in order of arrival.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Waits returns the waits between attempts that a client configured with Config asked for,
// in order. They are recorded, not slept.
func (s *Server) Waits() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.waits...)
}

// Config returns an llm.Config for this server: URL, APIKey, Model, a 10 s timeout, default
// retries, and a Sleep that records each wait in Waits and returns at once (or with ctx.Err()
// when ctx is done), so retry tests run fast and can assert the waits.
func (s *Server) Config() llm.Config {
	return llm.Config{
		APIKey:  APIKey,
		BaseURL: s.URL,
		Model:   Model,
		Timeout: 10 * time.Second,
		Sleep: func(ctx context.Context, d time.Duration) error {
			s.mu.Lock()
			s.waits = append(s.waits, d)
			s.mu.Unlock()
			return ctx.Err()
		},
	}
}

// Close releases every Hang step and shuts the server down. It is called by t.Cleanup, and
// may be called earlier to make the endpoint unreachable.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.quit)
		s.ts.Close()
	})
}

// Request is one request as the server received it.
type Request struct {
	Method string
	Path   string
	Header http.Header
	APIKey string // from "Authorization: Bearer KEY"; empty if none was sent

	Model    string
	Messages []llm.Message
	// Temperature is the temperature as sent on the wire; nil when the body had none.
	Temperature *float64
	// Fields holds every top-level field of the JSON body, for assertions on any other field.
	Fields map[string]json.RawMessage
	Body   []byte // the raw body
}

// LastUser returns the content of the last message with role "user", or "".
func (r Request) LastUser() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == llm.RoleUser {
			return r.Messages[i].Content
		}
	}
	return ""
}

// A Step is the scripted answer to one request. Build steps with Reply, ReplyWith, Status,
// Respond, Raw, NoChoices, GzipBomb, Hang, Func and Always.
type Step struct {
	name  string
	keep  bool
	serve func(w http.ResponseWriter, r *http.Request, req Request, quit <-chan struct{})
}

// String names the step, for failure messages.
func (st Step) String() string { return st.name }

// Completion is a successful answer for ReplyWith. Zero fields get defaults: Model echoes the
// requested model, FinishReason is "stop", and a zero token count is replaced by a count of
// the words in the request's messages (prompt) or in Content (completion).
type Completion struct {
	Content          string
	Model            string
	FinishReason     string
	PromptTokens     int
	CompletionTokens int
}

// Reply answers 200 with one choice holding content, and usage counted in words (see
// Completion). Reply("") scripts a reply with empty content.
func Reply(content string) Step {
	st := ReplyWith(Completion{Content: content})
	st.name = fmt.Sprintf("Reply(%q)", abbreviate(content))
	return st
}

// ReplyWith answers 200 with one choice as described by c.
func ReplyWith(c Completion) Step {
	return Step{
		name: fmt.Sprintf("ReplyWith(%q)", abbreviate(c.Content)),
		serve: func(w http.ResponseWriter, _ *http.Request, req Request, _ <-chan struct{}) {
			writeJSON(w, http.StatusOK, completion(req, c, true))
		},
	}
}

// NoChoices answers 200 with a well-formed completion whose "choices" is empty.
func NoChoices() Step {
	return Step{
		name: "NoChoices()",
		serve: func(w http.ResponseWriter, _ *http.Request, req Request, _ <-chan struct{}) {
			writeJSON(w, http.StatusOK, completion(req, Completion{}, false))
		},
	}
}

// Status answers with the HTTP status code and an OpenAI-style error body whose message suits
// the code (404 says the requested model does not exist). Each header is "Name: value", such as
// "Retry-After: 1".
func Status(code int, headers ...string) Step {
	h := parseHeaders(headers)
	return Step{
		name: fmt.Sprintf("Status(%d%s)", code, quoteAll(headers)),
		serve: func(w http.ResponseWriter, _ *http.Request, req Request, _ <-chan struct{}) {
			copyHeaders(w, h)
			writeJSON(w, code, errorBody(code, req.Model))
		},
	}
}

// Respond answers with the status code, the body exactly as given and the headers ("Name:
// value"). The Content-Type is application/json unless a header sets it.
func Respond(code int, body string, headers ...string) Step {
	h := parseHeaders(headers)
	return Step{
		name: fmt.Sprintf("Respond(%d, %q%s)", code, abbreviate(body), quoteAll(headers)),
		serve: func(w http.ResponseWriter, _ *http.Request, _ Request, _ <-chan struct{}) {
			w.Header().Set("Content-Type", "application/json")
			copyHeaders(w, h)
			w.WriteHeader(code)
			_, _ = io.WriteString(w, body)
		},
	}
}

// Raw answers 200 with body as text/plain: a malformed reply when body is not JSON.
func Raw(body string) Step {
	st := Respond(http.StatusOK, body, "Content-Type: text/plain; charset=utf-8")
	st.name = fmt.Sprintf("Raw(%q)", abbreviate(body))
	return st
}

// GzipBomb answers 200 with a chat completion whose content is n bytes of "x", sent with
// Content-Encoding: gzip whatever the request's Accept-Encoding said. The body is a series of
// gzip members (a valid gzip stream) built from one compressed mebibyte, so it is about a
// thousandth of n on the wire (500 KB for 500 MB) and costs the server almost nothing to send.
// Writing stops when the client hangs up.
func GzipBomb(n int64) Step {
	return Step{
		name: fmt.Sprintf("GzipBomb(%d)", n),
		serve: func(w http.ResponseWriter, _ *http.Request, req Request, _ <-chan struct{}) {
			model, _ := json.Marshal(req.Model)
			head := `{"id":"chatcmpl-llmtest","object":"chat.completion","created":0,"model":` + string(model) +
				`,"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"`
			tail := `"}}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`
			const chunk = 1 << 20
			mib := gzipMember(strings.NewReader(strings.Repeat("x", chunk)))
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Encoding", "gzip")
			w.WriteHeader(http.StatusOK)
			parts := [][]byte{gzipMember(strings.NewReader(head))}
			for ; n >= chunk; n -= chunk {
				parts = append(parts, mib)
			}
			parts = append(parts, gzipMember(strings.NewReader(strings.Repeat("x", int(n)))),
				gzipMember(strings.NewReader(tail)))
			for _, p := range parts {
				if _, err := w.Write(p); err != nil {
					return // the client stopped reading
				}
			}
		},
	}
}

// gzipMember compresses what r holds into one gzip member.
func gzipMember(r io.Reader) []byte {
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	_, _ = io.Copy(zw, r)
	_ = zw.Close()
	return b.Bytes()
}

// Hang never answers: it holds the request until the client gives up (its timeout or
// cancellation) or the server closes.
func Hang() Step {
	return Step{
		name: "Hang()",
		serve: func(_ http.ResponseWriter, r *http.Request, _ Request, quit <-chan struct{}) {
			select {
			case <-r.Context().Done():
			case <-quit:
			}
		},
	}
}

// Func answers with the step that f chooses for the request, so a test can script by the
// content of the request (f runs on the server's goroutine).
func Func(f func(Request) Step) Step {
	return Step{
		name: "Func(...)",
		serve: func(w http.ResponseWriter, r *http.Request, req Request, quit <-chan struct{}) {
			f(req).serve(w, r, req, quit)
		},
	}
}

// Always makes st answer every remaining request: it is never consumed, so steps after it are
// never reached.
func Always(st Step) Step {
	st.keep = true
	st.name = "Always(" + st.name + ")"
	return st
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req := parseRequest(r, body)

	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	n := len(s.reqs)
	var st Step
	found := r.Method == http.MethodPost && r.URL.Path == Path && len(s.steps) > 0
	if found {
		st = s.steps[0]
		if !st.keep {
			s.steps = s.steps[1:]
		}
	}
	s.mu.Unlock()

	switch {
	case r.Method != http.MethodPost || r.URL.Path != Path:
		writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]any{
			"message": fmt.Sprintf("llmtest: no route for %s %s (the API root is %s)", r.Method, r.URL.Path, s.URL),
			"type":    "invalid_request_error",
		}})
	case !found:
		s.t.Errorf("llmtest: request %d (model %q, last user message %q) has no scripted response",
			n, req.Model, abbreviate(req.LastUser()))
		writeJSON(w, http.StatusBadRequest, errorBody(http.StatusBadRequest, req.Model))
	default:
		st.serve(w, r, req, s.quit)
	}
}

func parseRequest(r *http.Request, body []byte) Request {
	req := Request{
		Method: r.Method,
		Path:   r.URL.Path,
		Header: r.Header.Clone(),
		Body:   body,
	}
	if auth, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		req.APIKey = auth
	}
	var wire struct {
		Model       string   `json:"model"`
		Temperature *float64 `json:"temperature"`
		Messages    []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &wire) == nil {
		req.Model = wire.Model
		req.Temperature = wire.Temperature
		for _, m := range wire.Messages {
			req.Messages = append(req.Messages, llm.Message{Role: m.Role, Content: m.Content})
		}
	}
	_ = json.Unmarshal(body, &req.Fields)
	return req
}

func completion(req Request, c Completion, withChoice bool) map[string]any {
	model := c.Model
	if model == "" {
		model = req.Model
	}
	finish := c.FinishReason
	if finish == "" {
		finish = "stop"
	}
	prompt := c.PromptTokens
	if prompt == 0 {
		for _, m := range req.Messages {
			prompt += len(strings.Fields(m.Content))
		}
	}
	compl := c.CompletionTokens
	if compl == 0 {
		compl = len(strings.Fields(c.Content))
	}
	choices := []any{}
	if withChoice {
		choices = append(choices, map[string]any{
			"index":         0,
			"message":       map[string]any{"role": "assistant", "content": c.Content},
			"finish_reason": finish,
		})
	}
	return map[string]any{
		"id":      "chatcmpl-llmtest",
		"object":  "chat.completion",
		"created": 0,
		"model":   model,
		"choices": choices,
		"usage": map[string]any{
			"prompt_tokens":     prompt,
			"completion_tokens": compl,
			"total_tokens":      prompt + compl,
		},
	}
}

func errorBody(code int, model string) map[string]any {
	msg, typ, errCode := "llmtest: "+http.StatusText(code), "api_error", any(nil)
	switch code {
	case http.StatusUnauthorized:
		msg, typ, errCode = "Incorrect API key provided.", "invalid_request_error", "invalid_api_key"
	case http.StatusForbidden:
		msg, typ = fmt.Sprintf("You are not allowed to use model %s.", model), "invalid_request_error"
	case http.StatusNotFound:
		msg, typ, errCode = fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", model),
			"invalid_request_error", "model_not_found"
	case http.StatusTooManyRequests:
		msg, typ, errCode = "Rate limit reached. Please try again later.", "requests", "rate_limit_exceeded"
	}
	return map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": errCode}}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func parseHeaders(headers []string) http.Header {
	h := http.Header{}
	for _, line := range headers {
		name, value, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(name) == "" {
			panic(fmt.Sprintf("llmtest: header %q is not \"Name: value\"", line))
		}
		h.Add(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	return h
}

func copyHeaders(w http.ResponseWriter, h http.Header) {
	for name, values := range h {
		w.Header()[name] = values
	}
}

func quoteAll(ss []string) string {
	var b strings.Builder
	for _, s := range ss {
		fmt.Fprintf(&b, ", %q", s)
	}
	return b.String()
}

func abbreviate(s string) string {
	const limit = 40
	if r := []rune(s); len(r) > limit {
		return string(r[:limit]) + "…"
	}
	return s
}
