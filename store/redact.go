package store

import (
	"net/url"
	"regexp"
	"strings"
)

// Redact returns a store's name (a path, a URL or a key=value connection string) as messages
// and logs may show it: a URL's user password and every parameter whose name holds "password",
// "secret" or "token" (password, sslpassword, ...) read xxxxx, in both forms. A name that does
// not parse keeps only its scheme. Every message of every backend that names a store goes
// through it.
func Redact(target string) string {
	if i := strings.Index(target, "://"); i > 0 && !strings.ContainsAny(target[:i], " =/") {
		u, err := url.Parse(target)
		if err != nil {
			return strings.ToLower(target[:i]) + "://…"
		}
		q := u.Query()
		secret := false
		for k := range q {
			if secretParam(k) {
				q.Set(k, "xxxxx")
				secret = true
			}
		}
		if secret {
			u.RawQuery = q.Encode()
		}
		return u.Redacted()
	}
	if !strings.Contains(target, "=") {
		return target // a path
	}
	return keyValueSecret.ReplaceAllStringFunc(target, func(kv string) string {
		m := keyValueSecret.FindStringSubmatch(kv)
		if !secretParam(m[1]) {
			return kv
		}
		return m[1] + m[2] + "xxxxx"
	})
}

// keyValueSecret matches one key = value pair of a libpq connection string; the value is a
// single-quoted string (with \' and \\ escapes) or runs to the next space.
var keyValueSecret = regexp.MustCompile(`(\w+)(\s*=\s*)('(?:[^'\\]|\\.)*'?|\S*)`)

func secretParam(name string) bool {
	n := strings.ToLower(name)
	return strings.Contains(n, "password") || strings.Contains(n, "secret") || strings.Contains(n, "token")
}
