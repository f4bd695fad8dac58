package bolt

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/starplan/starplan/table"
)

// The performance targets (issue 3) are carried by these benchmarks, never by tests:
//
//	go test ./store -run '^$' -bench . -count 5
//
// At 100, 10,000 and 100,000 inventory rows: FindByName and GetByKey flat across sizes and
// ≤ 20 µs at 100k; FindRange ≤ 5 ms at 100k (the 15 ms budget includes a Starlark sum done by
// the builtins); ChangeSet of a 2-row change the same at 100k as at 100; Apply of a 2-row change
// ≤ 5 ms with fsync; Open of a 100k-row store ≤ 500 ms. Open and Apply also run at 1,000,000
// rows (issue 15's targets there: Open ≤ 10 ms, the 2-row Apply ≤ 3 ms including fsync):
//
//	go test ./store -run '^$' -bench 'Open|Apply$' -benchtime 5x -count 3

var benchSizes = []int{100, 10_000, 100_000}

var (
	benchMu   sync.Mutex
	benchDirs = map[int]string{}
	benchRoot string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if benchRoot != "" {
		os.RemoveAll(benchRoot)
	}
	os.Exit(code)
}

var (
	adjectives = []string{"Polar", "Retro", "Urban", "Coastal", "Midnight", "Golden", "Alpine", "Vintage", "Neon", "Desert", "Crystal", "Shadow"}
	styles     = []string{"Aviator", "Wayfarer", "Cat Eye", "Round", "Sport", "Shield", "Clubmaster", "Oval", "Square", "Wrap"}
	materials  = []string{"acetate", "titanium", "stainless steel", "bamboo", "recycled plastic", "carbon fibre"}
)

// benchItem is a realistic inventory row: unique name, a sentence of description, stock 0-50,
// a price between 20 and 300 with cents.
func benchItem(rng *rand.Rand, i int) table.Row {
	adj, style := adjectives[rng.IntN(len(adjectives))], styles[rng.IntN(len(styles))]
	return table.Row{
		"item_id":           fmt.Sprintf("SG%03d", i),
		"name":              fmt.Sprintf("%s %s %d", adj, style, i),
		"description":       fmt.Sprintf("%s %s frames in %s with polarised lenses; light, sturdy and made for long summer days.", adj, style, materials[rng.IntN(len(materials))]),
		"quantity_in_stock": int64(rng.IntN(51)),
		"price":             float64(2000+rng.IntN(28001)) / 100,
	}
}

// benchStore returns the directory of a store holding n inventory rows (and the seed
// transaction), creating it once per test binary run.
func benchStore(b *testing.B, n int) string {
	b.Helper()
	benchMu.Lock()
	defer benchMu.Unlock()
	if dir := benchDirs[n]; dir != "" {
		return dir
	}
	if benchRoot == "" {
		var err error
		if benchRoot, err = os.MkdirTemp("", "starplan-bench-"); err != nil {
			b.Fatal(err)
		}
	}
	dir := filepath.Join(benchRoot, fmt.Sprint(n))
	s, err := Open(dir, Options{NoSeed: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	rng := rand.New(rand.NewPCG(7, uint64(n)))
	inv, tx := s.schemas["inventory"], s.schemas["transactions"]
	seedTx := s.domain.Seed["transactions"][0]
	ops := []op{{s: tx, key: seedTx["transaction_id"], row: seedTx}}
	for i := 1; i <= n; i++ {
		row, err := inv.ValidateRow(benchItem(rng, i))
		if err != nil {
			b.Fatal(err)
		}
		ops = append(ops, op{s: inv, key: row["item_id"], row: row})
	}
	s.mu.Lock()
	err = s.commitLocked(ops, nil)
	s.mu.Unlock()
	if err != nil {
		b.Fatal(err)
	}
	benchDirs[n] = dir
	return dir
}

func benchOpen(b *testing.B, n int) *Store {
	b.Helper()
	s, err := Open(benchStore(b, n), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkFindByName is get({"name": X}): an equality answered from the name index.
func BenchmarkFindByName(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			s := benchOpen(b, n)
			inv, _ := s.Stage().Table("inventory")
			names := make([]string, 1024)
			rng := rand.New(rand.NewPCG(1, 2))
			all, _ := inv.Find(table.Query{})
			for i := range names {
				names[i] = all[rng.IntN(len(all))]["name"].(string)
			}
			if _, err := inv.Find(table.Query{Where: map[string]any{"name": names[0]}, Limit: 1}); err != nil {
				b.Fatal(err) // builds the index outside the timer
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				rows, err := inv.Find(table.Query{Where: map[string]any{"name": names[i%len(names)]}, Limit: 1})
				if err != nil || len(rows) != 1 {
					b.Fatal(err, len(rows))
				}
			}
		})
	}
}

// BenchmarkGetByKey is get_by_key(K).
func BenchmarkGetByKey(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			s := benchOpen(b, n)
			inv, _ := s.Stage().Table("inventory")
			ids := make([]string, 1024)
			rng := rand.New(rand.NewPCG(1, 2))
			for i := range ids {
				ids[i] = fmt.Sprintf("SG%03d", 1+rng.IntN(n))
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				_, ok, err := inv.Get(ids[i%len(ids)])
				if err != nil || !ok {
					b.Fatal(err, ok)
				}
			}
		})
	}
}

