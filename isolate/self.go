package isolate

import (
	"fmt"
	"os"
)

// WorkerArg is the first argument a program is started with when NewSelfPool starts it as a
// worker. The starplan command's hidden worker subcommand has this name too.
const WorkerArg = "sandbox-worker"

// ServeWorkerIfAsked makes the running program a sandbox worker when NewSelfPool started it as
// one: it serves the pool on standard input and output and exits. Otherwise it returns at once.
// A program that uses NewSelfPool calls it first thing in main, before it parses flags or opens
// anything:
//
//	func main() {
//		isolate.ServeWorkerIfAsked()
//		pool, err := isolate.NewSelfPool(isolate.Options{})
//		...
//	}
func ServeWorkerIfAsked() {
	if len(os.Args) > 1 && os.Args[1] == WorkerArg {
		os.Exit(WorkerMain(os.Stdin, os.Stdout))
	}
}

// NewSelfPool starts a pool whose workers are this very program, re-executed with WorkerArg, so
// an embedder needs no second binary: only a call of ServeWorkerIfAsked at the top of main.
// opts.Command must be empty; the other options are NewPool's.
func NewSelfPool(opts Options) (*Pool, error) {
	if len(opts.Command) > 0 {
		return nil, fmt.Errorf("isolate: NewSelfPool starts this program as its workers; use NewPool for Command %q", opts.Command)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("isolate: finding this program to start as a worker: %w", err)
	}
	opts.Command = []string{exe, WorkerArg}
	return NewPool(opts)
}
