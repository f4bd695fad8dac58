package cli

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/term"

	"github.com/starplan/starplan/store/opener"
)

// IOStreams are a command's standard streams and what is known about them. Commands never touch
// os.Stdin/Stdout directly, so tests can read everything a command prints.
type IOStreams struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
	// OutTTY is whether Out is a terminal: people get tables and colour, pipes get JSON-ready text.
	OutTTY bool
	// InTTY is whether In is a terminal, so a command may ask a question.
	InTTY bool
	// ErrTTY is whether Err is a terminal, so a command may show progress there.
	ErrTTY bool
	// Width is Out's width in columns when it is a terminal (or $COLUMNS says), else 0: the
	// views then use their default width.
	Width int
	// colorMode points at --color's value: "auto" (also when nil: colour on a terminal, unless
	// NO_COLOR is set or TERM is dumb), "always" or "never". A pointer, because the commands keep
	// copies of their streams made before the flags are parsed.
	colorMode *string
	// Getenv reads the environment (NO_COLOR, STARPLAN_DB, OPENAI_API_KEY, ...).
	Getenv func(string) string
	// Dir is the directory relative file names are read from; empty: the process's own. A
	// command a server runs for a client (see relay.go) reads files from the client's.
	Dir string

	// args are the command line being run (what a relay forwards).
	args []string
	// host is set when the command runs inside `starplan serve` for a client: it uses the
	// server's store and engine instead of opening the store.
	host *host
	// scratch is the domain directory a command's temporary store was made from (exec
	// --domain without --db): a pending run there cannot be applied later.
	scratch string
	// relayAnswer is how long a relayed command waits for the server's first answer
	// (relayAnswerTimeout when 0; tests lower it).
	relayAnswer time.Duration
	// opener opens the stores --db names; nil: opener.Builtin() (tests give their own backends).
	opener *opener.Opener
	// ctx is the context of the command line being run (MainContext's), which opening a store
	// waits under: Ctrl-C stops a connection to a database that does not answer. nil: none.
	ctx context.Context
}

// context is the command line's context, or context.Background().
func (s IOStreams) context() context.Context {
	if s.ctx != nil {
		return s.ctx
	}
	return context.Background()
}

// path is name as this command must open it: relative to Dir when Dir is set.
func (s IOStreams) path(name string) string {
	if s.Dir == "" || filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(s.Dir, name)
}

// System returns the process's own streams and environment.
func System() IOStreams {
	ios := IOStreams{
		In: os.Stdin, Out: os.Stdout, Err: os.Stderr,
		OutTTY: isTerminal(os.Stdout), InTTY: isTerminal(os.Stdin), ErrTTY: isTerminal(os.Stderr),
		Getenv: os.Getenv,
	}
	if ios.OutTTY {
		if w, _, err := term.GetSize(int(os.Stdout.Fd())); err == nil && w > 0 {
			ios.Width = w
		}
	}
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		ios.Width = n
	}
	return ios
}

// Color reports whether output to Out may use ANSI colour: always with --color always, never
// with --color never, and otherwise on a terminal unless NO_COLOR is set or TERM is dumb.
func (s IOStreams) Color() bool {
	mode := "auto"
	if s.colorMode != nil {
		mode = *s.colorMode
	}
	switch mode {
	case "always":
		return true
	case "never":
		return false
	}
	return s.OutTTY && s.Getenv("NO_COLOR") == "" && s.Getenv("TERM") != "dumb"
}

// dumbTerminal reports whether TERM says the terminal is dumb: it shows text, and cannot move
// its cursor or clear a line, so progress is printed as plain lines there.
func (s IOStreams) dumbTerminal() bool { return s.Getenv != nil && s.Getenv("TERM") == "dumb" }

// isTerminal reports whether f is a terminal. A character device is not enough: /dev/null is
// one, and `exec < /dev/null` must not ask a question nobody can answer.
func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }
