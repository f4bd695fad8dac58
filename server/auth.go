package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/starplan/starplan/access"
	"github.com/starplan/starplan/tokens"
)

// Who may call the server. A program sends the bearer token on every request. The review page
// (review.go) never holds the token: a person gives it once, to POST /login, or a one-time code
// from a link that `starplan serve` prints, and gets a session: a cookie (HttpOnly,
// SameSite=Strict) and a key, which the login's answer carries in its body and nothing else ever
// sends. The page keeps the key in its tab's sessionStorage and sends it with every request
// (SessionKeyHeader; the event stream, which cannot send headers, as SessionKeyParam). The cookie
// alone authorizes nothing: cookies are scoped by host, not port, so any page served on another
// port of the same host receives it, and the process behind that port could replay it; the key
// it never sees (sessionStorage is scoped by origin, port included). A request that changes
// anything under a session must also carry PageHeader, which a form or a cross-site page cannot
// send without a CORS preflight the server never grants, and an Origin, when the browser sends
// one, of this server.

// SessionCookie is the name of the review page's session cookie.
const SessionCookie = "starplan_session"

// PageHeader must be set (to "1") on every request that changes something under a session
// cookie: the page's CSRF proof.
const PageHeader = "X-Starplan-Page"

// SessionKeyHeader carries the session's key, which the login answered with, on every request
// made under a session cookie. SessionKeyParam carries it in the query of GET /v1/events instead
// (an EventSource cannot send headers).
const (
	SessionKeyHeader = "X-Starplan-Session-Key"
	SessionKeyParam  = "session_key"
)

// Bounds of the page's sessions.
const (
	// SessionTTL is how long a session lasts after its login.
	SessionTTL = 12 * time.Hour
	// MaxSessions bounds the live sessions; a login beyond it ends the one closest to expiry.
	MaxSessions = 64
	// LoginLinkTTL is how long a one-time login link stays valid if unused.
	LoginLinkTTL = 10 * time.Minute
	// maxLoginLinks bounds the one-time links not yet used.
	maxLoginLinks = 8
)

// sessions holds the page's sessions and one-time login codes, by the SHA-256 of their secret,
// with their expiry (and, for a session, the SHA-256 of its key). Its size is bounded; expired
// entries are dropped as new ones come.
type sessions struct {
	mu    sync.Mutex
	now   func() time.Time
	live  map[[32]byte]time.Time
	keys  map[[32]byte][32]byte // a live session's key, by the session's hash
	who   map[[32]byte]caller   // who signed in, by the session's hash
	codes map[[32]byte]time.Time
}

// caller is who makes a request: the principal, and the id of the stored token it proved
// (tokens.Keeper.Live; "" for the legacy token and the local user).
type caller struct {
	p       access.Principal
	tokenID string
}

func newSessions(now func() time.Time) *sessions {
	return &sessions{now: now, live: map[[32]byte]time.Time{}, keys: map[[32]byte][32]byte{}, who: map[[32]byte]caller{}, codes: map[[32]byte]time.Time{}}
}

// secret returns 32 random bytes in hex and their hash.
func secret() (string, [32]byte) {
	var b [32]byte
	_, _ = rand.Read(b[:])
	s := hex.EncodeToString(b[:])
	return s, sha256.Sum256([]byte(s))
}

// put adds an entry expiring after ttl to m, first dropping expired entries and, when m is full,
// the entry closest to expiry.
func (ss *sessions) put(m map[[32]byte]time.Time, h [32]byte, ttl time.Duration, limit int) {
	now := ss.now()
	for k, exp := range m {
		if !now.Before(exp) {
			delete(m, k)
		}
	}
	for len(m) >= limit {
		var oldest [32]byte
		var first time.Time
		for k, exp := range m {
			if first.IsZero() || exp.Before(first) {
				oldest, first = k, exp
			}
		}
		delete(m, oldest)
	}
	m[h] = now.Add(ttl)
}

