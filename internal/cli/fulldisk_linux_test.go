//go:build linux

package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestHelperFileSizeLimit is not a test: TestImportOnAFullDiskExitsOne re-executes the test
// binary to run it as a starplan process whose files may not grow past STARPLAN_TEST_FSIZE
// bytes (RLIMIT_FSIZE), which is how a full disk looks to a writer: a write past the limit fails
// with EFBIG. SIGXFSZ, which the kernel also sends, is ignored, as a process must to see the
// error.
func TestHelperFileSizeLimit(t *testing.T) {
	limit := os.Getenv("STARPLAN_TEST_FSIZE")
	if limit == "" {
		t.Skip("helper process only")
	}
	n, err := strconv.ParseUint(limit, 10, 64)
	if err != nil {
		panic(err)
	}
	var args []string
	if err := json.Unmarshal([]byte(os.Getenv("STARPLAN_TEST_ARGS")), &args); err != nil {
		panic(err)
	}
	signal.Ignore(syscall.SIGXFSZ)
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: n, Max: n}); err != nil {
		panic(err)
	}
	os.Exit(Main(args, IOStreams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr, Getenv: func(string) string { return "" }}))
}

// A full disk during import exits 1 with an I/O message (not 2 with "fix the row"), and the
// store is as it was.
func TestImportOnAFullDiskExitsOne(t *testing.T) {
	s := newSession(t)
	require.Equal(t, ExitOK, s.run(false, "", "db", "init").code)
	before, err := os.ReadFile(s.dbFile())
	require.NoError(t, err)
	dumpBefore := s.run(false, "", "db", "dump", "--json").out

	var csv strings.Builder
	csv.WriteString("item_id,name,description,quantity_in_stock,price\n")
	for i := range 20000 {
		fmt.Fprintf(&csv, "SG%06d,Item %d,a row that needs the file to grow,1,2.5\n", i+100, i)
	}
	big := writeFile(t, "big.csv", csv.String())

	args, err := json.Marshal([]string{"--db", s.dir, "db", "import", "inventory", big})
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperFileSizeLimit$", "-test.count=1")
	cmd.Env = append(os.Environ(), "STARPLAN_TEST_FSIZE="+strconv.Itoa(len(before)), "STARPLAN_TEST_ARGS="+string(args))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "stdout: %s\nstderr: %s", stdout.String(), stderr.String())
	assert.Equal(t, ExitInternal, ee.ExitCode(), stderr.String())
	assert.Contains(t, stderr.String(), "Error: importing "+big+": ")
	assert.Contains(t, stderr.String(), "Error: importing "+big+": writing "+s.dbFile()+" failed: ")
	assert.Contains(t, stderr.String(), "file too large")
	assert.Contains(t, stderr.String(), "Try: make room on the disk")
	assert.NotContains(t, stderr.String(), "fix the row")
	assert.Empty(t, stdout.String())

	after, err := os.ReadFile(s.dbFile())
	require.NoError(t, err)
	assert.Equal(t, before, after, "the store's file is unchanged")
	assert.Equal(t, dumpBefore, s.run(false, "", "db", "dump", "--json").out)
	o := s.run(false, "", "db", "check")
	assert.Equal(t, ExitOK, o.code, o.out)
}
