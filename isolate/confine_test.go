//go:build linux

package isolate

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/starplan/starplan/sandbox"
)

// TestWorkerIsConfined reads what the kernel says about a live worker: no capability on any
// thread, no_new_privs and a seccomp filter on every thread, an unprivileged user when the pool
// runs as root, no descriptor but its pipes and the Go runtime's own, and an empty working
// directory that no longer exists. The pool's process holds a descriptor without
// close-on-exec when the worker starts, as a parent may have inherited one, and the worker's
// environment claims that it is confined already.
func TestWorkerIsConfined(t *testing.T) {
	leaked, err := os.Create(filepath.Join(t.TempDir(), "leaked"))
	require.NoError(t, err)
	defer leaked.Close()
	_, err = unix.FcntlInt(leaked.Fd(), unix.F_SETFD, 0)
	require.NoError(t, err)

	p := newPool(t, Options{Warm: 1, MaxWorkers: 1, Env: []string{confinedEnv + "=1"}})
	require.NoError(t, leaked.Close())
	assert.Empty(t, p.Warnings(), "every confinement applies on this machine")
	st := openStore(t)
	j, _ := job(st, `n = len(inventory_tbl)`, sandbox.Limits{})
	res := p.Run(bg, j)
	require.Equal(t, sandbox.OutcomeOK, res.Outcome, res.Diagnostics.String())
	pid := onlyWorker(t, p).cmd.Process.Pid

	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	require.NoError(t, err)
	require.NotEmpty(t, tasks)
	for _, task := range tasks {
		b, err := os.ReadFile(task)
		require.NoError(t, err)
		status := string(b)
		for _, set := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
			assert.Regexp(t, `(?m)^`+set+`:\s+0+$`, status, "%s of %s", set, task)
		}
		assert.Regexp(t, `(?m)^NoNewPrivs:\s+1$`, status, task)
		assert.Regexp(t, `(?m)^Seccomp:\s+2$`, status, task)
		if os.Geteuid() == 0 {
			assert.Regexp(t, `(?m)^Uid:\s+65534\s+65534\s+65534\s+65534$`, status, task)
			assert.Regexp(t, `(?m)^Gid:\s+65534\s+65534\s+65534\s+65534$`, status, task)
			assert.Regexp(t, `(?m)^Groups:\s*$`, status, task)
		}
	}

	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	require.NoError(t, err)
	// Besides its pipes, the worker holds only what the Go runtime opens for itself (its poller
	// and, where there is one, its cgroup's processor limit) and its own /proc status.
	runtimes := regexp.MustCompile(`^(anon_inode:\[(eventpoll|eventfd)\]|/sys/fs/cgroup/.*cpu[^/]*|/proc/` + fmt.Sprint(pid) + `/status)$`)
	for _, fd := range fds {
		target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		require.NoError(t, err)
		switch fd.Name() {
		case "0", "1", "2":
			assert.True(t, strings.HasPrefix(target, "pipe:"), "descriptor %s is %s", fd.Name(), target)
		default:
			assert.Regexp(t, runtimes, target, "descriptor %s", fd.Name())
		}
	}

	mine, err := os.Getwd()
	require.NoError(t, err)
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	require.NoError(t, err)
	assert.NotEqual(t, mine, cwd)
	assert.True(t, strings.HasSuffix(cwd, " (deleted)"), "the working directory %s was removed", cwd)
	_, err = os.ReadDir(fmt.Sprintf("/proc/%d/cwd", pid))
	assert.ErrorIs(t, err, fs.ErrNotExist, "a removed directory lists nothing")
	_, err = os.Create(fmt.Sprintf("/proc/%d/cwd/file", pid))
	assert.ErrorIs(t, err, fs.ErrNotExist, "and nothing can be created in it, even by root")
}

// TestWorkerThatCannotReexecute: a worker whose binary its unprivileged user may not execute
// cannot start a second time; it says so once and still runs plans, as that user, without
// capabilities and under its filter.
func TestWorkerThatCannotReexecute(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only a worker started as root changes user before it re-executes itself")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	bin, err := os.ReadFile(exe)
	require.NoError(t, err)
	private := filepath.Join(t.TempDir(), "isolate.test")
	require.NoError(t, os.WriteFile(private, bin, 0o700))

	p, err := NewPool(Options{Command: []string{private}, Env: []string{workerEnv + "=1"}, Warm: 1, MaxWorkers: 1})
	require.NoError(t, err)
	defer p.Close()
	warnings := p.Warnings()
	require.Len(t, warnings, 1, "%q", warnings)
	assert.Contains(t, warnings[0], "could not re-execute itself")
	assert.Contains(t, warnings[0], "permission denied")

	st := openStore(t)
	j, _ := job(st, `n = len(inventory_tbl)`, sandbox.Limits{})
	res := p.Run(bg, j)
	require.Equal(t, sandbox.OutcomeOK, res.Outcome, res.Diagnostics.String())
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", onlyWorker(t, p).cmd.Process.Pid))
	require.NoError(t, err)
	assert.Regexp(t, `(?m)^Uid:\s+65534\s+65534\s+65534\s+65534$`, string(b))
	assert.Regexp(t, `(?m)^CapEff:\s+0+$`, string(b))
	assert.Regexp(t, `(?m)^Seccomp:\s+2$`, string(b))
}
