package bolt

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/starplan/starplan/internal/testtier"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// seededInventory is the inventory domain with a seed of n generated items (and the demo
// transaction), validated.
func seededInventory(t testing.TB, n int) *store.Domain {
	dom := store.Inventory()
	schemas, err := dom.Schemas()
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(3, uint64(n)))
	items := make([]table.Row, 0, n)
	for i := 1; i <= n; i++ {
		r := benchItem(rng, i)
		if i%7 == 0 {
			r["description"] = "ünïcødé — 日本語 frames " + r["description"].(string) // runes across part cuts
		}
		row, err := schemas["inventory"].ValidateRow(r)
		require.NoError(t, err)
		items = append(items, row)
	}
	dom.Seed = map[string][]table.Row{"inventory": items, "transactions": dom.Seed["transactions"]}
	return dom
}

// A seed of several parts (about 32 KiB each; 1,200 items make 8, the long tier's 3,000 make 20)
// is kept in parts, none large, and db seed --force puts it back whole.
func TestALargeSeedIsKeptInPartsAndReseeds(t *testing.T) {
	t.Parallel() // with the package's other long tests and its run on disk
	dom := seededInventory(t, testtier.Size(1200, 3000))
	raw, err := store.EncodeSeed(dom.Seed)
	require.NoError(t, err)
	require.Greater(t, len(raw), 5*seedPartBytes, "the seed spans several parts")
	s, err := Open(t.TempDir(), Options{Domain: dom})
	require.NoError(t, err)
	seeded := dumpString(t, s)
	recs, err := s.ListSys(store.SeedCollection)
	require.NoError(t, err)
	assert.Greater(t, len(recs), 5)
	for _, r := range recs {
		assert.LessOrEqual(t, len(r.JSON), 2*seedPartBytes+2, "no stored value is large: %s", r.ID)
	}
	v := s.Stage()
	inv, _ := v.Table("inventory")
	_, err = inv.Remove(table.Query{Where: map[string]any{"item_id": "SG042"}})
	require.NoError(t, err)
	require.NoError(t, v.Apply(bg))
	r := reopen(t, s)
	require.NoError(t, r.Seed(bg, true))
	assert.Equal(t, seeded, dumpString(t, r), "db seed --force puts back the whole seed")
	require.NoError(t, r.Close())
	assert.True(t, checkOf(t, r.Dir(), store.CheckOptions{}).OK())
}

// A store made before seeds were kept in parts keeps its seed as one document: it still opens,
// checks and reseeds.
func TestAWholeSeedDocumentStillReads(t *testing.T) {
	t.Parallel()
	dom := seededInventory(t, 50)
	s, err := Open(t.TempDir(), Options{Domain: dom})
	require.NoError(t, err)
	seeded := dumpString(t, s)
	raw, err := store.EncodeSeed(dom.Seed)
	require.NoError(t, err)
	c, _ := sysCollection(store.SeedCollection)
	require.NoError(t, s.write(bg, func() error {
		if err := s.deleteKeptSeedLocked(c); err != nil {
			return err
		}
		return s.putSysLocked(c, store.SeedID, raw) // the old layout
	}))
	recs, err := s.ListSys(store.SeedCollection)
	require.NoError(t, err)
	require.Equal(t, 1, len(recs))
	v := s.Stage()
	inv, _ := v.Table("inventory")
	_, err = inv.Remove(table.Query{Where: map[string]any{"item_id": "SG007"}})
	require.NoError(t, err)
	require.NoError(t, v.Apply(bg))
	require.NoError(t, s.Close())
	assert.True(t, checkOf(t, s.Dir(), store.CheckOptions{}).OK())
	r, err := Open(s.Dir(), Options{})
	require.NoError(t, err)
	defer r.Close()
	require.NoError(t, r.Seed(bg, true))
	assert.Equal(t, seeded, dumpString(t, r))
}

