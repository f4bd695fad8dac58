// Package tokens keeps the named, role-scoped bearer tokens of `starplan serve` in the store: a
// system collection holds each token's name, role, dates and the SHA-256 of its secret, never
// the secret. It creates, lists, revokes and verifies them; who may call which operation with a
// verified token is the server's business (package access names the rights), and the legacy
// token of serve.token is the server's too (it never enters the store).
//
// It must not import the server, the CLI or the engine: it speaks to the store only through the
// store's system-document calls (Store).
package tokens

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/starplan/starplan/access"
	"github.com/starplan/starplan/store"
)

// The store's system collections of this package. Plans never see system collections.
const (
	// Collection holds one Record per token, keyed by its id (the part of the secret before the
	// random part).
	Collection = "tokens"
	// UseCollection holds when each token was last used, keyed by the same id: kept apart so
	// that recording a use never rewrites (and so never races with a revocation of) the token.
	UseCollection = "token_use"
)

// LegacyName is the name of the single token serve has always had (serve.token, --token,
// STARPLAN_TOKEN): an admin credential that is not kept in the store, so no stored token may take
// its name.
const LegacyName = "admin"

// UseGranularity is how stale a token's recorded last use may get: a verification records the
// use only when this Keeper has not recorded one for the token within it, so a busy token costs
// at most one store commit per UseGranularity, never one per request.
const UseGranularity = time.Minute

// Prefix begins every secret this package makes, so that a secret is recognisable (in a leaked
// file, to a secret scanner) and told apart from the legacy token at a glance.
const Prefix = "spt_"

// idBytes and secretBytes are the random bytes of a token's id and of its secret part.
const (
	idBytes     = 8
	secretBytes = 32
)

// Record is a stored token, as its system document holds it.
type Record struct {
	ID   string      `json:"id"`
	Name string      `json:"name"`
	Role access.Role `json:"role"`
	// Subject is the one subject the token's runs act for (CreateFor); empty: not pinned.
	Subject string     `json:"subject,omitempty"`
	Hash    string     `json:"sha256"` // hex SHA-256 of the whole secret
	Created time.Time  `json:"created_at"`
	Expires *time.Time `json:"expires_at,omitempty"`
	Revoked *time.Time `json:"revoked_at,omitempty"`
}

// Info is what `token list` shows of a token: never its secret nor its hash.
type Info struct {
	Name     string      `json:"name"`
	Role     access.Role `json:"role"`
	Subject  string      `json:"subject,omitempty"`
	Created  time.Time   `json:"created_at"`
	LastUsed *time.Time  `json:"last_used_at"`
	Expires  *time.Time  `json:"expires_at"`
	Revoked  *time.Time  `json:"revoked_at,omitempty"`
}

// use is the document of UseCollection.
type use struct {
	LastUsed time.Time `json:"last_used_at"`
}

// Store is what Keeper needs of the store: its system documents (store.Store has them).
type Store interface {
	PutSys(ctx context.Context, coll, id string, v any) error
	GetSys(coll, id string, v any) (bool, error)
	ListSys(coll string) ([]store.SysRecord, error)
}

// Error is a refusal a user acts on: a bad name, a name taken, an unknown, revoked or expired
// token. Code is one of the Code constants.
type Error struct {
	Code    string
	Message string
	Hint    string
}

func (e *Error) Error() string { return e.Message }

// Codes of Error.
const (
	CodeBadName  = "bad-name"
	CodeTaken    = "name-taken"
	CodeUnknown  = "unknown-token"
	CodeRevoked  = "token-revoked"
	CodeExpired  = "token-expired"
	CodeNotFound = "no-such-token"
)

// Keeper creates, lists, revokes and verifies the tokens of one store. It is safe for concurrent
// use; each process (the server, a CLI command) has its own.
type Keeper struct {
	st  Store
	now func() time.Time

	mu       sync.Mutex
	recorded map[string]time.Time // when this Keeper last recorded each token's use
}

