package cli

import (
	"io"
	"os"
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
	// Getenv reads the environment (NO_COLOR, STARPLAN_DB, OPENAI_API_KEY, ...).
	Getenv func(string) string
}

// System returns the process's own streams and environment.
func System() IOStreams {
	return IOStreams{
		In: os.Stdin, Out: os.Stdout, Err: os.Stderr,
		OutTTY: isTerminal(os.Stdout), InTTY: isTerminal(os.Stdin),
		Getenv: os.Getenv,
	}
}

// Color reports whether output to Out may use ANSI colour: on a terminal, unless NO_COLOR is set.
func (s IOStreams) Color() bool {
	return s.OutTTY && s.Getenv("NO_COLOR") == ""
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
