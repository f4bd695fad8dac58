package hangdog

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A worker stuck in an operation past the limit is named, with every goroutine's stack; one
// that ends its operations in time is not.
func TestTheDogNamesTheStuckWorker(t *testing.T) {
	d := New(t, 50*time.Millisecond)
	got := make(chan string, 1)
	var stacks []byte
	d.mu.Lock()
	d.exit = func(stuck string, s []byte) { stacks = s; got <- stuck }
	d.mu.Unlock()
	for range 3 {
		d.Busy("quick", "ends in time")()
	}
	done := d.Busy("slow", "waits forever")
	defer done()
	select {
	case stuck := <-got:
		assert.True(t, strings.HasPrefix(stuck, "slow in waits forever for "), stuck)
		assert.NotContains(t, stuck, "quick")
		assert.Contains(t, string(stacks), "goroutine ")
	case <-time.After(time.Minute):
		t.Fatal("the dog never barked")
	}
	require.Equal(t, int64(3), d.Ops())
}
