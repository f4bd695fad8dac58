package cli

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/starplan/starplan/store"
)

// ServeInfoName is the file a running `starplan serve` keeps in its store directory, saying
// which process it is and where it serves, so that a command that finds the store in use can
// say who holds it. The server removes it when it stops; one that was killed leaves it behind,
// so it is believed only while the server's socket answers.
const ServeInfoName = "serve.json"

// serveInfo is what ServeInfoName holds.
type serveInfo struct {
	PID  int    `json:"pid"`
	HTTP string `json:"http,omitempty"` // the base URL of its HTTP API; empty without one
}

// writeServeInfo writes info into the store directory dir (whole or not at all) and returns
// what removes it again, unless another server has replaced it meanwhile.
func writeServeInfo(dir string, info serveInfo) (remove func(), err error) {
	b, err := json.Marshal(info)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, ServeInfoName)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return nil, err
	}
	return func() {
		if got, ok := readServeInfo(dir); ok && got.PID == info.PID {
			os.Remove(path)
		}
	}, nil
}

func readServeInfo(dir string) (serveInfo, bool) {
	var info serveInfo
	b, err := os.ReadFile(filepath.Join(dir, ServeInfoName))
	if err != nil || json.Unmarshal(b, &info) != nil || info.PID <= 0 {
		return serveInfo{}, false
	}
	return info, true
}

// servingOn reports whether a `starplan serve` runs on the store in dir, and what it wrote about
// itself: its socket answers (a command such as ask, waiting for the model, answers there too,
// but writes no info file) and the info file names the process that answers (on Linux, the
// kernel says which pid listens; elsewhere the file is believed while the socket answers).
func servingOn(dir string) (serveInfo, bool) {
	conn, err := net.DialTimeout("unix", filepath.Join(dir, SocketName), time.Second)
	if err != nil {
		return serveInfo{}, false // no server, or the socket of one that was killed
	}
	defer conn.Close()
	info, ok := readServeInfo(dir)
	if !ok {
		return serveInfo{}, false
	}
	if pid, known := peerPID(conn); known && pid != info.PID {
		return serveInfo{}, false // the file of a server that was killed; another command hosts
	}
	return info, true
}

// inUseError is the error of a command that found the store held by another process. When that
// is a running `starplan serve` (the commands that can go through it already did, so this one
// needs the store to itself) it names the server and says to stop it.
func inUseError(e *store.InUseError) error {
	info, serving := servingOn(e.Dir)
	if !serving {
		return withCode(ExitInternal, e, e.Hint())
	}
	who := "`starplan serve` (pid " + strconv.Itoa(info.PID)
	if info.HTTP != "" {
		who += ", serving " + info.HTTP
	}
	who += ")"
	return withCode(ExitInternal, &heldError{e, who},
		fmt.Sprintf("stop the server (Ctrl-C where it runs, or kill %d), then run this command again: it needs the store to itself, so it cannot go through the server as the commands that read or run plans do", info.PID))
}

// heldError is a store.InUseError that names the process holding the store.
type heldError struct {
	inUse *store.InUseError
	who   string
}

func (e *heldError) Error() string {
	return fmt.Sprintf("the store at %s is held by %s", e.inUse.Dir, e.who)
}

func (e *heldError) Unwrap() error { return e.inUse }
