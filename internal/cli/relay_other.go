//go:build !linux

package cli

import (
	"net"
	"os"
)

// samePeer relies on the socket's mode (0600) where peer credentials are not read.
func samePeer(net.Conn) error { return nil }

// listenUnix listens on a unix socket at path and makes it private to this user.
func listenUnix(path string) (net.Listener, error) {
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// openRegular opens path for reading only if it is a regular file.
func openRegular(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return regularOnly(f)
}

// peerPID is not known where peer credentials are not read.
func peerPID(net.Conn) (int, bool) { return 0, false }
