package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/bolt"
)

func (s *session) dbFile() string { return filepath.Join(s.dir, "data.db") }

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

// Reads never create state: on a missing store they say so, and create nothing.
func TestReadsNeverCreateAStore(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"runs"}, {"runs", "show", "r_0123456789"}, {"apply", "r_0123456789"},
		{"db", "dump"}, {"db", "export", "inventory"}, {"db", "check"},
	} {
		s := newSession(t)
		o := s.run(false, "", args...)
		assert.Equal(t, ExitUsage, o.code, "%v: %s", args, o.err)
		assert.Contains(t, o.err, "Error: no store at "+s.dir, args)
		assert.Contains(t, o.err, "Try: run starplan db init", args)
		_, err := os.Stat(s.dir)
		assert.True(t, os.IsNotExist(err), "%v created %s", args, s.dir)
	}
}

func TestEmptyDBFlagIsAUsageError(t *testing.T) {
	for _, args := range [][]string{{"--db=", "db", "dump"}, {"db", "init", "--db="}, {"--db", "", "exec", example("01_round_under_100.star")}} {
		wd, home := t.TempDir(), t.TempDir()
		t.Chdir(wd)
		s := &session{t: t}
		o := s.runRaw(home, args...)
		assert.Equal(t, ExitUsage, o.code, "%v: %s", args, o.err)
		assert.Contains(t, o.err, "Error: --db is empty", args)
		for _, dir := range []string{wd, home} {
			ents, err := os.ReadDir(dir)
			require.NoError(t, err)
			assert.Empty(t, ents, "%v wrote into %s", args, dir)
		}
	}
}

func TestDBInit(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	o := s.run(false, "", "db", "init")
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Contains(t, o.err, "seeded new store at "+s.dir)
	o = s.run(false, "", "db", "init", "--empty")
	assert.Equal(t, ExitUsage, o.code)
	assert.Contains(t, o.err, "a store already exists at "+s.dir+"; nothing was changed")
	assert.Contains(t, s.run(false, "", "db", "dump").out, "inventory (6 rows)", "the second init changed nothing")

	s = newSession(t)
	o = s.run(false, "", "db", "init", "--empty")
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Contains(t, o.err, "created new store at "+s.dir+" with empty inventory tables")
	o = s.run(false, "", "db", "dump")
	assert.Contains(t, o.out, "inventory (0 rows)")
	assert.Contains(t, o.out, "transactions (0 rows)")
}

// An import into a new store holds exactly the imported rows, never the demo rows.
func TestDBImportIntoANewStoreHoldsOnlyTheImportedRows(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	good := writeFile(t, "good.csv", "item_id,name,description,quantity_in_stock,price\nSG007,Cat Eye,Pointed,5,75\n")
	o := s.run(false, "", "db", "import", "inventory", good)
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Contains(t, o.err, "created new store at "+s.dir+" with empty inventory tables")
	o = s.run(false, "", "db", "dump")
	assert.Contains(t, o.out, "inventory (1 row)")
	assert.Contains(t, o.out, "transactions (0 rows)")
	assert.NotContains(t, o.out, "Aviator")
	o = s.run(true, "", "db", "check")
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Regexp(t, `(?m)^  inventory +1 row$`, o.out)
	assert.Regexp(t, `(?m)^  transactions +0 rows$`, o.out)
}

