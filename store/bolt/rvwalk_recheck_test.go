package bolt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

// rvwalk: an attacker's review of the re-check that stops at the bounded end of a read's range
// (walkRange), of the walk of the file in chunks (walkBucket) and of the map ahead (mapAhead).

// rvwalkDomain has a table with a text key and one with an int key, each with a declared index
// on a text field and on a float field.
func rvwalkDomain(t testing.TB) *store.Domain {
	t.Helper()
	fields := func(key, typ string) string {
		return `[{"name": "` + key + `", "type": "` + typ + `"}, {"name": "g", "type": "string"}, {"name": "f", "type": "float"}, {"name": "v", "type": "int"}]`
	}
	d, err := store.LoadDomain(fstest.MapFS{"domain.json": {Data: []byte(`{"name": "rvwalk", "tables": [
		{"name": "s", "key": "k", "indexes": ["g", "f"], "fields": ` + fields("k", "string") + `},
		{"name": "n", "key": "id", "indexes": ["g", "f"], "fields": ` + fields("id", "int") + `}]}`)}})
	require.NoError(t, err)
	return d
}

// Keys whose order the natural order of text decides (digit runs as numbers, leading zeros as a
// tie-break, bytes around the digits), and ints at the ends of their range.
var (
	rvwalkTextKeys = []any{"a", "a0", "a00", "a000", "a1", "a01", "a001", "a2", "a02", "a9", "a10", "a010", "a11",
		"a99", "a100", "a0100", "A1", "A01", "b", "a-", "a/", "a:", "a1b", "a01b", "a1/", "a01/", "a1:", "a01:", "a0/",
		"a00/", "0", "00", "1", "01", "9", "10", "010", "z", "a 1", "a\x7f", "a\u00e9", "TXN001", "TXN1", "TXN0010", "TXN010"}
	rvwalkIntKeys = []any{int64(math.MinInt64), int64(-1 << 62), int64(-10), int64(-1), int64(0), int64(1), int64(2), int64(3),
		int64(9), int64(10), int64(11), int64(99), int64(100), int64(1 << 53), int64(1<<53 + 1), int64(1 << 62), int64(math.MaxInt64)}
	rvwalkG = []any{"x", "X", "y", "Y", "xy", nil}
	rvwalkF = []any{0.0, math.Copysign(0, -1), 1.0, 1.5, 2.0, -1.0, 1e300, nil}
)

// TestRvwalkRecheckAgreesWithEveryCommittedRow: the re-check of every predicate read a run
// records (first, last, limits, counts, reads that found nothing, reads through an index on a
// text or float field or the key, with a filter besides, with and without the run's own writes
// in the table) answers, after random commits, exactly what a look at every committed row in
// the read's range answers: its count and digest of (key, version). On a table in memory and
// on one read from the file, and one read into memory by a walk; the read goes through JSON, as an audit record's reads do.
func TestRvwalkRecheckAgreesWithEveryCommittedRow(t *testing.T) {
	t.Parallel()
	rounds := 40
	if testing.Short() {
		rounds = 10
	}
	for _, where := range []string{"file", "memory", "promoted"} { // promoted: read into memory in the middle of a walk
		for _, name := range []string{"s", "n"} {
			t.Run(where+"/"+name, func(t *testing.T) {
				t.Parallel()
				res := &residency{open: -1, promote: math.MaxInt64}
				switch where {
				case "memory":
					res = &residency{open: 1 << 40, promote: math.MaxInt64}
				case "promoted":
					res = &residency{open: -1, promote: 20}
				}
				s, err := Open(t.TempDir(), Options{Domain: rvwalkDomain(t), NoSeed: true, residency: res})
				require.NoError(t, err)
				defer s.Close()
				rng := rand.New(rand.NewPCG(uint64(len(where)), uint64(name[0])))
				rvwalkDifferential(t, s, name, rng, rounds)
				require.Equal(t, where != "file", s.tables[name].res.Load() != nil, "the table is in memory")
			})
		}
	}
}

