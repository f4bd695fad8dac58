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
	t.Parallel()
	s := newSession(t)
	require.Equal(t, ExitOK, s.run(false, "", "db", "init").code)
	before, err := os.ReadFile(s.dbFile())
	require.NoError(t, err)
	dumpBefore := s.run(false, "", "db", "dump", "--json").out

	var csv strings.Builder
	csv.WriteString("item_id,name,description,quantity_in_stock,price\n")
	for i := range 3000 {
		fmt.Fprintf(&csv, "SG%06d,Item %d,a row that needs the file to grow,1,2.5\n", i+100, i)
	}
	big := writeFile(t, "big.csv", csv.String())

	args, err := json.Marshal([]string{"--db", s.dir, "db", "import", "inventory", big})
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperFileSizeLimit$", "-test.count=1")
	cmd.Env = append(os.Environ(), "STARPLAN_TEST_FSIZE="+strconv.Itoa(len(before)), "STARPLAN_TEST_ARGS="+string(args), "GORACE=atexit_sleep_ms=0")
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

// A batched import that fills the disk after some batches were committed says on both streams
// what they wrote, that the failed batch and those after it were not written (never "nothing was
// written"), and how to import the rest; running it again does.
func TestABatchedImportOnAFullDiskSaysWhatItWrote(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	require.Equal(t, ExitOK, s.run(false, "", "db", "init").code)
	var csv strings.Builder
	csv.WriteString("item_id,name,description,quantity_in_stock,price\n")
	for i := range 4000 {
		fmt.Fprintf(&csv, "SG%06d,Item %d,a row that needs the file to grow,1,2.5\n", i+100, i)
	}
	big := writeFile(t, "big.csv", csv.String())

	// Room for the first batch of 1000 rows, not for all 4000.
	args, err := json.Marshal([]string{"--db", s.dir, "db", "import", "inventory", big, "--batch", "1000"})
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperFileSizeLimit$", "-test.count=1")
	cmd.Env = append(os.Environ(), "STARPLAN_TEST_FSIZE="+strconv.Itoa(1200<<10), "STARPLAN_TEST_ARGS="+string(args), "GORACE=atexit_sleep_ms=0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "stdout: %s\nstderr: %s", stdout.String(), stderr.String())
	assert.Equal(t, ExitInternal, ee.ExitCode(), stderr.String())

	var inserted, commits int
	_, err = fmt.Sscanf(stdout.String(), "imported "+big+" into inventory, in part: %d inserted, 0 updated, 0 unchanged (%d commit", &inserted, &commits)
	require.NoError(t, err, "stdout: %s\nstderr: %s", stdout.String(), stderr.String())
	require.Positive(t, commits, "the limit leaves room for a batch")
	require.Less(t, inserted, 4000, "the limit leaves no room for every batch")
	assert.Contains(t, stdout.String(), fmt.Sprintf("; the records after the first %d were not imported\n", inserted))
	assert.Contains(t, stderr.String(), "Error: importing "+big+": writing "+s.dbFile()+" failed: ")
	assert.Contains(t, stderr.String(), fmt.Sprintf("file too large; the first %d records were imported (in %d commit", inserted, commits))
	assert.Contains(t, stderr.String(), "the batch that failed and none after it")
	assert.NotContains(t, stderr.String(), "nothing was written")
	assert.Contains(t, stderr.String(), "Try: make room on the disk that holds "+s.dbFile()+" (or raise its quota), then run the same import again")
	assert.Contains(t, s.run(false, "", "db", "dump").out, fmt.Sprintf("inventory (%d rows)", 6+inserted), "what stdout says was written is in the store")

	o := s.run(false, "", "db", "import", "inventory", big, "--batch", "1000")
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Contains(t, o.out, fmt.Sprintf(": %d inserted, 0 updated, 0 deleted, %d unchanged", 4000-inserted, inserted))
}