// start opens a session for who and returns its id, the cookie's value, and its key, which every
// request under the session must carry too.
func (ss *sessions) start(who caller) (id, key string) {
	id, h := secret()
	key, kh := secret()
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.put(ss.live, h, SessionTTL, MaxSessions)
	for k := range ss.keys {
		if _, ok := ss.live[k]; !ok {
			delete(ss.keys, k) // its session expired or made room
			delete(ss.who, k)
		}
	}
	ss.keys[h] = kh
	ss.who[h] = who
	return id, key
}

// valid reports whether id is a live session and key is its key, comparing in constant time,
// and who signed in to it.
func (ss *sessions) valid(id, key string) (caller, bool) {
	if id == "" {
		return caller{}, false
	}
	h := sha256.Sum256([]byte(id))
	got := sha256.Sum256([]byte(key))
	ss.mu.Lock()
	defer ss.mu.Unlock()
	exp, ok := ss.live[h]
	want := ss.keys[h]
	if ok && ss.now().Before(exp) && subtle.ConstantTimeCompare(got[:], want[:]) == 1 {
		return ss.who[h], true
	}
	return caller{}, false
}

// end closes a session.
func (ss *sessions) end(id string) {
	h := sha256.Sum256([]byte(id))
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.live, h)
	delete(ss.keys, h)
	delete(ss.who, h)
}

// newCode returns a one-time login code.
func (ss *sessions) newCode() string {
	code, h := secret()
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.put(ss.codes, h, LoginLinkTTL, maxLoginLinks)
	return code
}

// useCode consumes a one-time login code: true once for a code that was issued and has not
// expired.
func (ss *sessions) useCode(code string) bool {
	h := sha256.Sum256([]byte(code))
	ss.mu.Lock()
	defer ss.mu.Unlock()
	exp, ok := ss.codes[h]
	delete(ss.codes, h)
	return ok && ss.now().Before(exp)
}

// codeValid reports whether code is a login code that was issued, is unused and has not expired,
// without using it.
func (ss *sessions) codeValid(code string) bool {
	h := sha256.Sum256([]byte(code))
	ss.mu.Lock()
	defer ss.mu.Unlock()
	exp, ok := ss.codes[h]
	return ok && ss.now().Before(exp)
}

// LoginLink returns the path of a one-time login link to the review page ("/login?code=…"):
// the page it opens trades the code, within LoginLinkTTL and once, for a session, as if it had
// logged in with the token. At most a few links are valid at once; a new one beyond that ends
// the oldest.
func (s *Server) LoginLink() string {
	return "/login?code=" + s.sessions.newCode()
}