// db import --batch writes a commit per batch, says what a failed import left and how to finish
// it, and refuses what it cannot do in batches.
func TestDBImportInBatches(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	header := "item_id,name,description,quantity_in_stock,price\n"
	rows := "SG101,A,a,1,1\nSG102,B,b,2,2\nSG103,C,c,3,3\nSG104,D,d,4,4\nSG105,E,e,5,5\n"
	bad := writeFile(t, "bad.csv", header+strings.Replace(rows, "SG104,D,d,4,4", "SG104,D,d,four,4", 1))
	o := s.run(false, "", "db", "import", "inventory", bad, "--batch", "2")
	assert.Equal(t, ExitUsage, o.code, o.err)
	assert.Equal(t, "imported "+bad+" into inventory, in part: 2 inserted, 0 updated, 0 unchanged (1 commit); the records after the first 2 were not imported\n", o.out)
	assert.Contains(t, o.err, `record 4, line 5, column 11: field "quantity_in_stock"`)
	assert.Contains(t, o.err, "the first 2 records were imported (in 1 commit), none after them")
	assert.NotContains(t, o.err, "nothing was written")
	assert.Contains(t, o.err, "Try: fix the rows named above and run the same import again: it finds the rows already written unchanged")
	assert.Contains(t, s.run(false, "", "db", "dump").out, "inventory (2 rows)")

	good := writeFile(t, "good.csv", header+rows)
	o = s.run(false, "", "db", "import", "inventory", good, "--batch", "2")
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Equal(t, "imported "+good+" into inventory: 3 inserted, 0 updated, 0 deleted, 2 unchanged (2 commits)\n", o.out)
	assert.Contains(t, s.run(false, "", "db", "dump").out, "inventory (5 rows)")

	one := writeFile(t, "one.csv", header+"SG106,F,f,6,6\n")
	o = s.run(false, "", "db", "import", "inventory", one)
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Equal(t, "imported "+one+" into inventory: 1 inserted, 0 updated, 0 deleted, 0 unchanged\n", o.out, "one commit, as ever")
	seven := writeFile(t, "seven.csv", header+"SG107,G,g,7,7\n")
	o = s.run(false, "", "db", "import", "inventory", seven, "--batch", "2")
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Equal(t, "imported "+seven+" into inventory: 1 inserted, 0 updated, 0 deleted, 0 unchanged (1 commit)\n", o.out)

	o = s.run(false, "", "db", "import", "inventory", good, "--batch", "2", "--replace")
	assert.Equal(t, ExitUsage, o.code)
	assert.Contains(t, o.err, "--replace cannot import in batches")
	o = s.run(false, "", "db", "import", "inventory", good, "--batch", "-1")
	assert.Equal(t, ExitUsage, o.code)
	assert.Contains(t, o.err, "--batch -1: want a number of records")
}

// damage replaces the session store's data.db with what f makes of it.
func (s *session) damage(f func(b []byte) []byte) []byte {
	s.t.Helper()
	b, err := os.ReadFile(s.dbFile())
	require.NoError(s.t, err)
	b = f(b)
	require.NoError(s.t, os.WriteFile(s.dbFile(), b, 0o644))
	return b
}

// A damaged store exits 1 with a message naming the file and what to do, never panics (exit 2),
// never seeds over the file and never writes to it.
func TestDamagedStoreExitsOne(t *testing.T) {
	t.Parallel()
	damages := map[string]func([]byte) []byte{
		"empty":     func([]byte) []byte { return []byte{} },
		"truncated": func(b []byte) []byte { return b[:len(b)/2] },
		"overwritten": func(b []byte) []byte {
			for i := len(b) / 4; i < len(b)*3/4; i++ {
				b[i] = 0xAB
			}
			return b
		},
		"newer meta page": func(b []byte) []byte {
			n := 0
			if le64(b[4096+64:]) > le64(b[64:]) {
				n = 1
			}
			b[n*4096+72] ^= 0xFF // the checksum
			return b
		},
	}
	for name, damage := range damages {
		t.Run(name, func(t *testing.T) {
			s := newSession(t)
			require.Equal(t, ExitOK, s.run(false, "", "db", "init").code)
			big := "item_id,name,description,quantity_in_stock,price\n"
			for i := range 1500 {
				big += "SG" + string(rune('A'+i%26)) + itoa(i) + ",Item,a row to fill pages,1,2.5\n"
			}
			o := s.run(false, "", "db", "import", "inventory", writeFile(t, "big.csv", big))
			require.Equal(t, ExitOK, o.code, o.err)
			o = s.run(false, "", "exec", example("02_purchase_wayfarer.star"))
			require.Equal(t, ExitOK, o.code, o.err)
			before := s.damage(damage)
			for _, args := range [][]string{
				{"exec", example("01_round_under_100.star")}, {"runs"}, {"db", "dump"}, {"db", "seed", "--force"},
				{"db", "import", "inventory", writeFile(t, "one.csv", "item_id,name,description,quantity_in_stock,price\nSG999,X,y,1,1\n")},
			} {
				o := s.run(false, "", args...)
				assert.Equal(t, ExitInternal, o.code, "%v: %s", args, o.err)
				assert.Contains(t, o.err, "Error: store file "+s.dbFile()+" is damaged", args)
				assert.Contains(t, o.err, "Try: restore "+s.dbFile()+" from a backup", args)
				assert.NotContains(t, o.err, "seeded", args)
			}
			o = s.run(false, "", "db", "check")
			assert.Equal(t, ExitInternal, o.code, o.err)
			var rep store.CheckReport
			require.NoError(t, json.Unmarshal([]byte(o.out), &rep), o.out)
			assert.NotEmpty(t, rep.Problems)
			after, err := os.ReadFile(s.dbFile())
			require.NoError(t, err)
			assert.Equal(t, before, after, "nothing was written to the damaged file")
		})
	}
}