// BenchmarkFindRange is search({"price": {"$lt": 100}, "quantity_in_stock": {"$gt": 10}}): a
// scan of every row through the compiled filter.
func BenchmarkFindRange(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			s := benchOpen(b, n)
			inv, _ := s.Stage().Table("inventory")
			q := table.Query{Where: map[string]any{"price": map[string]any{"$lt": 100}, "quantity_in_stock": map[string]any{"$gt": 10}}}
			b.ReportAllocs()
			b.ResetTimer()
			matched := 0
			for i := 0; i < b.N; i++ {
				rows, err := inv.Find(q)
				if err != nil {
					b.Fatal(err)
				}
				matched = len(rows)
			}
			b.ReportMetric(float64(matched), "rows")
		})
	}
}

// BenchmarkChangeSet is the diff of a 2-row change (one update, one insert).
func BenchmarkChangeSet(b *testing.B) {
	for _, n := range []int{100, 100_000} {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			s := benchOpen(b, n)
			v := s.Stage()
			twoRowChange(b, v)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if cs := v.ChangeSet(); cs.Rows() != 2 {
					b.Fatal(cs.Rows())
				}
			}
		})
	}
}

func twoRowChange(b *testing.B, v *Stage) {
	inv, _ := v.Table("inventory")
	tx, _ := v.Table("transactions")
	row, _, err := inv.Get("SG042")
	if err != nil || row == nil {
		b.Fatal(err)
	}
	q := row["quantity_in_stock"].(int64)
	if q == 0 {
		q = 10
	}
	if _, err := inv.Update(table.Row{"quantity_in_stock": q - 1}, table.Query{Where: map[string]any{"item_id": "SG042"}}); err != nil {
		b.Fatal(err)
	}
	if _, err := tx.Insert(table.Row{"customer_name": "Bench", "transaction_amount": row["price"],
		"balance_after_transaction": 500.0, "timestamp": "2025-01-02T10:00:00"}); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkApply is the apply of a 2-row change, fsync included.
func BenchmarkApply(b *testing.B) {
	for _, n := range []int{100, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			s, err := Open(filepath.Join(b.TempDir(), "s"), Options{NoSeed: true})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			src := benchOpenCopy(b, n, s)
			_ = src
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				v := s.Stage()
				twoRowChange(b, v)
				b.StartTimer()
				if err := v.Apply(bg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchOpenCopy fills dst (an empty store of its own, since applies change it) with the rows of
// the n-row bench store.
func benchOpenCopy(b *testing.B, n int, dst *Store) *Store {
	b.Helper()
	src := benchOpen(b, n)
	var ops []op
	for _, name := range src.names {
		var err error
		for _, r := range src.tables[name].walk(context.Background(), nil, nil, false, &err) {
			ops = append(ops, op{s: dst.schemas[name], key: r.key, row: r.row})
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	dst.mu.Lock()
	defer dst.mu.Unlock()
	if err := dst.commitLocked(ops, nil); err != nil {
		b.Fatal(err)
	}
	return src
}

// BenchmarkOpen opens (and closes) a store: every row decoded and sorted into memory.
func BenchmarkOpen(b *testing.B) {
	for _, n := range append(benchSizes, 1_000_000) {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			dir := benchStore(b, n)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s, err := Open(dir, Options{})
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if tb, _ := s.Stage().Table("inventory"); tb.Len() != n {
					b.Fatal(tb.Len())
				}
				s.Close()
				b.StartTimer()
			}
		})
	}
}

// BenchmarkApplyAfterAnotherCommit is the apply of a sale (an indexed search, the last ledger
// row, a generated key) after another run committed to both its tables: every predicate read
// is evaluated again over the committed rows. It measures what the re-check adds to an apply.
func BenchmarkApplyAfterAnotherCommit(b *testing.B) {
	for _, n := range []int{100, 100_000} {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			s, err := Open(filepath.Join(b.TempDir(), "s"), Options{NoSeed: true})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			benchOpenCopy(b, n, s)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				v := s.Stage()
				inv, _ := v.Table("inventory")
				if _, err := inv.Find(table.Query{Where: map[string]any{"name": "Product 42"}, Limit: 1}); err != nil {
					b.Fatal(err)
				}
				twoRowChange(b, v)
				other := s.Stage()
				oinv, _ := other.Table("inventory")
				if _, err := oinv.Update(table.Row{"price": float64(i%50 + 1)}, table.Query{Where: map[string]any{"item_id": "SG007"}}); err != nil {
					b.Fatal(err)
				}
				otx, _ := other.Table("transactions")
				if _, err := otx.Find(table.Query{Where: map[string]any{"customer_name": "nobody"}}); err != nil {
					b.Fatal(err)
				}
				if err := other.Apply(bg); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if err := v.Apply(bg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
