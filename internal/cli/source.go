package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/starplan/starplan/builtins"
	"github.com/starplan/starplan/llm"
	"github.com/starplan/starplan/sandbox"
)

// maxSource is the most bytes exec, check and run read of a plan or a model reply: the bound
// the model client holds a reply to (llm.DefaultMaxReply), since the file stands in for one.
const maxSource = llm.DefaultMaxReply

// readPlan reads a plan or a model reply from the file name, or from In when name is "-", and
// stops one byte past maxSource: `exec /dev/zero` fails at once instead of reading forever. A
// file that cannot be read, or is too large, is an ExitUsage error naming it and the bound.
//
// The read gives way to ctx: opening a FIFO nobody writes to, or a slow device, blocks in the
// kernel, and Ctrl-C must still end the command at once.
func readPlan(ctx context.Context, ios IOStreams, name string) (string, error) {
	type read struct {
		src string
		err error
	}
	done := make(chan read, 1)
	go func() {
		src, err := readPlanNow(ios, name)
		done <- read{src, err}
	}()
	select {
	case r := <-done:
		return r.src, r.err
	case <-ctx.Done():
		return "", ctx.Err() // the goroutine stays blocked until the process exits
	}
}

func readPlanNow(ios IOStreams, name string) (string, error) {
	what, r := "standard input", ios.In
	if name != "-" {
		f, err := ios.openInput(name)
		if err != nil {
			if u := errors.Unwrap(err); u != nil {
				err = u
			}
			return "", withCode(ExitUsage, fmt.Errorf("cannot read %s: %w", name, err), "give the path of a plan file, or - to read standard input")
		}
		defer f.Close()
		what, r = name, f
	}
	b, err := readAtMost(r, maxSource)
	var tl *tooLargeError
	switch {
	case errors.As(err, &tl):
		return "", withCode(ExitUsage, fmt.Errorf("%s is larger than %s, the most starplan reads of a plan or a model reply", what, builtins.FormatBytes(tl.limit)),
			fmt.Sprintf("give the file that holds one plan (at most %s) or one model reply", builtins.FormatBytes(sandbox.DefaultMaxProgram)))
	case err != nil && name == "-":
		return "", withCode(ExitInternal, fmt.Errorf("reading standard input: %w", err), "")
	case err != nil:
		return "", withCode(ExitUsage, fmt.Errorf("cannot read %s: %w", what, err), "give the path of a plan file, or - to read standard input")
	}
	return string(b), nil
}

// tooLargeError reports input that went past the limit of readAtMost.
type tooLargeError struct{ limit int64 }

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("the input is larger than %s", builtins.FormatBytes(e.limit))
}

// readAtMost reads r to its end, or fails with a *tooLargeError as soon as it has read more than
// limit bytes; it never reads more than limit+1.
func readAtMost(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, &tooLargeError{limit: limit}
	}
	return b, nil
}
