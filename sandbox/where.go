package sandbox

import (
	"fmt"

	"go.starlark.net/starlark"
)

// DomainError is an error raised inside a domain's own Starlark (helpers.star, invariants.star),
// at File:Line:Col, the innermost position in such a file: its text names it, as a compiler
// does ("helpers.star:12:5: ..."), so the domain's author knows where to look. It unwraps to the
// interpreter's error.
type DomainError struct {
	File      string
	Line, Col int
	Err       error
	msg       string
}

func (e *DomainError) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.msg)
}

func (e *DomainError) Unwrap() error { return e.Err }

// inDomainFile returns the innermost frame of ee that is in a domain's file: not the plan, not
// a builtin. ok is false when the error was raised in the plan itself (or outside any file).
func inDomainFile(ee *starlark.EvalError) (fr starlark.CallFrame, ok bool) {
	st := ee.CallStack
	if len(st) == 0 {
		return fr, false
	}
	// The innermost frame that has a file: a builtin's own frame ("<builtin>") is skipped.
	for i := len(st) - 1; i >= 0; i-- {
		switch name := st[i].Pos.Filename(); name {
		case "", "<builtin>":
			continue
		case planFile:
			return fr, false
		default:
			return st[i], true
		}
	}
	return fr, false
}

// locate returns err as a *DomainError when its innermost position is in a domain's file, else
// err.
func locate(err error) error {
	ee, ok := err.(*starlark.EvalError)
	if !ok {
		return err
	}
	fr, ok := inDomainFile(ee)
	if !ok {
		return err
	}
	return &DomainError{File: fr.Pos.Filename(), Line: int(fr.Pos.Line), Col: int(fr.Pos.Col), Err: err, msg: ee.Msg}
}