func rvwalkDifferential(t *testing.T, s *Store, name string, rng *rand.Rand, rounds int) {
	sc := s.schemas[name]
	keyPool := rvwalkTextKeys
	if name == "n" {
		keyPool = rvwalkIntKeys
	}
	pick := func(vs []any) any { return vs[rng.IntN(len(vs))] }
	randomRow := func(k any) table.Row {
		return table.Row{sc.Key: k, "g": pick(rvwalkG), "f": pick(rvwalkF), "v": int64(rng.IntN(5))}
	}
	// change makes 1..3 random changes to tb: an insert or replacement, an update of the
	// indexed fields (a row moves into or out of a value), a removal.
	change := func(tb table.Table) {
		for range 1 + rng.IntN(3) {
			k := pick(keyPool)
			switch rng.IntN(4) {
			case 0:
				if _, err := tb.Remove(table.Query{Where: map[string]any{sc.Key: k}}); err != nil {
					t.Fatal(err)
				}
			case 1:
				if _, err := tb.Update(table.Row{"g": pick(rvwalkG)}, table.Query{Where: map[string]any{sc.Key: k}}); err != nil {
					t.Fatal(err)
				}
			case 2:
				if _, err := tb.Update(table.Row{"f": pick(rvwalkF), "v": int64(rng.IntN(5))}, table.Query{Where: map[string]any{sc.Key: k}}); err != nil {
					t.Fatal(err)
				}
			default:
				if _, ok, err := tb.Get(k); err != nil {
					t.Fatal(err)
				} else if !ok {
					if _, err := tb.Insert(randomRow(k)); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	// The table starts with most of the keys.
	sg := s.Stage()
	for _, k := range keyPool {
		if rng.IntN(4) > 0 {
			_, err := tbl(t, sg, name).Insert(randomRow(k))
			require.NoError(t, err)
		}
	}
	require.NoError(t, sg.Apply(bg))

	wheres := func() map[string]any {
		switch rng.IntN(7) {
		case 0:
			return map[string]any{"g": pick(rvwalkG)}
		case 1:
			return map[string]any{"g": map[string]any{"$ieq": pick(rvwalkG[:5])}}
		case 2:
			return map[string]any{"f": pick(rvwalkF[:7])}
		case 3:
			return map[string]any{"g": pick(rvwalkG), "v": map[string]any{"$gte": int64(rng.IntN(5))}}
		case 4:
			return map[string]any{"g": pick(rvwalkG[:5]), "f": pick(rvwalkF[:7])}
		case 5:
			return map[string]any{sc.Key: pick(keyPool)}
		default:
			return map[string]any{"v": map[string]any{"$lt": int64(rng.IntN(5))}} // no index: the range walk
		}
	}
	checked, conflicts := 0, 0
	for round := range rounds {
		sg := s.Stage()
		tb := tbl(t, sg, name)
		if rng.IntN(2) == 0 {
			change(tb) // the run's own writes in the table it then reads
		}
		for range 1 + rng.IntN(4) {
			q := table.Query{Where: wheres(), Reverse: rng.IntN(2) == 0, Limit: rng.IntN(4)}
			if rng.IntN(5) == 0 {
				_, err := tb.Count(q)
				require.NoError(t, err)
			} else {
				_, err := tb.Find(q)
				require.NoError(t, err)
			}
		}
		p := sg.Pending()
		// Another run commits meanwhile.
		other := s.Stage()
		change(tbl(t, other, name))
		require.NoError(t, other.Apply(bg))

		raw, err := json.Marshal(p.Reads)
		require.NoError(t, err)
		var reads []store.PendingRead
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber() // as the engine reads a record's pending run (engine/decode.go)
		require.NoError(t, dec.Decode(&reads))
		all := rvwalkCommitted(t, s, name)
		for _, r := range reads {
			if r.Pred != store.PredRows && r.Pred != store.PredCount {
				continue
			}
			pc, err := store.CheckPred(sc, r)
			require.NoError(t, err)
			var keys []store.VerKey
			for _, c := range all {
				if (pc.From == nil || table.CompareKeys(c.key, pc.From) >= 0) && (pc.To == nil || table.CompareKeys(c.key, pc.To) <= 0) && pc.M.Match(c.row) {
					keys = append(keys, store.VerKey{Key: c.key, Ver: c.ver})
				}
			}
			same := int64(len(keys)) == pc.N && (pc.Kind == store.PredCount || store.ReadDigest(keys) == pc.Digest)
			err = s.Conflicts(bg, &store.Pending{Domain: s.domain.Name, Reads: []store.PendingRead{r}})
			checked++
			if err != nil {
				conflicts++
			}
			if same {
				require.NoError(t, err, "round %d: read %s where %s from %v to %v: nothing in its range moved", round, r.Pred, r.Where, r.From, r.To)
			} else {
				require.ErrorIs(t, err, store.ErrConflict, "round %d: read %s where %s from %v to %v n %d: its range now holds %v (a lost update)", round, r.Pred, r.Where, r.From, r.To, r.N, keys)
			}
			if r.Pred != store.PredRows {
				continue
			}
			// The same filter over any range (from, to, both or neither; bounds that are no
			// row's key): what it holds now holds, one row fewer or more, or another digest, is
			// a conflict.
			r.Version = 1 // before every commit of the table: the range is read again
			r.From, r.To = nil, nil
			if rng.IntN(2) == 0 {
				r.From = pick(keyPool)
			}
			if rng.IntN(2) == 0 {
				r.To = pick(keyPool)
			}
			pc, err = store.CheckPred(sc, r)
			require.NoError(t, err)
			keys = keys[:0]
			for _, c := range all {
				if (pc.From == nil || table.CompareKeys(c.key, pc.From) >= 0) && (pc.To == nil || table.CompareKeys(c.key, pc.To) <= 0) && pc.M.Match(c.row) {
					keys = append(keys, store.VerKey{Key: c.key, Ver: c.ver})
				}
			}
			for _, d := range []struct {
				n      int64
				digest uint64
				holds  bool
			}{{int64(len(keys)), store.ReadDigest(keys), true}, {int64(len(keys)) + 1, store.ReadDigest(keys), false},
				{int64(len(keys)) - 1, store.ReadDigest(keys), false}, {int64(len(keys)), store.ReadDigest(keys) + 1, false}} {
				if d.n < 0 {
					continue
				}
				r.N, r.Digest = d.n, fmt.Sprintf("%x", d.digest)
				err := s.Conflicts(bg, &store.Pending{Domain: s.domain.Name, Reads: []store.PendingRead{r}})
				if d.holds {
					require.NoError(t, err, "round %d: where %s from %v to %v holds %v", round, r.Where, r.From, r.To, keys)
				} else {
					require.ErrorIs(t, err, store.ErrConflict, "round %d: where %s from %v to %v holds %v, not n %d digest %s", round, r.Where, r.From, r.To, keys, r.N, r.Digest)
				}
			}
		}
	}
	t.Logf("%d re-checks, %d conflicts", checked, conflicts)
	require.NotZero(t, conflicts)
	require.Less(t, conflicts, checked)
}

// rvwalkCommitted is every committed row of the table, in key order, read whole.
func rvwalkCommitted(t *testing.T, s *Store, name string) []*rec {
	t.Helper()
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []*rec
	var err error
	for _, r := range s.tables[name].walk(bg, nil, nil, false, &err) {
		out = append(out, r)
	}
	require.NoError(t, err)
	for i := 1; i < len(out); i++ {
		require.Negative(t, table.CompareKeys(out[i-1].key, out[i].key), "walk order: %v before %v", out[i-1].key, out[i].key)
	}
	return out
}