func TestAMissingOrDamagedSeedPartIsDamage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, want string
		harm       func(s *Store, c string) error
	}{
		{"missing", "is missing part 2 of", func(s *Store, c string) error { _, err := s.deleteSysLocked(c, seedPartID(2)); return err }},
		{"damaged", "do not match the length and hash", func(s *Store, c string) error { return s.putSysLocked(c, seedPartID(3), "x") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(t.TempDir(), Options{Domain: seededInventory(t, testtier.Size(700, 1000))}) // 5 parts (7 long)
			require.NoError(t, err)
			c, _ := sysCollection(store.SeedCollection)
			// Through the store (its digests follow): what a damaged file that still adds up looks like.
			require.NoError(t, s.write(bg, func() error { return tc.harm(s, c) }))
			before := dumpString(t, s)
			var de *store.DamagedError
			require.True(t, errors.As(s.Seed(bg, true), &de))
			assert.Contains(t, de.Problem, tc.want)
			assert.Contains(t, de.Problem, "the seed it keeps")
			assert.Equal(t, before, dumpString(t, s), "nothing reseeded")
			require.NoError(t, s.Close())
			rep := checkOf(t, s.Dir(), store.CheckOptions{})
			require.NotEmpty(t, problemsOf(rep, store.CheckSystem))
			assert.Contains(t, problemsOf(rep, store.CheckSystem)[0], tc.want)
		})
	}
}

func TestSplitSeedCutsAtRunes(t *testing.T) {
	seed := []byte(fmt.Sprintf("%0*d", seedPartBytes-1, 0) + "日本")
	parts := splitSeed(seed)
	require.Len(t, parts, 2)
	assert.Equal(t, seedPartBytes-1, len(parts[0]))
	assert.Equal(t, "日本", parts[1])
}

// BenchmarkApplyBesideALargeSeed is the 2-row apply on a store created with a seed of 100 rows
// and one created with 100,000: the kept seed must not make commits slower (ratio ≈ 1). Kept as
// one 12 MB document it shared a bbolt leaf with the store's record, and every commit rewrote it.
//
//	go test ./store/bolt -run '^$' -bench ApplyBesideALargeSeed -benchtime 100x
func BenchmarkApplyBesideALargeSeed(b *testing.B) {
	open := func(n int) *Store {
		s, err := Open(filepath.Join(b.TempDir(), fmt.Sprint(n)), Options{Domain: seededInventory(b, n)})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	}
	small, large := open(100), open(100_000)
	var ts, tl []time.Duration
	apply := func(s *Store) time.Duration {
		v := s.Stage()
		twoRowChange(b, v)
		start := time.Now()
		if err := v.Apply(bg); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ts = append(ts, apply(small))
		tl = append(tl, apply(large))
	}
	p50 := func(d []time.Duration) float64 {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return float64(d[len(d)/2]) / 1e6
	}
	ms, ml := p50(ts), p50(tl)
	b.ReportMetric(ms, "p50-ms/seed=100")
	b.ReportMetric(ml, "p50-ms/seed=100k")
	b.ReportMetric(ml/ms, "ratio")
}

// An upgrade replaces every part of the kept seed: a smaller seed leaves none of the larger's,
// and a domain without a seed leaves none at all.
func TestAnUpgradeReplacesEverySeedPart(t *testing.T) {
	t.Parallel()
	s, err := Open(t.TempDir(), Options{Domain: seededInventory(t, testtier.Size(1000, 3000))}) // 7 parts (20 long)
	require.NoError(t, err)
	small := seededInventory(t, 20)
	require.NoError(t, s.UpgradeDomain(bg, small))
	r, err := Open(s.Dir(), Options{})
	require.NoError(t, err)
	recs, err := r.ListSys(store.SeedCollection)
	require.NoError(t, err)
	assert.Equal(t, 2, len(recs), "the manifest and one part")
	require.NoError(t, r.Seed(bg, true))
	assert.Equal(t, 21, rowCount(t, r))
	none := seededInventory(t, 0)
	none.Seed = nil
	require.NoError(t, r.UpgradeDomain(bg, none))
	r2, err := Open(s.Dir(), Options{})
	require.NoError(t, err)
	defer r2.Close()
	recs, err = r2.ListSys(store.SeedCollection)
	require.NoError(t, err)
	assert.Equal(t, 0, len(recs), "no part left")
}