// tokenOK reports whether token is the server's bearer token, in constant time.
func (s *Server) tokenOK(token string) bool {
	want := sha256.Sum256([]byte(s.opts.Token))
	got := sha256.Sum256([]byte(token))
	return s.opts.Token != "" && subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

// errUnauthorized is the answer to a request that proves no right to call the server.
func errUnauthorized() *Error {
	return errorf(http.StatusUnauthorized, CodeUnauthorized, "send Authorization: Bearer TOKEN: a token of starplan token create, or the admin token in serve.token in the store directory (or the one given with --token or STARPLAN_TOKEN)", "missing or wrong bearer token")
}

// authorize decides whether r may go on, and who makes it (ok is false for a request that
// carried no credential: the review page's public files and its login). A request that sends
// Authorization is decided by its bearer token alone: a stored token (tokens), or the legacy
// token of serve.token, which is the admin credential named "admin". One that does not may fetch
// the review page's public files and log in; anything else needs a live session cookie with its
// key and, unless it only reads, the page's CSRF proof. A session made with a stored token ends
// at its first request after the token was revoked or expired.
func (s *Server) authorize(r *http.Request) (who caller, ok bool, _ *Error) {
	if h, sent := r.Header["Authorization"]; sent {
		token, ok := strings.CutPrefix(strings.Join(h, ""), "Bearer ")
		if !ok {
			return caller{}, false, errUnauthorized()
		}
		who, err := s.bearer(r.Context(), token)
		if err != nil {
			return caller{}, false, err
		}
		return who, true, nil
	}
	safe := r.Method == http.MethodGet || r.Method == http.MethodHead
	if publicPage(r) {
		if safe {
			return caller{}, false, nil
		}
		return caller{}, false, sameOrigin(r)
	}
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return caller{}, false, errUnauthorized()
	}
	key := r.Header.Get(SessionKeyHeader)
	if key == "" && r.URL.Path == "/v1/events" {
		key = r.URL.Query().Get(SessionKeyParam)
	}
	who, live := s.sessions.valid(c.Value, key)
	if !live {
		return caller{}, false, errorf(http.StatusUnauthorized, CodeUnauthorized,
			"sign in on the review page again (the page keeps the session's key while its tab is open), or send Authorization: Bearer TOKEN",
			"no live session with that cookie and key; a session cookie without its key authorizes nothing")
	}
	if who.tokenID != "" {
		if _, err := s.tokens.Live(r.Context(), who.tokenID); err != nil {
			s.sessions.end(c.Value)
			if te, ok := tokens.AsError(err); ok {
				return caller{}, false, errorf(http.StatusUnauthorized, CodeUnauthorized, "sign in again with a live token", "%s; its session has ended", te.Message)
			}
			return caller{}, false, internal(err)
		}
	}
	if safe {
		return who, true, nil
	}
	return who, true, sameOrigin(r)
}

// bearer resolves a bearer token to who holds it: a stored token, or the legacy admin token.
// Secrets are compared in constant time (here for the legacy token, in tokens for stored ones)
// and never appear in an error.
func (s *Server) bearer(ctx context.Context, token string) (caller, *Error) {
	if tokens.IsToken(token) {
		p, id, err := s.tokens.Verify(ctx, token)
		if err == nil {
			return caller{p: p, tokenID: id}, nil
		}
		te, ok := tokens.AsError(err)
		switch {
		case !ok:
			return caller{}, internal(err)
		case te.Code == tokens.CodeUnknown:
			return caller{}, errUnauthorized()
		}
		return caller{}, errorf(http.StatusUnauthorized, CodeUnauthorized, te.Hint, "%s", te.Message)
	}
	if !s.tokenOK(token) {
		return caller{}, errUnauthorized()
	}
	return caller{p: LegacyPrincipal}, nil
}

// LegacyPrincipal is who the legacy token (serve.token, --token, STARPLAN_TOKEN) is: an admin
// named "admin", so set-ups from before named tokens keep every right.
var LegacyPrincipal = access.Principal{Name: tokens.LegacyName, Role: access.Admin}

// sameOrigin is the CSRF check of a request that changes something without a bearer token: it
// must carry PageHeader, and the Origin and Sec-Fetch-Site a browser sends must name this server.
func sameOrigin(r *http.Request) *Error {
	refuse := func(why string) *Error {
		return errorf(http.StatusForbidden, CodeForbidden, "use the review page of this server, or send the bearer token", "%s", why)
	}
	if r.Header.Get(PageHeader) != "1" {
		return refuse("a request with a session cookie must carry " + PageHeader + ": 1")
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return refuse("the request came from another site (" + clip(site, 40) + ")")
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return refuse("the request came from another origin (" + clip(o, 100) + ")")
		}
	}
	return nil
}

// setSession sets the session cookie: HttpOnly (no script reads it), SameSite=Strict (no other
// site's request carries it), Secure when served over TLS.
func setSession(w http.ResponseWriter, r *http.Request, id string, ttl time.Duration) {
	http.SetCookie(w, &http.Cookie{
		Name: SessionCookie, Value: id, Path: "/", MaxAge: int(ttl / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
}