func le64(b []byte) uint64 {
	var x uint64
	for i := 7; i >= 0; i-- {
		x = x<<8 | uint64(b[i])
	}
	return x
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

func TestDBCheck(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	require.Equal(t, ExitOK, s.run(false, "", "db", "init").code)
	o := s.run(true, "", "db", "check")
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Contains(t, o.out, s.dbFile()+": ")
	assert.Contains(t, o.out, "inventory      6 rows")
	assert.Contains(t, o.out, "No problems found")

	o = s.run(false, "", "db", "check", "--json")
	require.Equal(t, ExitOK, o.code, o.err)
	var rep store.CheckReport
	require.NoError(t, json.Unmarshal([]byte(o.out), &rep))
	assert.True(t, rep.OK())
	assert.Equal(t, []store.TableCount{{Table: "inventory", Rows: 6}, {Table: "transactions", Rows: 1}}, rep.Tables)

	// Rows that fit the schema but break the policy: import checks the schema, check the policy.
	ledger := writeFile(t, "ledger.csv", "transaction_id,customer_name,transaction_summary,transaction_amount,balance_after_transaction,timestamp\n"+
		"TXN001,OPENING_BALANCE,Opening,500,500,2025-01-01T09:00:00\n"+
		"TXN002,Alice,Sale,100,650,2025-01-01T10:00:00\n"+
		"TXN003,Bob,Refund,-700,-50,2025-01-01T11:00:00\n")
	o = s.run(false, "", "db", "import", "transactions", ledger, "--replace")
	require.Equal(t, ExitOK, o.code, o.err)
	o = s.run(true, "", "db", "check")
	assert.Equal(t, ExitInternal, o.code)
	assert.Contains(t, o.out, "policy: balance-chain: new transactions row \"TXN002\" has balance_after_transaction 650.00")
	assert.Contains(t, o.out, "policy: balance-negative:")
	assert.Contains(t, o.err, "Error: 2 problems found in "+s.dbFile())
	o = s.run(false, "", "db", "check")
	assert.Equal(t, ExitInternal, o.code)
	require.NoError(t, json.Unmarshal([]byte(o.out), &rep))
	require.Len(t, rep.Problems, 2)
	assert.Equal(t, store.CheckPolicy, rep.Problems[0].Check)
}

// --bom writes the byte order mark spreadsheets look for, and the file imports back unchanged.
func TestDBExportBOM(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	require.Equal(t, ExitOK, s.run(false, "", "db", "init").code)
	o := s.run(false, "", "db", "export", "inventory", "--format", "csv", "--bom")
	require.Equal(t, ExitOK, o.code, o.err)
	assert.True(t, strings.HasPrefix(o.out, "\ufeffitem_id,"), "%.40q", o.out)
	file := writeFile(t, "inventory.csv", o.out)
	o = s.run(false, "", "db", "import", "inventory", file)
	require.Equal(t, ExitOK, o.code, o.err)
	assert.Contains(t, o.out, "0 inserted, 0 updated, 0 deleted, 6 unchanged")

	o = s.run(false, "", "db", "export", "inventory", "--bom")
	assert.Equal(t, ExitUsage, o.code)
	assert.Contains(t, o.err, "--bom is for CSV")
}

// An unknown table is named as such, with the tables there are, not "fix the rows".
func TestDBUnknownTable(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	require.Equal(t, ExitOK, s.run(false, "", "db", "init").code)
	file := writeFile(t, "x.csv", "item_id\nSG001\n")
	o := s.run(false, "", "db", "import", "inventry", file)
	assert.Equal(t, ExitUsage, o.code)
	assert.Contains(t, o.err, `the store has no table "inventry"`)
	assert.Contains(t, o.err, "inventory, transactions")
	assert.NotContains(t, o.err, "fix the rows")
	o = s.run(false, "", "db", "export", "inventry")
	assert.Equal(t, ExitUsage, o.code)
	assert.Contains(t, o.err, "inventory")
}

// An interrupted batched import that wrote batches says so, and its hint outlives the Ctrl-C's
// "interrupted"; another command's does not.
func TestAnInterruptedBatchedImportSaysHowToFinish(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out bytes.Buffer
	err := importFailed(ctx, IOStreams{Out: &out}, openedStore{}, &dbOptions{File: "big.json"}, "imported big.json into inventory",
		bolt.ImportResult{Inserted: 4, Commits: 2}, context.Canceled)
	assert.Equal(t, "imported big.json into inventory, in part: 4 inserted, 0 updated, 0 unchanged (2 commits); the records after the first 4 were not imported\n", out.String())
	code, hint, msg := endOf(ctx, err)
	assert.Equal(t, ExitInterrupted, code)
	assert.Equal(t, "interrupted", msg.Error())
	assert.Contains(t, hint, "run the same import again to import the rest")

	code, hint, _ = endOf(ctx, withCode(ExitUsage, errors.New("x"), "fix x"))
	assert.Equal(t, ExitInterrupted, code)
	assert.Empty(t, hint, "what an interrupted command was doing is moot")
	code, hint, _ = endOf(context.Background(), withCode(ExitUsage, errors.New("x"), "fix x"))
	assert.Equal(t, ExitUsage, code)
	assert.Equal(t, "fix x", hint)
}

// `db seed --force` once emptied every store reopened without its domain directory, said
// "seeded", and db check found nothing wrong. A reseed puts back the rows the store was made
// from, for the built-in domain and for a domain directory, and says how many.
func TestDBSeedForcePutsBackTheSeedTheStoreWasMadeFrom(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		init  []string
		words string
	}{
		{"inventory", []string{"db", "init"}, "with the inventory demo data (7 rows)"},
		{"library", []string{"db", "init", "--domain", "../../domains/library"}, "with the library domain's seed (16 rows)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSession(t)
			o := s.run(false, "", tc.init...)
			require.Equal(t, ExitOK, o.code, o.err)
			assert.Contains(t, o.err, tc.words)
			first := s.run(false, "", "db", "dump", "--json")
			require.Equal(t, ExitOK, first.code, first.err)

			// Empty every table, then reseed.
			var tables map[string][]map[string]any
			require.NoError(t, json.Unmarshal([]byte(first.out), &tables))
			for name := range tables {
				o = s.run(false, "", "db", "import", name, writeFile(t, name+".json", "[]"), "--replace")
				require.Equal(t, ExitOK, o.code, o.err)
			}
			o = s.run(false, "", "db", "seed")
			assert.Equal(t, ExitOK, o.code, "an emptied store seeds without --force: %s", o.err)
			o = s.run(false, "", "db", "seed")
			assert.Equal(t, ExitUsage, o.code, "a store with rows needs --force")
			o = s.run(false, "", "db", "seed", "--force")
			require.Equal(t, ExitOK, o.code, o.err)
			assert.Equal(t, "seeded "+s.dir+" "+tc.words+"\n", o.err)
			again := s.run(false, "", "db", "dump", "--json")
			assert.Equal(t, first.out, again.out, "the reseeded store holds the seed it was made from")

			o = s.run(false, "", "db", "check", "--json")
			require.Equal(t, ExitOK, o.code, o.out)
			var rep store.CheckReport
			require.NoError(t, json.Unmarshal([]byte(o.out), &rep))
			assert.Empty(t, rep.Problems)
			assert.Empty(t, rep.Unverified, "a reseed records counts and digests like any write")
		})
	}
}
