package builtins

import (
	"fmt"

	"go.starlark.net/starlark"
)

// NameRunSubject is the builtin that returns the subject a run acts for.
const NameRunSubject = "run_subject"

// subjectKey is the thread-local key of the run's subject (SetSubject).
const subjectKey = "starplan.subject"

// SetSubject records on thread the subject the run acts for (its --subject, or the one its
// token is pinned to); "" leaves it without one.
func SetSubject(thread *starlark.Thread, subject string) {
	if subject != "" {
		thread.SetLocal(subjectKey, subject)
	}
}

// Subject returns the subject thread's run acts for, or "" for none.
func Subject(thread *starlark.Thread) string {
	s, _ := thread.Local(subjectKey).(string)
	return s
}

// RunSubject is run_subject(): the subject the run acts for as a string, or None when the run
// names none. It is a function, not a value, because a domain's helpers and rules are loaded once
// and shared by every run: only the thread knows whose run calls them.
func RunSubject() Helper {
	return Helper{
		Name: NameRunSubject, Group: GroupLanguage, Hidden: true,
		Value: starlark.NewBuiltin(NameRunSubject, func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			if len(args) > 0 || len(kwargs) > 0 {
				return nil, fmt.Errorf("%s: takes no arguments", b.Name())
			}
			if s := Subject(thread); s != "" {
				return starlark.String(s), nil
			}
			return starlark.None, nil
		}),
		Signature: "run_subject()",
		Doc:       "Returns the subject the run acts for (its --subject, or its token's), or None when it names none.",
		Example:   `if row["member_id"] != run_subject(): problems.append("not yours")`,
	}
}
