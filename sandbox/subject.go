package sandbox

import "context"

// InputSubject is the key of Request.Inputs that carries the subject a run acts for: the plan,
// and the domain helpers it calls on its thread, read it with run_subject(). It is no Starlark
// name, so no environment declares it as an input.
const InputSubject = "run.subject"

type subjectCtxKey struct{}

// WithSubject returns ctx carrying the subject a Call acts for (a domain rule checking a run's
// changes reads it with run_subject()); "" is none.
func WithSubject(ctx context.Context, subject string) context.Context {
	return context.WithValue(ctx, subjectCtxKey{}, subject)
}

// subjectOf is the subject ctx carries, or "".
func subjectOf(ctx context.Context) string {
	s, _ := ctx.Value(subjectCtxKey{}).(string)
	return s
}
