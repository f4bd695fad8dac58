// Package opener opens a store by the name a person or a program gives it (`--db`, STARPLAN_DB,
// or a string in the Go API): a path is the embedded bbolt store in that directory (store/bolt);
// a URL names its backend by its scheme (postgres://… and postgresql://… the PostgreSQL one).
// It owns the list of backends and the choice among them, and nothing a backend does once open:
// the store it returns is the backend's own, so type assertions on it (store.Local, store.Seeder,
// …) see what the backend implements.
//
// The list is explicit (Opener.Backends), not registered from init functions: Builtin is the
// backends this build links (bbolt and PostgreSQL). A backend an Opener knows of but that has no
// Open (a build without it) fails with a *MissingBackendError that names the package.
package opener

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/bolt"
	"github.com/starplan/starplan/store/pg"
)

// Options configure Open. The zero value opens an existing store of whatever domain it holds and
// creates nothing (a missing one is a *store.NoStoreError).
type Options struct {
	// Create makes a missing store, with Domain (nil: the built-in inventory domain) and its
	// seed rows unless NoSeed, instead of failing.
	Create bool
	// NoSeed creates a missing store with empty tables.
	NoSeed bool
	// Domain is the domain the store must hold; nil: the one it recorded when it was made.
	Domain *store.Domain
	// Stderr receives the one-time note a backend prints when it creates a store; nil discards
	// it.
	Stderr io.Writer
	// LockTimeout is how long a backend that one process holds at a time (bbolt) waits for
	// another to release it; 0: the backend's default.
	LockTimeout time.Duration
}

// Backend is one kind of store an Opener can open.
type Backend struct {
	// Name is what people call it ("bbolt", "PostgreSQL").
	Name string
	// Package is the Go package that implements it ("store/bolt"), for the error of a build
	// without it.
	Package string
	// Schemes are the URL schemes that select it ("postgres", "postgresql"). A backend without
	// schemes opens paths: every target that is not a URL.
	Schemes []string
	// Open opens the store target names with opts, reporting whether it created it. nil: this
	// build does not link the backend.
	Open func(ctx context.Context, target string, opts Options) (st store.Store, created bool, err error)
	// Check verifies the store target names without changing it (`starplan db check`), even
	// when it is too damaged to open; what it finds is in the report, the error is for what
	// stops a check from running (a *store.NoStoreError first of all). nil: the backend
	// cannot be checked.
	Check func(ctx context.Context, target string, opts store.CheckOptions) (*store.CheckReport, error)
}

// Opener opens stores with the first of Backends that takes the target. The zero Opener knows
// no backend; Builtin is the usual one.
type Opener struct {
	Backends []Backend
}

// Bolt is the embedded backend: a directory holding one bbolt file (store/bolt).
var Bolt = Backend{
	Name:    "bbolt",
	Package: "store/bolt",
	Open: func(_ context.Context, dir string, opts Options) (store.Store, bool, error) {
		st, err := bolt.Open(dir, bolt.Options{MustExist: !opts.Create, NoSeed: opts.NoSeed, Domain: opts.Domain,
			Stderr: opts.Stderr, LockTimeout: opts.LockTimeout})
		if err != nil {
			return nil, false, err
		}
		return st, st.Created(), nil
	},
	Check: func(_ context.Context, dir string, opts store.CheckOptions) (*store.CheckReport, error) {
		return bolt.Check(dir, opts)
	},
}

