package bolt

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/starplan/starplan/internal/testtier"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
	"github.com/stretchr/testify/require"
)

// stageSmall makes imports of more than 100 rows staged, in commits of 64 rows, with merges of
// 100 entries a commit, until the test ends, and returns the count of each kind of staging
// commit (see afterStage). Not for parallel tests: the sizes are package variables.
func stageSmall(t *testing.T) map[string]int {
	minWas, batchWas, chunkWas := stagedMin, stageBatch, mergeChunk
	stagedMin, stageBatch, mergeChunk = 100, 64, 100
	commits := map[string]int{}
	afterStage = func(kind string) { commits[kind]++ }
	t.Cleanup(func() { stagedMin, stageBatch, mergeChunk, afterStage = minWas, batchWas, chunkWas, nil })
	return commits
}

// The orders of stagedFile's rows.
const (
	inOrder  = "sorted"
	shuffled = "shuffled"
	nearly   = "nearly" // in key order but for every 16th of the first 1,024, moved to the end
)

// stagedFile writes a JSON file of n benchItem rows in an order (above), the bad-th (1-based;
// 0: none) with a stock that is not a number, and returns its path.
func stagedFile(t testing.TB, dir string, n, bad int, order string) string {
	var b bytes.Buffer
	rng := rand.New(rand.NewPCG(32, uint64(n)))
	ids := make([]int, 0, n)
	var moved []int
	for i := 1; i <= n; i++ {
		if order == nearly && i%16 == 0 && i <= 1024 {
			moved = append(moved, i)
		} else {
			ids = append(ids, i)
		}
	}
	ids = append(ids, moved...)
	if order == shuffled {
		rng.Shuffle(n, func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	}
	b.WriteString("[")
	for i := 1; i <= n; i++ {
		if i > 1 {
			b.WriteString(",")
		}
		row := benchItem(rng, ids[i-1])
		if i == bad {
			row["quantity_in_stock"] = "many"
		}
		line, err := json.Marshal(row)
		require.NoError(t, err)
		b.WriteString("\n  ")
		b.Write(line)
	}
	b.WriteString("\n]\n")
	path := filepath.Join(dir, fmt.Sprintf("rows-%d-%d-%s.json", n, bad, order))
	require.NoError(t, os.WriteFile(path, b.Bytes(), 0o644))
	return path
}

// importFile imports path into inventory in one Import.
func importFile(s *Store, path string) (ImportResult, error) {
	f, err := os.Open(path)
	if err != nil {
		return ImportResult{}, err
	}
	defer f.Close()
	return s.Import(bg, "inventory", f, JSON, Upsert)
}

// stagingLeft reports whether the store in dir (closed) holds a staging bucket.
func stagingLeft(t *testing.T, dir string) bool {
	db, err := bbolt.Open(filepath.Join(dir, "data.db"), 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	require.NoError(t, err)
	defer db.Close()
	left := false
	require.NoError(t, db.View(func(tx *bbolt.Tx) error {
		left = tx.Bucket([]byte(stagingBucket)) != nil
		return nil
	}))
	return left
}

// checkClean runs db check's Check on the closed store in dir and fails on any problem.
func checkClean(t *testing.T, dir string) {
	rep, err := Check(dir, store.CheckOptions{})
	require.NoError(t, err)
	require.True(t, rep.OK(), "db check: %+v", rep.Problems)
}

func dumpOf(t *testing.T, s *Store) string {
	var b bytes.Buffer
	require.NoError(t, s.Dump(&b))
	return b.String()
}

// TestStagedImportAllOrNothing imports a file large enough to be staged, in key order and
// shuffled: whole, it is one commit that db check finds clean and that dumps as one unstaged
// commit of it does; with a bad row at its end (after every staging commit) the store is as
// before and holds nothing staged (nor the file of sorted runs), and the same import then
// succeeds.
func TestStagedImportAllOrNothing(t *testing.T) {
	for _, order := range []string{inOrder, shuffled, nearly} {
		t.Run(order, func(t *testing.T) { stagedAllOrNothing(t, order) })
	}
}

func stagedAllOrNothing(t *testing.T, order string) {
	commits := stageSmall(t)
	n := 1000
	files := t.TempDir()
	good, bad := stagedFile(t, files, n, 0, order), stagedFile(t, files, n, n, order)
	onlyData := func(dir string) {
		t.Helper()
		ents, err := os.ReadDir(dir)
		require.NoError(t, err)
		for _, e := range ents {
			require.NotContains(t, e.Name(), "import-runs", "the sorted runs' file is left")
		}
	}

	dir := t.TempDir()
	s, err := Open(dir, Options{NoSeed: true})
	require.NoError(t, err)
	before, seq := dumpOf(t, s), s.seq
	_, err = importFile(s, bad)
	var ie *ImportErrors
	require.ErrorAs(t, err, &ie)
	require.Contains(t, err.Error(), fmt.Sprintf("record %d", n))
	require.Greater(t, commits["stage"], 10, "the import was not staged")
	require.Equal(t, before, dumpOf(t, s), "a failed import changed the store")
	require.Equal(t, seq, s.seq)
	onlyData(dir)
	require.NoError(t, s.Close())
	require.False(t, stagingLeft(t, dir), "a failed import left its staged rows")
	checkClean(t, dir)

	s, err = Open(dir, Options{NoSeed: true})
	require.NoError(t, err)
	clear(commits)
	res, err := importFile(s, good)
	require.NoError(t, err)
	require.Equal(t, ImportResult{Inserted: n, Commits: 1}, res)
	require.Equal(t, seq+1, s.seq, "the import is one commit")
	// The name index lands everywhere in any order (benchItem's names start with a random
	// word): it is merged from its runs, 1,000 entries in commits of 100, into a new bucket
	// moved in place by one more commit; shuffled, the keys and the item_id index are too.
	// Nearly in order, the keys' runs (the 64 rows moved to the end) are few beside the entries
	// put directly: they are put into the bucket.
	want := map[string]int{inOrder: 11, shuffled: 3 * 11, nearly: 11}[order]
	require.Equal(t, want, commits["merge"], "merge commits")
	if order == nearly {
		require.Positive(t, commits["put"], "no runs were put into their bucket")
	}
	after := dumpOf(t, s)
	row, ok := committed(t, s, "inventory", "SG500")
	require.True(t, ok)
	onlyData(dir)
	require.NoError(t, s.Close())
	require.False(t, stagingLeft(t, dir))
	checkClean(t, dir)

	// The same rows imported in one commit, unstaged, dump the same.
	stagedMin = n + 1
	ref := t.TempDir()
	r, err := Open(ref, Options{NoSeed: true})
	require.NoError(t, err)
	_, err = importFile(r, good)
	require.NoError(t, err)
	require.Equal(t, dumpOf(t, r), after)
	require.NoError(t, r.Close())

	s, err = Open(dir, Options{NoSeed: true})
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, after, dumpOf(t, s), "the rows read back after Open")
	require.Len(t, find(t, tbl(t, s.Stage(), "inventory"), table.Query{Where: where("name", row["name"])}), 1, "the index buckets hold the staged rows")
}

// TestHelperStagedImport is not a test: TestKillDuringStagedImport runs the test binary as a
// process that imports a file, staged, telling its parent of each staging commit.
func TestHelperStagedImport(t *testing.T) {
	path := os.Getenv("STARPLAN_STAGED_IMPORT")
	if path == "" {
		t.Skip("helper process only")
	}
	stagedMin, stageBatch, mergeChunk = 100, 64, 250
	s, err := Open(os.Getenv("STARPLAN_STORE_DIR"), Options{NoSeed: true})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	afterStage = func(string) { os.Stdout.WriteString(".") }
	os.Stdout.WriteString("ready\n")
	if _, err := importFile(s, path); err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	s.Close()
	os.Stdout.WriteString("done\n")
	os.Exit(0)
}

// TestKillDuringStagedImport SIGKILLs a process importing a shuffled file, staged, before its
// first staging commit, after some, after the last, while its sorted runs are merged, after the
// last merge and at random: the store opens holding none of the file or all of it, nothing
// staged is left once it is opened, and db check finds it clean.
func TestKillDuringStagedImport(t *testing.T) {
	n := testtier.Size(1000, 5000)
	path := stagedFile(t, t.TempDir(), n, 0, shuffled)
	// Shuffled, the keys bucket and both indexes are merged from sorted runs after the staging
	// commits: (n+249)/250 commits of 250 entries and one that moves the merged bucket, each.
	staging, merging := (n-1)/64+1, 3*((n+249)/250+1)
	commits := staging + merging
	rng := rand.New(rand.NewPCG(7, uint64(time.Now().UnixNano())))
	points := []int{0, 1, staging / 2, staging, staging + merging/2, commits - 1, commits}
	for range testtier.Size(3, 20) {
		points = append(points, rng.IntN(commits+1))
	}
	sawAll, sawNone := false, false
	for i, after := range points {
		dir := t.TempDir()
		s, err := Open(dir, Options{NoSeed: true})
		require.NoError(t, err)
		require.NoError(t, s.Close())
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperStagedImport$", "-test.count=1")
		cmd.Env = append(os.Environ(), "STARPLAN_STAGED_IMPORT="+path, "STARPLAN_STORE_DIR="+dir, "GORACE=atexit_sleep_ms=0")
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		r := bufio.NewReader(stdout)
		line, err := r.ReadString('\n')
		require.NoError(t, err, "kill %d: child output %q", i, line)
		require.Equal(t, "ready\n", line)
		for range after {
			if c, err := r.ReadByte(); err != nil || c != '.' {
				break
			}
		}
		time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()

		s, err = Open(dir, Options{NoSeed: true})
		require.NoError(t, err, "kill %d (after %d staging commits): the store must open", i, after)
		got := tbl(t, s.Stage(), "inventory").Len()
		require.True(t, got == 0 || got == n, "kill %d (after %d staging commits): %d rows of %d: a partial import", i, after, got, n)
		sawAll, sawNone = sawAll || got == n, sawNone || got == 0
		require.NoError(t, s.Close())
		require.False(t, stagingLeft(t, dir), "kill %d: staged rows left after Open", i)
		checkClean(t, dir)
	}
	t.Logf("%d kills: all rows seen %v, none seen %v", len(points), sawAll, sawNone)
	require.True(t, sawNone, "no kill landed before the import's last commit")
}

// TestScatteredBatch: a staged import's batch of entries goes to a sorted run when putting it
// would rewrite more of the bucket's entries than it has, and is put directly when it lands in
// few pages, however many places among them.
func TestScatteredBatch(t *testing.T) {
	db, err := bbolt.Open(filepath.Join(t.TempDir(), "x.db"), 0o600, nil)
	require.NoError(t, err)
	defer db.Close()
	key := func(i int) []byte { return fmt.Appendf(nil, "k%06d", i) }
	batch := func(from, step, n int) []keyOp {
		ops := make([]keyOp, n)
		for i := range ops {
			ops[i] = keyOp{key: key(from + i*step), value: []byte("0123456789")}
		}
		return ops
	}
	require.NoError(t, db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucket([]byte("b"))
		require.NoError(t, err)
		for i := 0; i < 80_000; i += 2 { // the even numbers
			require.NoError(t, b.Put(key(i), []byte("0123456789")))
		}
		page := db.Info().PageSize
		for _, c := range []struct {
			name string
			ops  []keyOp
			want bool
		}{
			{"one place", batch(50_001, 0, 1), false},
			{"every gap of a few pages", batch(50_001, 2, 500), false},
			{"a place every eight entries", batch(50_001, 16, 500), true},
			{"across the bucket", batch(1, 159, 500), true},
			{"some in a few pages, some appended", append(batch(50_001, 2, 200), batch(300_000, 1, 200)...), false},
		} {
			require.Equal(t, c.want, scattered(b.Cursor(), c.ops, page), c.name)
		}
		return nil
	}))
}
