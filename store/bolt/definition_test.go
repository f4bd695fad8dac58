package bolt

import (
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/starplan/starplan/store"

	"github.com/starplan/starplan/domains"
	"github.com/starplan/starplan/table"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func shippedLibrary(t *testing.T) *store.Domain {
	t.Helper()
	dir, ok := domains.Builtin(domains.Library)
	require.True(t, ok)
	d, err := store.LoadDomain(dir)
	require.NoError(t, err)
	return d
}

// reopen closes s and opens its directory again as a command does: without a domain, so the
// store is opened with the one it recorded.
func reopen(t *testing.T, s *Store) *Store {
	t.Helper()
	require.NoError(t, s.Close())
	r, err := Open(s.Dir(), Options{MustExist: true})
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	return r
}

// rowCount is the number of rows the store holds in all its tables.
func rowCount(t *testing.T, s *Store) int {
	t.Helper()
	n := 0
	for _, name := range s.Names() {
		n += len(find(t, tbl(t, s.Stage(), name), table.Query{}))
	}
	return n
}

func TestReseedOfAStoreOpenedWithoutItsDomainPutsBackItsOwnSeed(t *testing.T) {
	lib := shippedLibrary(t)
	s, err := Open(t.TempDir(), Options{Domain: lib})
	require.NoError(t, err)
	seeded := dumpString(t, s)
	require.NotEqual(t, 0, rowCount(t, s))
	books := tbl(t, s.Stage(), "books")
	first := find(t, books, table.Query{})[0]
	v := s.Stage()
	_, err = tbl(t, v, "books").Remove(table.Query{Where: where("book_id", first["book_id"])})
	require.NoError(t, err)
	require.NoError(t, v.Apply(bg))

	r := reopen(t, s)
	assert.Nil(t, r.Domain().Seed, "a store opened from its record has no seed rows in its domain")
	require.NoError(t, r.Seed(bg, true))
	assert.Equal(t, seeded, dumpString(t, r), "the reseed puts back the library's own seed, not nothing")
	counts, err := r.SeedRows()
	require.NoError(t, err)
	n := 0
	for _, c := range counts {
		n += c
	}
	assert.Equal(t, rowCount(t, r), n)

	// Opened again, the reseeded store verifies and reseeds the same.
	r2 := reopen(t, r)
	assert.Equal(t, seeded, dumpString(t, r2))
	require.NoError(t, r2.Close())
	rep := checkOf(t, r2.Dir(), store.CheckOptions{})
	assert.True(t, rep.OK(), "%v", rep.Problems)
	assert.Empty(t, rep.Unverified)
}

func TestAStoreMadeEmptyKeepsItsSeed(t *testing.T) {
	s, err := Open(t.TempDir(), Options{NoSeed: true, Domain: shippedLibrary(t)})
	require.NoError(t, err)
	require.Equal(t, 0, rowCount(t, s))
	r := reopen(t, s)
	require.NoError(t, r.Seed(bg, false), "an empty store seeds without force")
	assert.Positive(t, rowCount(t, r))
}

func TestReseedWithoutAKeptSeedChangesNothing(t *testing.T) {
	// A domain without seed.json, and a store made before stores kept their seed (its seed
	// document removed through clover, as an older starplan never wrote it).
	noSeed := fstest.MapFS{store.DomainFile: {Data: []byte(`{"name": "notes", "tables": [{"name": "notes", "key": "id", "fields": [{"name": "id", "type": "string"}]}]}`)}}
	d, err := store.LoadDomain(noSeed)
	require.NoError(t, err)
	s, err := Open(t.TempDir(), Options{Domain: d})
	require.NoError(t, err)
	r := reopen(t, s)
	assert.ErrorIs(t, r.Seed(bg, true), store.ErrNoSeed)

	s, err = Open(t.TempDir(), Options{Domain: shippedLibrary(t)})
	require.NoError(t, err)
	c, _ := sysCollection(store.SeedCollection)
	require.NoError(t, s.write(bg, func() error { return s.db.DeleteById(c, sysDocID(c, store.SeedID)) }))
	before := dumpString(t, s)
	r = reopen(t, s)
	_, err = r.SeedRows()
	assert.ErrorIs(t, err, store.ErrNoSeed)
	assert.ErrorIs(t, r.Seed(bg, true), store.ErrNoSeed)
	assert.Equal(t, before, dumpString(t, r), "a refused reseed changes nothing")

	// The built-in inventory's demo data is known without a kept seed.
	s = openTemp(t)
	c, _ = sysCollection(store.SeedCollection)
	require.NoError(t, s.write(bg, func() error { return s.db.DeleteById(c, sysDocID(c, store.SeedID)) }))
	r = reopen(t, s)
	require.NoError(t, r.Seed(bg, true))
	assert.Equal(t, 7, rowCount(t, r))
}

func TestAStoreWithEveryCollectionEmptyKeepsItsDigests(t *testing.T) {
	// All collections empty once made the record's digests an empty map, which the record
	// dropped: db check then called the store unverified.
	noSeed := fstest.MapFS{store.DomainFile: {Data: []byte(`{"name": "notes", "tables": [{"name": "notes", "key": "id", "fields": [{"name": "id", "type": "string"}]}]}`)}}
	d, err := store.LoadDomain(noSeed)
	require.NoError(t, err)
	s, err := Open(t.TempDir(), Options{Domain: d})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	rep := checkOf(t, s.Dir(), store.CheckOptions{})
	assert.True(t, rep.OK(), "%v", rep.Problems)
	assert.Empty(t, rep.Unverified)
}

// editRecord changes the store's record through clover, keeping its digests (as a tool that
// edits the file with bbolt's API would), but not the definition's sums.
func editRecord(t *testing.T, s *Store, edit func(m *metaRecord)) {
	t.Helper()
	require.NoError(t, s.write(bg, func() error {
		var m metaRecord
		if _, err := s.getSysLocked(metaCollection, metaID, &m); err != nil {
			return err
		}
		edit(&m)
		return s.putSysLocked(metaCollection, metaID, m)
	}))
}

func TestAnEditedDefinitionIsDamage(t *testing.T) {
	s := openTemp(t)
	editRecord(t, s, func(m *metaRecord) {
		m.Definition["policy.json"] = m.Definition["policy.json"] + " " // one byte
	})
	require.NoError(t, s.Close())

	_, err := Open(s.Dir(), Options{MustExist: true})
	var de *store.DamagedError
	require.True(t, errors.As(err, &de), "%v", err)
	assert.Contains(t, de.Problem, "policy.json was changed")

	invariants := false
	rep := checkOf(t, s.Dir(), store.CheckOptions{Invariants: func(*store.Domain, table.ChangeSet) ([]string, error) {
		invariants = true
		return nil, nil
	}})
	assert.False(t, rep.OK())
	assert.Contains(t, problemsOf(rep, store.CheckRecord)[0], "policy.json was changed")
	assert.False(t, invariants, "rules from an edited definition are not trusted")

	// Files added or removed are named too.
	s2 := openTemp(t)
	editRecord(t, s2, func(m *metaRecord) {
		delete(m.Definition, "prompt.json")
		m.Definition["extra.md"] = "x"
	})
	require.NoError(t, s2.Close())
	_, err = Open(s2.Dir(), Options{MustExist: true})
	assert.ErrorContains(t, err, "extra.md was added, prompt.json was removed")
}

func TestADefinitionWithoutSumsGetsThemOnItsNextWrite(t *testing.T) {
	s := openTemp(t)
	s.bolt.beforeCommit = nil // as an older starplan wrote it: no sums recorded at the commit
	editRecord(t, s, func(m *metaRecord) { m.DefinitionSums = nil })
	require.NoError(t, s.Close())
	rep := checkOf(t, s.Dir(), store.CheckOptions{})
	assert.Contains(t, rep.Unverified, "domain definition's hashes")

	w := openAt(t, s.Dir())
	v := w.Stage()
	sell(t, v, "Moon")
	require.NoError(t, v.Apply(bg))
	require.NoError(t, w.Close())
	rep = checkOf(t, s.Dir(), store.CheckOptions{})
	assert.True(t, rep.OK(), "%v", rep.Problems)
	assert.Empty(t, rep.Unverified)
}

func TestADefinitionThatDoesNotLoadIsReportedNotAnError(t *testing.T) {
	s := openTemp(t)
	require.NoError(t, s.Close())
	rep := checkOf(t, s.Dir(), store.CheckOptions{Invariants: func(*store.Domain, table.ChangeSet) ([]string, error) {
		return nil, errors.New("policy.json: unexpected end of JSON input")
	}})
	assert.False(t, rep.OK())
	assert.Contains(t, problemsOf(rep, store.CheckRecord)[0], "policy.json: unexpected end of JSON input")
}

func TestADamagedKeptSeedIsReported(t *testing.T) {
	s := openTemp(t)
	c, _ := sysCollection(store.SeedCollection)
	bad := []byte(`{"inventory": [{"item_id": "SG001", "name": "x", "description": "", "quantity_in_stock": -5, "price": 1.0}]}`)
	require.NoError(t, s.write(bg, func() error { return s.putSysLocked(c, store.SeedID, json.RawMessage(bad)) }))
	before := dumpString(t, s)
	var de *store.DamagedError
	require.True(t, errors.As(s.Seed(bg, true), &de))
	assert.Contains(t, de.Problem, "the seed it keeps does not fit its domain")
	assert.Equal(t, before, dumpString(t, s))
	require.NoError(t, s.Close())
	rep := checkOf(t, s.Dir(), store.CheckOptions{})
	require.NotEmpty(t, problemsOf(rep, store.CheckSystem), "%v", rep.Problems)
	assert.Contains(t, problemsOf(rep, store.CheckSystem)[0], "quantity_in_stock")
}

// A store of the inventory domain made before stores kept their seed, by a starplan whose
// domain.json differed in docs or indexes (the "indexes" came later), reseeds with the demo
// data: its rows fit the store's tables. Where they do not fit, the reseed is refused.
func TestAnOldInventoryStoreReseedsWhenTheDemoDataFitsItsTables(t *testing.T) {
	inv := store.Inventory()
	def := maps.Clone(inv.Definition)
	old := strings.Replace(def[store.DomainFile], `"indexes": ["name"],`, "", 1)
	require.NotEqual(t, def[store.DomainFile], old)
	def[store.DomainFile] = old
	d, err := store.DomainFromDefinition(def)
	require.NoError(t, err)
	require.Nil(t, d.Seed, "no seed: the store keeps none, as one made before kept seeds")

	dir := t.TempDir()
	s, err := Open(dir, Options{Domain: d})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s = openAt(t, dir) // as the CLI opens it: by its recorded definition
	err = s.Seed(bg, true)
	require.NoError(t, err, "the built-in demo data fits this store's tables")
	n, err := s.SeedRows()
	require.NoError(t, err)
	assert.Equal(t, 6, n["inventory"])
}

func TestAnOldInventoryStoreWhoseTablesDifferIsNotReseeded(t *testing.T) {
	def := maps.Clone(store.Inventory().Definition)
	def[store.DomainFile] = strings.Replace(def[store.DomainFile], `"quantity_in_stock"`, `"stock"`, 1)
	d, err := store.DomainFromDefinition(def)
	require.NoError(t, err)
	dir := t.TempDir()
	s, err := Open(dir, Options{Domain: d})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	s = openAt(t, dir)
	assert.ErrorIs(t, s.Seed(bg, true), store.ErrNoSeed)
}
