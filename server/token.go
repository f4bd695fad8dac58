package server

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// TokenFile is the name of the bearer-token file in the store directory.
const TokenFile = "serve.token"

// minTokenLen is the shortest token accepted from a flag or the environment.
const minTokenLen = 16

// LoadToken returns the bearer token of the server on the store in dir. A token given (the
// --token flag or STARPLAN_TOKEN) wins and is not written anywhere; it must be at least 16
// characters. Otherwise the token is read from dir/serve.token, which is created at the first
// start with 32 random bytes in hex, readable by its owner only (0600). A token file that others
// can read is refused rather than trusted. path is the file's path ("" for a given token), and
// created says whether this call created it.
func LoadToken(dir, given string) (token, path string, created bool, err error) {
	if given != "" {
		if len(given) < minTokenLen || strings.ContainsAny(given, " \t\r\n") {
			return "", "", false, fmt.Errorf("the token must be at least %d characters without spaces", minTokenLen)
		}
		return given, "", false, nil
	}
	path = filepath.Join(dir, TokenFile)
	var b [32]byte
	_, _ = rand.Read(b[:])
	fresh := hex.EncodeToString(b[:])
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		_, werr := f.WriteString(fresh + "\n")
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			os.Remove(path)
			return "", "", false, fmt.Errorf("writing the token file: %w", werr)
		}
		return fresh, path, true, nil
	case !errors.Is(err, fs.ErrExist):
		return "", "", false, fmt.Errorf("creating the token file: %w", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", "", false, fmt.Errorf("reading the token file: %w", err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return "", "", false, fmt.Errorf("the token file %s can be read by others (mode %04o): run chmod 600 %s, or delete it for a new token", path, perm, path)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", "", false, fmt.Errorf("reading the token file: %w", err)
	}
	token = strings.TrimSpace(string(raw))
	if len(token) < minTokenLen {
		return "", "", false, fmt.Errorf("the token file %s holds no token of at least %d characters: delete it for a new one", path, minTokenLen)
	}
	return token, path, false, nil
}
