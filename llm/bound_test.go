package llm_test

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/llm"
	"github.com/starplan/starplan/llm/llmtest"
)

// countingTransport counts the bytes of answer bodies that the client reads from base: after
// base's own decompression when base asked for gzip, the bytes on the wire when it did not.
type countingTransport struct {
	base http.RoundTripper
	n    atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(r)
	if err == nil {
		resp.Body = &countingBody{ReadCloser: resp.Body, n: &c.n}
	}
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// TestGzipBombIsReadOnlyToTheBound is the reply of issue 10: 500 KB of gzip that expands to
// 500 MiB. The client must stop at DefaultMaxReply decompressed bytes, say so, and not retry,
// whether the transport asked for gzip (and decompressed it) or the server sent it unasked.
func TestGzipBombIsReadOnlyToTheBound(t *testing.T) {
	const bomb = 500 << 20
	for _, tc := range []struct {
		name string
		base *http.Transport
		// maxRead bounds the bytes counted between the transport and the client: decompressed
		// ones when the transport decompresses, compressed ones when the client does.
		maxRead int64
	}{
		{"asked", &http.Transport{}, llm.DefaultMaxReply + 1},
		{"unasked", &http.Transport{DisableCompression: true}, 64 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.NewServer(t, llmtest.GzipBomb(bomb)) // one step: a retry would fail the test
			ct := &countingTransport{base: tc.base}
			t.Cleanup(tc.base.CloseIdleConnections)
			c := newClient(t, srv, func(cfg *llm.Config) { cfg.HTTPClient = &http.Client{Transport: ct} })

			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			rep, err := c.Complete(t.Context(), question)
			runtime.ReadMemStats(&after)
			allocated := after.TotalAlloc - before.TotalAlloc
			t.Logf("read %d bytes from the transport, allocated %d KiB in all", ct.n.Load(), allocated>>10)

			var tl *llm.ReplyTooLargeError
			require.ErrorAs(t, err, &tl)
			assert.Equal(t, int64(llm.DefaultMaxReply), tl.Limit)
			assert.Contains(t, err.Error(), "larger than 4 MiB")
			assert.Contains(t, err.Error(), srv.URL)
			assert.Equal(t, 1, rep.Attempts)
			assert.Len(t, srv.Requests(), 1)
			assert.Empty(t, srv.Waits())
			assert.LessOrEqual(t, ct.n.Load(), tc.maxRead)
			// Decoding the whole bomb allocates over a gibibyte; the bound keeps it to a few
			// buffers of DefaultMaxReply (the server's side of the test included).
			assert.Less(t, allocated, uint64(16*llm.DefaultMaxReply))
		})
	}
}

func TestMaxReplyIsConfigurable(t *testing.T) {
	body := `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,` +
		`"message":{"role":"assistant","content":"` + strings.Repeat("a", 3000) + `"},"finish_reason":"stop"}]}`
	for _, tc := range []struct {
		max  int64
		want string // the error's bound, "" for none
	}{
		{int64(len(body)), ""},
		{int64(len(body)) - 1, fmt.Sprintf("larger than %d bytes", len(body)-1)},
		{2 << 10, "larger than 2 KiB"},
	} {
		srv := llmtest.NewServer(t, llmtest.Respond(http.StatusOK, body))
		rep, err := newClient(t, srv, func(cfg *llm.Config) { cfg.MaxReply = tc.max }).Complete(t.Context(), question)
		if tc.want == "" {
			require.NoError(t, err, "a reply of exactly MaxReply bytes is read")
			assert.Len(t, rep.Content, 3000)
			continue
		}
		var tl *llm.ReplyTooLargeError
		require.ErrorAs(t, err, &tl, "max %d", tc.max)
		assert.Equal(t, tc.max, tl.Limit)
		assert.Contains(t, err.Error(), tc.want)
	}
}

// TestLargeErrorBodyIsBoundedAndNotRetried: a 5xx is retried, but not one whose body is past
// the bound, so a misbehaving server cannot make the client read it again and again.
func TestLargeErrorBodyIsBoundedAndNotRetried(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Respond(http.StatusBadGateway, strings.Repeat("<p>bad gateway</p>", 1000), "Content-Type: text/html"))
	rep, err := newClient(t, srv, func(cfg *llm.Config) { cfg.MaxReply = 1 << 10 }).Complete(t.Context(), question)
	var tl *llm.ReplyTooLargeError
	require.ErrorAs(t, err, &tl)
	assert.Equal(t, 1, rep.Attempts)
	assert.Empty(t, srv.Waits())
}
