// Package pgtest gives a test a PostgreSQL database of its own. DSN(t) returns a connection
// string of a fresh, empty database (created for t, dropped when t ends), so tests run in
// parallel. The server is:
//
//   - the one $STARPLAN_TEST_PG names (a postgres:// URL or a key=value DSN of a role that may
//     create databases), when it is set;
//   - otherwise a throw-away cluster this test binary starts, once, at the first DSN call, when
//     PostgreSQL's binaries are found (initdb and postgres on PATH or in
//     /usr/lib/postgresql/*/bin): initdb in a temporary directory, a unix socket in that
//     directory, no TCP (listen_addresses=”), fsync off. Main, called from the package's
//     TestMain, stops it and removes the directory when the tests end. Run as root (initdb
//     refuses root), the cluster runs as the user postgres, or nobody;
//   - otherwise none: DSN skips the test with a one-line hint.
//
// It must not be imported outside tests.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvDSN is the environment variable that names an existing server for the tests.
const EnvDSN = "STARPLAN_TEST_PG"

// Hint is the one line a test skipped for want of a server says.
const Hint = "no PostgreSQL for this test: set " + EnvDSN + "=postgres://user@host/db (a role that may create databases), or install PostgreSQL's server (initdb, postgres) so the tests start a throw-away cluster"

var (
	mainCalled atomic.Bool
	once       sync.Once
	clu        *cluster // the throw-away cluster, once started
	adminDSN   string   // where databases are created; "" when there is no server
	startErr   error
	dbSeq      atomic.Int64
	createMu   sync.Mutex // CREATE DATABASE copies template1: one at a time
)

// Main runs the package's tests (m.Run) and then stops the throw-away cluster, if one was
// started. Call it from TestMain: func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }.
func Main(m *testing.M) int {
	mainCalled.Store(true)
	code := m.Run()
	if clu != nil {
		if err := clu.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: stopping the throw-away cluster: %v\n", err)
		}
	}
	return code
}

// DSN returns the connection string of a new, empty database for t, which is dropped when t ends;
// or skips t (Hint) when there is no server. A server that is there but fails fails t.
func DSN(t testing.TB) string {
	t.Helper()
	once.Do(setup)
	if startErr != nil {
		t.Fatalf("pgtest: %v", startErr)
	}
	if adminDSN == "" {
		t.Skip(Hint)
	}
	name := fmt.Sprintf("starplan_test_%d_%d", os.Getpid(), dbSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		t.Fatalf("pgtest: connecting to %s: %v", redact(adminDSN), err)
	}
	defer conn.Close(ctx)
	createMu.Lock()
	_, err = conn.Exec(ctx, "CREATE DATABASE "+name+" TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'")
	createMu.Unlock()
	if err != nil {
		t.Fatalf("pgtest: creating database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, adminDSN)
		if err != nil {
			t.Errorf("pgtest: dropping database %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: dropping database %s: %v", name, err)
		}
	})
	return withDatabase(adminDSN, name)
}

// setup decides where the tests' databases live, starting the cluster when it must.
func setup() {
	var bin string
	adminDSN, bin = choose(os.Getenv, findBin)
	if bin == "" {
		return
	}
	if !mainCalled.Load() {
		startErr = errors.New("PostgreSQL's binaries are here but the test binary would leave its cluster running: call pgtest.Main from the package's TestMain")
		return
	}
	clu, startErr = start(bin)
	if startErr == nil {
		adminDSN = clu.dsn("postgres")
	}
}

// choose returns the server the environment names, or else the directory of the binaries to
// start one with; neither when there is none (the tests skip).
func choose(getenv func(string) string, findBin func() string) (dsn, bin string) {
	if dsn := getenv(EnvDSN); dsn != "" {
		return dsn, ""
	}
	return "", findBin()
}

