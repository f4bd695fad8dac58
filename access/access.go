// Package access names who may do what in starplan: the roles a credential holds, the rights an
// operation needs, and the principal (a named credential or the local OS user) that a run, an
// approval or a rejection is recorded under. It holds the vocabulary and the one table of which
// role has which right; where credentials are kept (the store), how a request proves one (the
// server) and which approvals a run needs (the domain's policy, the engine) live elsewhere.
//
// It must not import anything: every layer that speaks of principals imports it.
package access

import (
	"context"
	"errors"
	"fmt"
	"os/user"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Role is what a credential may do, as a set of rights (see Can).
type Role string

// The roles, from least to most.
const (
	// Proposer may describe, check, dry-run, ask, list and show runs, and reject its own runs.
	// It may apply a run only when one of the domain's auto-approval rules allows it.
	Proposer Role = "proposer"
	// Approver has a proposer's rights plus apply and reject of any run.
	Approver Role = "approver"
	// Admin has every right: an approver's, plus tokens, prune and replay. The legacy single
	// bearer token of `serve` (serve.token, --token, STARPLAN_TOKEN) and the local user are admins.
	Admin Role = "admin"
)

// Roles lists every role, least first.
var Roles = []Role{Proposer, Approver, Admin}

// ParseRole returns the role named s, or an error listing the roles.
func ParseRole(s string) (Role, error) {
	for _, r := range Roles {
		if string(r) == s {
			return r, nil
		}
	}
	return "", fmt.Errorf("unknown role %q: use one of proposer, approver, admin", s)
}

// Right is what an operation needs.
type Right string

// The rights, from least to most.
const (
	// Read: describe a domain, list and show runs, follow events.
	Read Right = "read"
	// Propose: check a plan, dry-run it, ask the model, reject one's own run.
	Propose Right = "propose"
	// Approve: apply a run, reject anyone's run, sign in to the review page.
	Approve Right = "approve"
	// Administer: manage tokens, prune, replay.
	Administer Right = "admin"
)

// Can reports whether role r holds right x. An unknown role holds none.
func (r Role) Can(x Right) bool {
	switch r {
	case Admin:
		return x == Read || x == Propose || x == Approve || x == Administer
	case Approver:
		return x == Read || x == Propose || x == Approve
	case Proposer:
		return x == Read || x == Propose
	}
	return false
}

// Principal is who did something: a named credential with its role, or the local OS user.
type Principal struct {
	// Name is the credential's name ("admin", "agent-1"), or "local:<user>" for the local user.
	Name string `json:"name"`
	Role Role   `json:"role"`
	// Subject is the one subject a credential pinned to one may act for (tokens.Token.Subject);
	// empty: any, or none.
	Subject string `json:"subject,omitempty"`
}

// LocalPrefix begins the name of the local OS user as a principal.
const LocalPrefix = "local:"

// Local is the OS user running this process, with admin rights: the CLI without a server and
// the unix-socket relay (which admits only clients of the server's own user) act as it.
func Local() Principal {
	name := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	return Principal{Name: LocalPrefix + name, Role: Admin}
}

// IsLocal reports whether p is the local OS user.
func (p Principal) IsLocal() bool { return strings.HasPrefix(p.Name, LocalPrefix) }

// Can reports whether p holds right x.
func (p Principal) Can(x Right) bool { return p.Role.Can(x) }

// String is the principal's name.
func (p Principal) String() string { return p.Name }

// principalKey is the context key of NewContext.
type principalKey struct{}

// NewContext returns ctx carrying p: the server puts the principal of a request there, and the
// engine's Run, Apply and Reject find who is acting with FromContext.
func NewContext(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the principal ctx carries (NewContext), and whether it carries one.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// MaxSubject is the longest subject id, in bytes.
const MaxSubject = 200

// CheckSubject returns an error when s cannot name a subject: longer than MaxSubject, not UTF-8,
// with a control character, an invisible one (a format character such as a zero-width space, or
// anything not graphic) or with spaces at either end. "" (no subject) is valid. An id that shows
// as another ("M001" and "M001" with a zero-width space) could mislead a reviewer reading a
// token list or a run.
func CheckSubject(s string) error {
	switch {
	case len(s) > MaxSubject:
		return fmt.Errorf("the subject is %d bytes; at most %d are accepted", len(s), MaxSubject)
	case !utf8.ValidString(s):
		return errors.New("the subject is not valid UTF-8")
	case strings.TrimSpace(s) != s:
		return fmt.Errorf("the subject %q has spaces at an end; give the id alone", s)
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return fmt.Errorf("the subject %q holds a control character", s)
	case strings.IndexFunc(s, invisible) >= 0:
		return fmt.Errorf("the subject %q holds an invisible character; give the id as it is shown", s)
	}
	return nil
}

// invisible reports whether r shows as nothing: a format character (U+200B, U+2060, U+FEFF, the
// bidirectional marks) or any other rune that is not graphic.
func invisible(r rune) bool { return unicode.Is(unicode.Cf, r) || !unicode.IsGraphic(r) }

// SubjectFor returns the subject a run by p that names asked ("" for none) acts for: p's pinned
// subject when it has one and asked is it or empty; asked otherwise. ok is false when p is pinned
// to a subject and asked names another: p may not act for it.
func SubjectFor(p Principal, asked string) (subject string, ok bool) {
	switch {
	case p.Subject == "":
		return asked, true
	case asked == "" || asked == p.Subject:
		return p.Subject, true
	}
	return "", false
}
