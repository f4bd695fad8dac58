package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// bodyPrefixSize is how much of an answer's body is kept for error messages.
const bodyPrefixSize = 200

// exchange records what came back for one attempt. go-openai turns answers into values and
// errors but drops the status of a body it cannot decode and the Retry-After header, which the
// retry policy and the error messages need.
type exchange struct {
	status int         // 0 if no answer came back
	header http.Header // the answer's headers
	body   []byte      // the first bytes of the answer's body, as go-openai read them
}

type exchangeKey struct{}

// doer is the go-openai HTTPDoer. It writes the temperature into the request body, because
// go-openai's ChatCompletionRequest drops a zero temperature (omitempty), and it records each
// answer in the exchange carried by the request's context.
type doer struct {
	hc          *http.Client
	temperature *float32 // nil: send none
}

func (d *doer) Do(req *http.Request) (*http.Response, error) {
	if d.temperature != nil && req.Body != nil {
		body, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body, err = setField(body, "temperature", *d.temperature)
		if err != nil {
			return nil, err
		}
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	resp, err := d.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if ex, ok := req.Context().Value(exchangeKey{}).(*exchange); ok {
		ex.status = resp.StatusCode
		ex.header = resp.Header
		resp.Body = &prefixReader{ReadCloser: resp.Body, ex: ex}
	}
	return resp, nil
}

// setField sets one top-level field of a JSON object.
func setField(object []byte, name string, value any) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(object, &fields); err != nil {
		return nil, fmt.Errorf("llm: setting %s in the request body: %w", name, err)
	}
	raw, err := json.Marshal(value)
	if err != nil {
		return nil, fmt.Errorf("llm: setting %s in the request body: %w", name, err)
	}
	fields[name] = raw
	return json.Marshal(fields)
}

// prefixReader keeps the first bodyPrefixSize bytes read through it.
type prefixReader struct {
	io.ReadCloser
	ex *exchange
}

func (r *prefixReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if room := bodyPrefixSize - len(r.ex.body); room > 0 {
		r.ex.body = append(r.ex.body, p[:min(n, room)]...)
	}
	return n, err
}

// retryAfter returns the wait an answer asks for: retry-after-ms (sent by OpenAI) or
// Retry-After in seconds or as an HTTP date, relative to now. ok is false when there is none or
// it cannot be parsed.
func retryAfter(h http.Header, now time.Time) (d time.Duration, ok bool) {
	const ceiling = 24 * time.Hour // keeps absurd values from overflowing
	seconds := func(s float64) time.Duration {
		if s >= ceiling.Seconds() {
			return ceiling
		}
		return time.Duration(s * float64(time.Second))
	}
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return seconds(ms / 1000), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return seconds(s), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(t.Sub(now), 0), ceiling), true
	}
	return 0, false
}

// backoff returns the wait before retry number n (1 for the first retry): DefaultBaseBackoff
// doubled n-1 times, capped at DefaultMaxBackoff, less a random jitter of up to half.
func backoff(n int) time.Duration {
	d := DefaultMaxBackoff
	if n <= 30 {
		d = min(DefaultBaseBackoff<<(n-1), DefaultMaxBackoff)
	}
	half := d / 2
	return half + rand.N(half+1)
}

// sleep waits for d and returns nil, or returns ctx.Err() as soon as ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