// findBin returns the directory holding initdb and postgres, or "".
func findBin() string {
	if p, err := exec.LookPath("initdb"); err == nil {
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, dir := range dirs {
		_, e1 := os.Stat(filepath.Join(dir, "initdb"))
		_, e2 := os.Stat(filepath.Join(dir, "postgres"))
		if e1 == nil && e2 == nil {
			return dir
		}
	}
	return ""
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// cluster is a running throw-away PostgreSQL.
type cluster struct {
	dir  string // holds data/ and the socket
	cmd  *exec.Cmd
	done chan error
}

// Superuser is the role initdb makes in the throw-away cluster.
const Superuser = "starplan"

func (c *cluster) dsn(db string) string {
	return fmt.Sprintf("host=%s port=5432 user=%s dbname=%s sslmode=disable", c.dir, Superuser, db)
}

// start runs initdb in a new temporary directory and starts postgres on a socket in it.
func start(bin string) (*cluster, error) {
	// A unix socket's path is at most 107 bytes: keep the directory short whatever TMPDIR is.
	base := os.TempDir()
	if len(base) > 40 {
		base = "/tmp"
	}
	dir, err := os.MkdirTemp(base, "starplan-pg-")
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if cred != nil {
		// The cluster's user must reach its directory.
		if err := os.Chmod(dir, 0o777); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	c := &cluster{dir: dir, done: make(chan error, 1)}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", filepath.Join(dir, "data"), "-U", Superuser,
		"--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb failed: %v\n%s", err, out)
	}
	log, err := os.Create(filepath.Join(dir, "postgres.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer log.Close()
	if cred != nil {
		os.Chown(log.Name(), int(cred.Uid), int(cred.Gid))
	}
	c.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", filepath.Join(dir, "data"), "-k", dir,
		"-c", "listen_addresses=", "-c", "fsync=off", "-c", "full_page_writes=off",
		"-c", "synchronous_commit=off", "-c", "max_connections=200")
	c.cmd.Stdout, c.cmd.Stderr = log, log
	// The server dies with the test binary (SIGQUIT: an immediate stop) even when Main never
	// gets to stop it. The signal is sent when the thread that started it ends: keep it.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread lives as long as the server
		if err := c.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		c.done <- c.cmd.Wait()
	}()
	if err := <-started; err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting postgres: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, c.dsn("postgres"))
		if err == nil {
			conn.Close(ctx)
			return c, nil
		}
		select {
		case werr := <-c.done:
			logText, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
			os.RemoveAll(dir)
			return nil, fmt.Errorf("postgres exited (%v) before it accepted connections:\n%s", werr, logText)
		case <-ctx.Done():
			c.stop()
			return nil, fmt.Errorf("postgres did not accept connections within a minute: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// credential is whom initdb and postgres run as: nil (this process's user) unless it is root,
// which initdb refuses; then the user postgres, or nobody.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 == nil && err2 == nil {
			return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
		}
	}
	return nil, errors.New("running as root, and there is no user postgres or nobody to run the throw-away cluster as (initdb refuses root); run the tests as another user or set " + EnvDSN)
}

// stop shuts the server down (fast: SIGINT) and removes its directory.
func (c *cluster) stop() error {
	var err error
	if c.cmd != nil && c.cmd.Process != nil {
		c.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-c.done:
		case <-time.After(30 * time.Second):
			c.cmd.Process.Kill()
			<-c.done
			err = errors.New("postgres did not stop within 30 s; killed")
		}
	}
	if rerr := os.RemoveAll(c.dir); rerr != nil && err == nil {
		err = rerr
	}
	return err
}

// withDatabase returns dsn (a URL or key=value form) naming database db instead (in key=value
// form a later setting wins).
func withDatabase(dsn, db string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		rest := dsn[strings.Index(dsn, "//")+2:]
		q := ""
		if i := strings.IndexByte(rest, '?'); i >= 0 {
			rest, q = rest[:i], rest[i:]
		}
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			rest = rest[:i]
		}
		return dsn[:strings.Index(dsn, "//")+2] + rest + "/" + db + q
	}
	return dsn + " dbname=" + db
}

// redact hides a password in a DSN for messages.
func redact(dsn string) string {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil || cfg.Password == "" {
		return dsn
	}
	return strings.ReplaceAll(dsn, cfg.Password, "***")
}
