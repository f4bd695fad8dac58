package llm

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		header map[string]string
		want   time.Duration
		ok     bool
	}{
		{nil, 0, false},
		{map[string]string{"Retry-After": "3"}, 3 * time.Second, true},
		{map[string]string{"Retry-After": "0"}, 0, true},
		{map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond, true},
		{map[string]string{"Retry-After": now.Add(7 * time.Second).Format(http.TimeFormat)}, 7 * time.Second, true},
		{map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, 0, true},
		{map[string]string{"Retry-After": "soon"}, 0, false},
		{map[string]string{"Retry-After": "-4"}, 0, false},
		{map[string]string{"Retry-After": "1e30"}, 24 * time.Hour, true},
		{map[string]string{"Retry-After-Ms": "250", "Retry-After": "9"}, 250 * time.Millisecond, true},
		{map[string]string{"Retry-After-Ms": "x", "Retry-After": "9"}, 9 * time.Second, true},
	} {
		h := http.Header{}
		for k, v := range tc.header {
			h.Set(k, v)
		}
		got, ok := retryAfter(h, now)
		assert.Equal(t, tc.ok, ok, "%v", tc.header)
		assert.Equal(t, tc.want, got, "%v", tc.header)
	}
}

func TestBackoffDoublesWithJitterAndIsCapped(t *testing.T) {
	for n, upper := range map[int]time.Duration{
		1: DefaultBaseBackoff, 2: 2 * DefaultBaseBackoff, 3: 4 * DefaultBaseBackoff,
		10: DefaultMaxBackoff, 100: DefaultMaxBackoff,
	} {
		seen := map[time.Duration]bool{}
		for range 50 {
			d := backoff(n)
			assert.GreaterOrEqual(t, d, upper/2, "retry %d", n)
			assert.LessOrEqual(t, d, upper, "retry %d", n)
			seen[d] = true
		}
		assert.Greater(t, len(seen), 1, "retry %d: the wait is jittered", n)
	}
}

func TestSleepStopsWhenContextIsDone(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	// Without the context this would wait an hour and the test binary would time out.
	assert.ErrorIs(t, sleep(ctx, time.Hour), context.DeadlineExceeded)

	assert.NoError(t, sleep(t.Context(), time.Millisecond))
	assert.NoError(t, sleep(t.Context(), 0))
}

func TestSetFieldKeepsOtherFields(t *testing.T) {
	out, err := setField([]byte(`{"model":"m","messages":[],"stream":false}`), "temperature", float32(0))
	assert.NoError(t, err)
	assert.JSONEq(t, `{"model":"m","messages":[],"stream":false,"temperature":0}`, string(out))

	_, err = setField([]byte(`not json`), "temperature", float32(0))
	assert.Error(t, err)
}