// New returns a Keeper over st; now is its clock (time.Now when nil).
func New(st Store, now func() time.Time) *Keeper {
	if now == nil {
		now = time.Now
	}
	return &Keeper{st: st, now: now, recorded: map[string]time.Time{}}
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// CheckName returns an *Error when name cannot name a token: 1 to 64 letters, digits, '.', '_'
// or '-', starting with a letter or digit, and not LegacyName.
func CheckName(name string) error {
	if !nameRE.MatchString(name) {
		return &Error{Code: CodeBadName, Message: fmt.Sprintf("token name %q: use 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", clip(name)),
			Hint: "starplan token create agent-1 --role proposer"}
	}
	if name == LegacyName {
		return &Error{Code: CodeBadName, Message: `the name "admin" is the token of serve.token (--token, STARPLAN_TOKEN)`,
			Hint: "choose another name, e.g. starplan token create ops-admin --role admin"}
	}
	return nil
}

// Create makes a token named name with role, expiring after ttl (never when 0), and returns its
// secret, which is shown once and never kept, with what `token list` will show of it. A name in
// use by another token, revoked or not, is an *Error: names stay unique so the audit log's names
// stay unambiguous.
func (k *Keeper) Create(ctx context.Context, name string, role access.Role, ttl time.Duration) (secret string, info Info, err error) {
	return k.CreateFor(ctx, name, role, ttl, "")
}

// CreateFor is Create for a token pinned to subject ("" for none): every run made with it acts
// for that subject, and naming another is refused (access.SubjectFor). Only a proposer's token
// may be pinned: an approver or an admin decides on other principals' runs, whoever they act for.
func (k *Keeper) CreateFor(ctx context.Context, name string, role access.Role, ttl time.Duration, subject string) (secret string, info Info, err error) {
	if err := CheckName(name); err != nil {
		return "", Info{}, err
	}
	if _, err := access.ParseRole(string(role)); err != nil {
		return "", Info{}, &Error{Code: CodeBadName, Message: err.Error(), Hint: "--role proposer, approver or admin"}
	}
	if err := access.CheckSubject(subject); err != nil {
		return "", Info{}, &Error{Code: CodeBadName, Message: err.Error(), Hint: "--subject ID, the id of the one subject the token acts for"}
	}
	if subject != "" && role != access.Proposer {
		return "", Info{}, &Error{Code: CodeBadName, Message: fmt.Sprintf("only a proposer's token can be pinned to a subject, not an %s's", role),
			Hint: "--role proposer --subject ID, or leave --subject out"}
	}
	if ttl < 0 {
		return "", Info{}, &Error{Code: CodeBadName, Message: "the expiry must be in the future", Hint: "--expires 30d"}
	}
	recs, err := k.records()
	if err != nil {
		return "", Info{}, err
	}
	for _, r := range recs {
		if r.Name == name {
			return "", Info{}, &Error{Code: CodeTaken, Message: fmt.Sprintf("a token named %q exists already (created %s)", name, r.Created.Format(time.DateTime)),
				Hint: "choose another name; starplan token list shows the names in use"}
		}
	}
	var id [idBytes]byte
	var raw [secretBytes]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", Info{}, err
	}
	if _, err := rand.Read(raw[:]); err != nil {
		return "", Info{}, err
	}
	rec := Record{ID: hex.EncodeToString(id[:]), Name: name, Role: role, Subject: subject, Created: k.now().UTC().Truncate(time.Second)}
	secret = Prefix + rec.ID + "_" + hex.EncodeToString(raw[:])
	rec.Hash = hashOf(secret)
	if ttl > 0 {
		exp := rec.Created.Add(ttl)
		rec.Expires = &exp
	}
	if err := k.st.PutSys(ctx, Collection, rec.ID, rec); err != nil {
		return "", Info{}, fmt.Errorf("storing token %s: %w", name, err)
	}
	return secret, info0(rec), nil
}

// List returns every token, live, expired and revoked, sorted by name, with its last use.
func (k *Keeper) List() ([]Info, error) {
	recs, err := k.records()
	if err != nil {
		return nil, err
	}
	uses, err := k.st.ListSys(UseCollection)
	if err != nil {
		return nil, err
	}
	last := map[string]time.Time{}
	for _, u := range uses {
		var v use
		if json.Unmarshal(u.JSON, &v) == nil {
			last[u.ID] = v.LastUsed
		}
	}
	out := make([]Info, 0, len(recs))
	for _, r := range recs {
		i := info0(r)
		if t, ok := last[r.ID]; ok {
			i.LastUsed = &t
		}
		out = append(out, i)
	}
	return out, nil
}

// Revoke ends the token named name: every later Verify or Live of it fails, so a request with
// it, or under a page session made with it, is refused from the next one on. The record stays
// (revoked), so its name keeps meaning one credential in the audit log. Revoking a revoked
// token changes nothing; an unknown name is an *Error.
func (k *Keeper) Revoke(ctx context.Context, name string) (Info, error) {
	recs, err := k.records()
	if err != nil {
		return Info{}, err
	}
	for _, r := range recs {
		if r.Name != name {
			continue
		}
		if r.Revoked == nil {
			at := k.now().UTC().Truncate(time.Second)
			r.Revoked = &at
			if err := k.st.PutSys(ctx, Collection, r.ID, r); err != nil {
				return Info{}, fmt.Errorf("revoking token %s: %w", name, err)
			}
		}
		return info0(r), nil
	}
	hint := "starplan token list shows the tokens"
	if name == LegacyName {
		hint = "the admin token is serve.token in the store directory: delete the file (a new one is made at the next start) or give serve another --token / STARPLAN_TOKEN"
	}
	return Info{}, &Error{Code: CodeNotFound, Message: fmt.Sprintf("no token named %q", clip(name)), Hint: hint}
}