// Postgres is the PostgreSQL backend (store/pg). A URL's schema= parameter (taken out before
// the URL reaches the driver) names the SQL schema that holds the store; without it the store
// is in the schema named after the domain (Options.Domain), else the database's only one. A
// missing store is created, when asked, with Options.Domain (default: the inventory domain)
// in that schema; two processes creating it at once both end with the one store.
var Postgres = Backend{
	Name:    "PostgreSQL",
	Package: "store/pg",
	Schemes: []string{"postgres", "postgresql"},
	Open: func(ctx context.Context, target string, opts Options) (store.Store, bool, error) {
		dsn, schema, err := SplitSchema(target)
		if err != nil {
			return nil, false, err
		}
		po := pg.Options{Schema: schema, Domain: opts.Domain, Stderr: opts.Stderr}
		st, err := pg.Open(ctx, dsn, po)
		if err == nil || !opts.Create || !errors.Is(err, store.ErrNoStore) {
			if err != nil {
				return nil, false, err
			}
			return st, false, nil
		}
		dom := opts.Domain
		if dom == nil {
			dom = store.Inventory()
		}
		st, err = pg.Create(ctx, dsn, dom, pg.Options{Schema: schema, NoSeed: opts.NoSeed, Stderr: opts.Stderr})
		if errors.Is(err, pg.ErrExists) {
			// Another process made it between our Open and Create.
			po.Domain = dom
			st, err = pg.Open(ctx, dsn, po)
			if err != nil {
				return nil, false, err
			}
			return st, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		return st, true, nil
	},
	Check: func(ctx context.Context, target string, opts store.CheckOptions) (*store.CheckReport, error) {
		dsn, schema, err := SplitSchema(target)
		if err != nil {
			return nil, err
		}
		st, err := pg.Open(ctx, dsn, pg.Options{Schema: schema, Domain: opts.Domain})
		if err != nil {
			return nil, err
		}
		defer st.Close()
		return st.Check(ctx, opts)
	},
}

// SplitSchema takes a postgres URL's schema= parameter out of it: the URL the driver is given,
// and the schema ("" when the URL names none).
func SplitSchema(target string) (dsn, schema string, err error) {
	u, err := url.Parse(target)
	if err != nil {
		return "", "", fmt.Errorf("%s: not a URL: give postgres://USER@HOST/DATABASE", Redact(target))
	}
	q := u.Query()
	if !q.Has("schema") {
		return target, "", nil
	}
	schema = q.Get("schema")
	q.Del("schema")
	u.RawQuery = q.Encode()
	return u.String(), schema, nil
}

// Builtin is the opener of this build's backends: bbolt for paths, and PostgreSQL for postgres://
// and postgresql:// URLs.
func Builtin() Opener { return Opener{Backends: []Backend{Bolt, Postgres}} }

// Open opens the store target names with the built-in backends (Builtin().Open).
func Open(ctx context.Context, target string, opts Options) (store.Store, bool, error) {
	return Builtin().Open(ctx, target, opts)
}

// Check checks the store target names with the built-in backends (Builtin().Check).
func Check(ctx context.Context, target string, opts store.CheckOptions) (*store.CheckReport, error) {
	return Builtin().Check(ctx, target, opts)
}

// Open opens the store target names with its backend (Backend), reporting whether it created
// it. An empty target, a URL of a scheme no backend takes, or one whose backend this build does
// not link, is an error before anything is touched.
func (o Opener) Open(ctx context.Context, target string, opts Options) (store.Store, bool, error) {
	b, err := o.Backend(target)
	if err != nil {
		return nil, false, err
	}
	if b.Open == nil {
		return nil, false, &MissingBackendError{Backend: b.Name, Package: b.Package, Target: Redact(target)}
	}
	return b.Open(ctx, target, opts)
}

// Check checks the store target names with its backend's Check.
func (o Opener) Check(ctx context.Context, target string, opts store.CheckOptions) (*store.CheckReport, error) {
	b, err := o.Backend(target)
	if err != nil {
		return nil, err
	}
	if b.Open == nil {
		return nil, &MissingBackendError{Backend: b.Name, Package: b.Package, Target: Redact(target)}
	}
	if b.Check == nil {
		return nil, fmt.Errorf("the %s backend cannot check a store (%s)", b.Name, Redact(target))
	}
	return b.Check(ctx, target, opts)
}

// Backend returns the backend that takes target: the one of its URL scheme, or the backend of
// paths.
func (o Opener) Backend(target string) (*Backend, error) {
	if target == "" {
		return nil, fmt.Errorf("no store named: give a directory or a postgres:// URL")
	}
	scheme, isURL := Scheme(target)
	for i := range o.Backends {
		b := &o.Backends[i]
		if isURL && slices.Contains(b.Schemes, scheme) || !isURL && len(b.Schemes) == 0 {
			return b, nil
		}
	}
	if !isURL {
		return nil, fmt.Errorf("%s is a path, and no store backend of paths is linked", target)
	}
	var known []string
	for _, b := range o.Backends {
		for _, s := range b.Schemes {
			known = append(known, s+"://")
		}
	}
	return nil, &UnknownSchemeError{Scheme: scheme, Known: known}
}

// urlPrefix is how a URL starts (RFC 3986's scheme, then "://"); anything else is a path.
var urlPrefix = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*)://`)

// Scheme returns target's URL scheme, lower case, and whether target is a URL at all (else it
// is a path, which may well contain a colon).
func Scheme(target string) (string, bool) {
	m := urlPrefix.FindStringSubmatch(target)
	if m == nil {
		return "", false
	}
	return strings.ToLower(m[1]), true
}

// Redact is target as messages and logs may show it (store.Redact: a URL's password and every
// password-, secret- or token-like parameter replaced by xxxxx). A path is returned as it is.
func Redact(target string) string {
	if _, isURL := Scheme(target); !isURL {
		return target
	}
	return store.Redact(target)
}

// MissingBackendError is the error of a target whose backend this build does not link.
type MissingBackendError struct {
	Backend string // "PostgreSQL"
	Package string // "store/pg"
	Target  string // redacted
}

func (e *MissingBackendError) Error() string {
	return fmt.Sprintf("%s names a %s store, but this starplan was built without the %s backend (package %s)",
		e.Target, e.Backend, e.Backend, e.Package)
}

// Hint says what to do about it.
func (e *MissingBackendError) Hint() string {
	return fmt.Sprintf("use a starplan built with %s, or pass --db DIR (or set STARPLAN_DB) for the embedded store in a directory", e.Package)
}

// UnknownSchemeError is the error of a URL whose scheme no backend takes.
type UnknownSchemeError struct {
	Scheme string
	Known  []string // the schemes that are taken, as "postgres://"
}

func (e *UnknownSchemeError) Error() string {
	return fmt.Sprintf("no store backend takes %s:// URLs", e.Scheme)
}

// Hint says what to do about it.
func (e *UnknownSchemeError) Hint() string {
	if len(e.Known) == 0 {
		return "pass --db DIR: a directory for the embedded store"
	}
	return "pass --db DIR (a directory for the embedded store) or a URL starting " + strings.Join(e.Known, " or ")
}
