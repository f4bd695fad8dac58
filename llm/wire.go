package llm

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
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
	// tooLarge is set when the body, decompressed, went past the client's MaxReply.
	tooLarge bool
}

type exchangeKey struct{}

// doer is the go-openai HTTPDoer. It writes the temperature into the request body, because
// go-openai's ChatCompletionRequest drops a zero temperature (omitempty); it bounds each
// answer's body, decompressed, to maxReply bytes; and it records each answer in the exchange
// carried by the request's context.
type doer struct {
	hc          *http.Client
	temperature *float32 // nil: send none
	maxReply    int64    // bytes
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
	ex, ok := req.Context().Value(exchangeKey{}).(*exchange)
	if !ok {
		ex = &exchange{} // a request made outside Client.attempt: bounded all the same
	}
	ex.status = resp.StatusCode
	ex.header = resp.Header
	resp.Body = &prefixReader{ReadCloser: bounded(resp, d.maxReply, ex), ex: ex}
	return resp, nil
}

// errReplyTooLarge ends the read of a body that went past the bound; Client.classify turns it
// into a *ReplyTooLargeError with the endpoint and the bound.
var errReplyTooLarge = errors.New("llm: the answer's body is longer than the client's MaxReply")

// bounded returns resp's body, decompressed, failing with errReplyTooLarge (and marking ex) as
// soon as more than limit bytes come out of it. http.Transport decompresses gzip by itself when
// it asked for it; a gzip body it did not ask for (a transport with DisableCompression, or a
// server that compresses unasked) is decompressed here, so the bound always counts what the
// JSON decoder would see, never the few bytes on the wire.
func bounded(resp *http.Response, limit int64, ex *exchange) io.ReadCloser {
	b := &boundedBody{r: resp.Body, Closer: resp.Body, left: limit, ex: ex}
	if !resp.Uncompressed && strings.EqualFold(strings.TrimSpace(resp.Header.Get("Content-Encoding")), "gzip") {
		b.r = &gunzip{src: resp.Body}
		resp.Header.Del("Content-Encoding")
		resp.Header.Del("Content-Length")
		resp.ContentLength = -1
		resp.Uncompressed = true
	}
	return b
}

// boundedBody passes at most left bytes through; reading more fails with errReplyTooLarge. It
// never asks r for more than one byte past the bound, so what it reads is bounded too.
type boundedBody struct {
	r io.Reader
	io.Closer
	left int64
	ex   *exchange
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.ex.tooLarge {
		return 0, errReplyTooLarge
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.r.Read(p)
	if int64(n) > b.left {
		n, b.left, b.ex.tooLarge = int(b.left), 0, true
		return n, errReplyTooLarge
	}
	b.left -= int64(n)
	return n, err
}

// gunzip decompresses src, reading the gzip header at the first Read rather than when the
// answer arrives.
type gunzip struct {
	src io.Reader
	zr  *gzip.Reader
	err error
}

func (g *gunzip) Read(p []byte) (int, error) {
	if g.zr == nil && g.err == nil {
		g.zr, g.err = gzip.NewReader(g.src)
	}
	if g.err != nil {
		return 0, g.err
	}
	return g.zr.Read(p)
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