// IsToken reports whether secret has the form of a token this package makes (it may still be
// unknown): the server tries the legacy token for anything else.
func IsToken(secret string) bool { return strings.HasPrefix(secret, Prefix) }

// Verify returns the principal of a stored token's secret, and the token's id (for Live), or an
// *Error when the secret is not a live token. The hash is compared in constant time. A use is
// recorded at most once per UseGranularity per token (see UseGranularity); failing to record it
// does not fail the verification and is tried again at the next one.
func (k *Keeper) Verify(ctx context.Context, secret string) (access.Principal, string, error) {
	rest, ok := strings.CutPrefix(secret, Prefix)
	id, _, ok2 := strings.Cut(rest, "_")
	if !ok || !ok2 || len(id) != 2*idBytes {
		return access.Principal{}, "", unknown()
	}
	p, err := k.live(id, hashOf(secret))
	if err != nil {
		return access.Principal{}, "", err
	}
	k.recordUse(ctx, id)
	return p, id, nil
}

// Live returns the principal of the token id (from Verify) if it is still live: not revoked,
// not expired. The server asks it on every request of a page session made with the token.
func (k *Keeper) Live(ctx context.Context, id string) (access.Principal, error) {
	p, err := k.live(id, "")
	if err == nil {
		k.recordUse(ctx, id)
	}
	return p, err
}

func (k *Keeper) live(id, hash string) (access.Principal, error) {
	var r Record
	found, err := k.st.GetSys(Collection, id, &r)
	if err != nil {
		return access.Principal{}, err
	}
	if !found {
		return access.Principal{}, unknown()
	}
	if hash != "" {
		want, _ := hex.DecodeString(r.Hash)
		got, _ := hex.DecodeString(hash)
		if len(want) != sha256.Size || subtle.ConstantTimeCompare(got, want) != 1 {
			return access.Principal{}, unknown()
		}
	}
	switch {
	case r.Revoked != nil:
		return access.Principal{}, &Error{Code: CodeRevoked, Message: fmt.Sprintf("token %s was revoked at %s", r.Name, r.Revoked.Format(time.DateTime)),
			Hint: "ask an admin for a new token (starplan token create)"}
	case r.Expires != nil && !k.now().Before(*r.Expires):
		return access.Principal{}, &Error{Code: CodeExpired, Message: fmt.Sprintf("token %s expired at %s", r.Name, r.Expires.Format(time.DateTime)),
			Hint: "ask an admin for a new token (starplan token create NAME --expires 30d)"}
	}
	return access.Principal{Name: r.Name, Role: r.Role, Subject: r.Subject}, nil
}

// recordUse writes the token's last use unless this Keeper did within UseGranularity.
func (k *Keeper) recordUse(ctx context.Context, id string) {
	now := k.now()
	k.mu.Lock()
	if last, ok := k.recorded[id]; ok && now.Sub(last) < UseGranularity {
		k.mu.Unlock()
		return
	}
	k.recorded[id] = now // claimed before the write: concurrent requests do not all write
	k.mu.Unlock()
	if err := k.st.PutSys(context.WithoutCancel(ctx), UseCollection, id, use{LastUsed: now.UTC().Truncate(time.Second)}); err != nil {
		k.mu.Lock()
		delete(k.recorded, id) // try again at the next use
		k.mu.Unlock()
	}
}

func (k *Keeper) records() ([]Record, error) {
	docs, err := k.st.ListSys(Collection)
	if err != nil {
		return nil, err
	}
	out := make([]Record, 0, len(docs))
	for _, d := range docs {
		var r Record
		if err := json.Unmarshal(d.JSON, &r); err != nil {
			return nil, fmt.Errorf("token record %s does not read back: %w", d.ID, err)
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Record) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func info0(r Record) Info {
	return Info{Name: r.Name, Role: r.Role, Subject: r.Subject, Created: r.Created, Expires: r.Expires, Revoked: r.Revoked}
}

func hashOf(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

func unknown() error {
	return &Error{Code: CodeUnknown, Message: "no such token", Hint: "check the token; starplan token list shows the names of the tokens this store knows"}
}

// clip cuts a name for a message.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// AsError returns err as an *Error, if it is one.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}
