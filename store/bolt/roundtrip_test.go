package bolt

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/starplan/starplan/store"

	"github.com/starplan/starplan/domains"
	"github.com/starplan/starplan/table"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// roundTripDomains are the domains whose files must round-trip: the two that ship,
// testdata/domains/orders, whose rows nest lists of objects holding floats (whole ones too),
// timestamps, text with quotes, commas and newlines, and untyped values, and
// testdata/domains/shop, whose maps hold objects, lists and maps of floats.
func roundTripDomains(t *testing.T) map[string]*store.Domain {
	t.Helper()
	out := map[string]*store.Domain{}
	for _, name := range domains.Names() {
		fsys, ok := domains.Builtin(name)
		require.True(t, ok, name)
		d, err := store.LoadDomain(fsys)
		require.NoError(t, err, name)
		out[name] = d
	}
	d, err := store.LoadDomain(os.DirFS("../../testdata/domains/orders"))
	require.NoError(t, err)
	out["orders"] = d
	out["shop"] = shopDomain(t)
	return out
}

// openDomain opens a new store of d in a fresh directory, seeded or empty.
func openDomain(t *testing.T, d *store.Domain, seed bool) *Store {
	t.Helper()
	s, err := Open(t.TempDir(), Options{Domain: d, NoSeed: !seed})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// TestDumpImportsBackByteForByte: a dump imported, table by table, into a new empty store of the
// same domain dumps the same bytes; and every float the schema declares, at any depth, is written
// with a fraction or an exponent, so that a typed reader other than starplan reads a float.
func TestDumpImportsBackByteForByte(t *testing.T) {
	for name, d := range roundTripDomains(t) {
		t.Run(name, func(t *testing.T) {
			dump := dumpString(t, openDomain(t, d, true))
			var tables map[string][]map[string]json.RawMessage
			require.NoError(t, json.Unmarshal([]byte(dump), &tables))
			s := openDomain(t, d, false)
			for _, sc := range d.Tables {
				require.NotEmpty(t, tables[sc.Name], "the seed has rows of %s", sc.Name)
				for _, row := range tables[sc.Name] {
					for _, f := range sc.Fields {
						assertFloatsWritten(t, &f, f.Name, row[f.Name])
					}
				}
				_, err := s.Import(bg, sc.Name, strings.NewReader(dump), JSON, Replace)
				require.NoError(t, err, sc.Name)
			}
			assert.Equal(t, dump, dumpString(t, s))
		})
	}
}

// TestExportImportsBack: each table exported as JSON or CSV and imported into a new empty store
// exports the same bytes, and the store dumps as the seeded one does.
func TestExportImportsBack(t *testing.T) {
	t.Parallel() // with the package's other long tests and its run on disk
	for name, d := range roundTripDomains(t) {
		for _, format := range []Format{JSON, CSV} {
			t.Run(name+"/"+string(format), func(t *testing.T) {
				seeded := openDomain(t, d, true)
				s := openDomain(t, d, false)
				for _, sc := range d.Tables {
					var exported bytes.Buffer
					require.NoError(t, seeded.Export(&exported, sc.Name, format))
					assertExportFloats(t, sc, format, exported.Bytes())
					_, err := s.Import(bg, sc.Name, bytes.NewReader(exported.Bytes()), format, Upsert)
					require.NoError(t, err, sc.Name)
					var again bytes.Buffer
					require.NoError(t, s.Export(&again, sc.Name, format))
					assert.Equal(t, exported.String(), again.String(), sc.Name)
				}
				assert.Equal(t, dumpString(t, seeded), dumpString(t, s))
			})
		}
	}
}

// assertExportFloats checks the floats of an exported table as a typed reader sees them: in JSON
// at every depth; in CSV in the nested values' JSON text (a top-level cell is text either way).
func assertExportFloats(t *testing.T, sc *table.Schema, format Format, data []byte) {
	t.Helper()
	if format == JSON {
		var rows []map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(data, &rows))
		for _, row := range rows {
			for _, f := range sc.Fields {
				assertFloatsWritten(t, &f, f.Name, row[f.Name])
			}
		}
		return
	}
	recs, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	require.NoError(t, err)
	for _, rec := range recs[1:] {
		for i, f := range sc.Fields {
			if f.Nested() && rec[i] != "" {
				assertFloatsWritten(t, &f, f.Name, json.RawMessage(rec[i]))
			}
		}
	}
}

// assertFloatsWritten checks that every number of raw at a position f declares a float has a
// fraction or an exponent, and every one declared an int has neither.
func assertFloatsWritten(t *testing.T, f *table.Field, path string, raw json.RawMessage) {
	t.Helper()
	if len(raw) == 0 || string(raw) == "null" {
		return
	}
	switch f.Type {
	case table.TypeFloat:
		assert.True(t, strings.ContainsAny(string(raw), ".eE"), "%s = %s: a float written without a fraction", path, raw)
	case table.TypeInt:
		assert.False(t, strings.ContainsAny(string(raw), ".eE"), "%s = %s: an int written with a fraction", path, raw)
	case table.TypeList:
		var l []json.RawMessage
		require.NoError(t, json.Unmarshal(raw, &l), path)
		if f.Items != nil {
			for i, e := range l {
				assertFloatsWritten(t, f.Items, path+table.PathIndex(i), e)
			}
		}
	case table.TypeObject:
		var m map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(raw, &m), path)
		for k, e := range m {
			if sub := f.Field(k); sub != nil {
				assertFloatsWritten(t, sub, path+table.PathKey(k), e)
			}
		}
	case table.TypeMap:
		var m map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(raw, &m), path)
		for k, e := range m {
			assertFloatsWritten(t, f.Values, path+table.PathKey(k), e)
		}
	}
}

// TestDumpWritesNestedFloatsWithAFraction pins the text of the orders domain's nested numbers:
// declared floats with a fraction at every depth, untyped whole numbers as ints.
func TestDumpWritesNestedFloatsWithAFraction(t *testing.T) {
	dump := dumpString(t, openDomain(t, roundTripDomains(t)["orders"], true))
	for _, want := range []string{
		`"total": 1031.0`,
		`{"discounts":[{"amount":10.0,"code":"NEWYEAR"}],"note":"gift wrap, \u003cred\u003e \u0026 gold","price":57.0,"qty":2,`,
		`"weights":[57.0,57.5]`, `"weights":[1031.0]`, `"weights":[0.0000001,1.5e+300,1e+21]`,
		`"extra":{"n":7,"x":0.25},"floor":3,"lat":51.0,"lon":-0.5,`,
		`"tags": ["vip",3,2.5,true,null,{"k":[1,2.5]}]`,
		`"history": [0.5,2.0,100.0]`,
	} {
		assert.Contains(t, dump, want)
	}
}

// TestDumpWritesMapFloatsWithAFraction pins the text of the shop domain's maps: every declared
// float with a fraction, the seed's whole numbers among them, in maps of objects, lists and maps.
func TestDumpWritesMapFloatsWithAFraction(t *testing.T) {
	dump := dumpString(t, openDomain(t, roundTripDomains(t)["shop"], true))
	for _, want := range []string{
		`"gc_1":{"balance":57.0,"refunds":[10.0,2.5],"source":"gift_card"}`,
		`"gc_2":{"balance":100.0,"source":"gift_card"}`,
		`"credit": {"EUR":0.5,"USD":1031.0}`,
		`"1000000001":{"available":true,"options":{"color":"gold","size":"M"},"price":80.0}`,
		`"price_history": [{"1000000001":75.0,"1000000002":50.0},{}]`,
	} {
		assert.Contains(t, dump, want)
	}
}
