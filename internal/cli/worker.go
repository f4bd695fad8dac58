package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/starplan/starplan/isolate"
	"github.com/starplan/starplan/sandbox"
)

// workerCommand is the hidden subcommand a worker process is started with: the argument
// isolate.NewSelfPool starts this binary with.
const workerCommand = isolate.WorkerArg

// newWorkerCmd is the hidden command a sandbox worker runs: it speaks the isolate protocol on
// standard input and output and does nothing else.
func newWorkerCmd(ios IOStreams) *cobra.Command {
	return &cobra.Command{
		Use:    workerCommand,
		Short:  "Run as a sandbox worker (started by starplan itself)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return silentExit(isolate.WorkerMain(ios.In, ios.Out))
		},
	}
}

// runner returns the runner plans execute in: a pool of isolated workers (re-executing this
// binary), or nil for in-process execution when --in-process is set. Start-up warnings (limits
// the kernel would not apply) are printed once. The caller closes the pool.
func runner(ios IOStreams, g *globalOptions) (*isolate.Pool, sandbox.Runner, error) {
	if g.InProcess {
		return nil, nil, nil
	}
	pool, err := isolate.NewSelfPool(isolate.Options{})
	if err != nil {
		return nil, nil, withCode(ExitInternal, fmt.Errorf("starting a sandbox worker: %w", err), "pass --in-process to run plans in this process")
	}
	for _, w := range pool.Warnings() {
		fmt.Fprintf(ios.Err, "warning: %s\n", safe(w))
	}
	g.pool = pool
	return pool, pool, nil
}
