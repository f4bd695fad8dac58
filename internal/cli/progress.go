package cli

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// ticker shows one line of progress on a terminal's stderr, redrawn in place every interval
// until stop, which clears it. line says what the display shows at an elapsed time. On a dumb
// terminal (TERM=dumb), which cannot move its cursor, it prints plain lines instead: the line
// once at the start and, on Finish, once at the end.
type ticker struct {
	w    io.Writer
	stop chan bool // true: keep the last line
	wg   sync.WaitGroup
}

const tickInterval = 250 * time.Millisecond

// startTicker starts drawing line(elapsed) on w, a terminal; a dumb one (plainTerminal) gets
// plain lines.
func startTicker(w io.Writer, dumb bool, line func(elapsed time.Duration) string) *ticker {
	t := &ticker{w: w, stop: make(chan bool, 1)}
	start := time.Now()
	if dumb {
		fmt.Fprintln(w, line(0))
		t.wg.Go(func() {
			if <-t.stop {
				fmt.Fprintln(w, line(time.Since(start).Round(100*time.Millisecond)))
			}
		})
		return t
	}
	draw := func() { fmt.Fprintf(w, "\r%s\x1b[K", line(time.Since(start).Round(100*time.Millisecond))) }
	draw()
	t.wg.Go(func() {
		tk := time.NewTicker(tickInterval)
		defer tk.Stop()
		for {
			select {
			case keep := <-t.stop:
				if keep {
					draw()
					fmt.Fprintln(w)
				} else {
					fmt.Fprint(w, "\r\x1b[K")
				}
				return
			case <-tk.C:
				draw()
			}
		}
	})
	return t
}

// Stop clears the line; the cursor is back at its start.
func (t *ticker) Stop() {
	t.stop <- false
	t.wg.Wait()
}

// Finish draws the line a last time and keeps it.
func (t *ticker) Finish() {
	t.stop <- true
	t.wg.Wait()
}

// askWaiting shows, on a terminal's stderr, what ask is waiting for: the model, the attempt and
// the time so far. It is nil (no display) when stderr is not a terminal.
func askWaiting(ios IOStreams, model string) func(attempt, most int) func() {
	if !ios.ErrTTY {
		return nil
	}
	return func(attempt, most int) func() {
		what := "asking " + safe(model) + " for a plan"
		if attempt > 1 {
			what = "asking " + safe(model) + " to repair its plan"
		}
		t := startTicker(ios.Err, ios.dumbTerminal(), func(elapsed time.Duration) string {
			if ios.dumbTerminal() {
				return fmt.Sprintf("%s (attempt %d of at most %d)", what, attempt, most)
			}
			return fmt.Sprintf("%s (attempt %d of at most %d), %s", what, attempt, most, elapsed)
		})
		return t.Stop
	}
}

// evalBar draws eval's progress: a bar, cases done, passes so far, elapsed and an estimate of
// the time left from the mean time per case.
func evalBar(done, total, passed int, elapsed time.Duration) string {
	const width = 24
	filled := width * done / max(total, 1)
	eta := "—"
	if done > 0 && done < total {
		eta = (elapsed / time.Duration(done) * time.Duration(total-done)).Round(time.Second).String()
	} else if done == total {
		eta = "0s"
	}
	return fmt.Sprintf("[%s%s] %d/%d done, %d passed, %s elapsed, about %s left",
		strings.Repeat("#", filled), strings.Repeat(".", width-filled), done, total, passed, elapsed.Round(time.Second), eta)
}
