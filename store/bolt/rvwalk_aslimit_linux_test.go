package bolt

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// rvwalkASChild names the store directory the child of TestRvwalkAStoreOpensUnderAnAddressSpaceLimit
// opens under its limit.
const rvwalkASChild = "STARPLAN_RVWALK_AS_CHILD"

// vmSize is the process's address space in use (VmSize of /proc/self/status), in bytes.
func vmSize(t testing.TB) uint64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmSize:"); ok {
			var kb uint64
			_, err := fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), &kb)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmSize in /proc/self/status")
	return 0
}

// A store of 16 MiB or more is mapped a GiB past its end (mapAhead): address space, which a
// process limited by RLIMIT_AS (ulimit -v, systemd's LimitAS=) may not have, while the file
// itself maps in a few dozen MiB. Open then fails in mmap with ENOMEM ("cannot allocate
// memory") where it opened before the map ahead; it must open mapped as bbolt maps it. The
// child process limits itself to what it uses and 512 MiB more, and opens the store.
func TestRvwalkAStoreOpensUnderAnAddressSpaceLimit(t *testing.T) {
	if dir := os.Getenv(rvwalkASChild); dir != "" {
		limit := vmSize(t) + 512<<20
		require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: limit, Max: limit}))
		s, err := Open(dir, Options{})
		require.NoError(t, err, "a store of 20 MiB under an address space limit of %d MiB", limit>>20)
		_, ok, err := tbl(t, s.Stage(), "inventory").Get("SG000100")
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, s.Close())
		return
	}
	if raceOn {
		t.Skip("the race detector's shadow memory takes address space as the process runs: no limit on it holds")
	}
	t.Parallel()
	dir := bigInventory(t, 300)
	s := openAt(t, dir)
	require.NoError(t, s.PutSysDocs(bg, bigDocs("pad", 20<<20)...))
	require.NoError(t, s.Close())
	st, err := os.Stat(filepath.Join(dir, dbFileName))
	require.NoError(t, err)
	require.GreaterOrEqual(t, st.Size(), int64(mapAheadMin))

	cmd := exec.Command(os.Args[0], "-test.run=^TestRvwalkAStoreOpensUnderAnAddressSpaceLimit$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), rvwalkASChild+"="+dir)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the child:\n%s", out)
}
