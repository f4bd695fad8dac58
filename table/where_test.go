package table

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func f64(v float64) *float64 { return &v }

func inventorySchema() *Schema {
	return &Schema{
		Name: "inventory",
		Key:  "item_id",
		Fields: []Field{
			{Name: "item_id", Type: TypeString, Required: true},
			{Name: "name", Type: TypeString, Required: true},
			{Name: "description", Type: TypeString},
			{Name: "quantity_in_stock", Type: TypeInt, Min: f64(0)},
			{Name: "price", Type: TypeFloat, Min: f64(0)},
			{Name: "discontinued", Type: TypeBool},
			{Name: "updated", Type: TypeTimestamp},
		},
	}
}

func inventoryRows() []Row {
	return []Row{
		{"item_id": "SG001", "name": "Aviator", "description": "Teardrop lenses for pilots", "quantity_in_stock": int64(23), "price": 80.0, "discontinued": false, "updated": "2025-01-01T09:00:00"},
		{"item_id": "SG002", "name": "Wayfarer", "description": "Thick, angular frames", "quantity_in_stock": int64(6), "price": 95.0, "discontinued": true, "updated": "2025-01-02T09:00:00"},
		{"item_id": "SG003", "name": "Mystique", "description": "Cat-eye glamour", "quantity_in_stock": int64(3), "price": 70.0},
		{"item_id": "SG004", "name": "Sport", "description": "Wraparound, rubber grips", "quantity_in_stock": int64(11), "price": 110.0},
		{"item_id": "SG005", "name": "Classic", "quantity_in_stock": int64(10), "price": 60.0},
		{"item_id": "SG006", "name": "Moon", "description": "Oversized ROUND style", "quantity_in_stock": int64(10), "price": 120.5},
	}
}

// matching compiles where against the inventory schema and returns the ids of the rows it keeps.
func matching(t *testing.T, where map[string]any) []string {
	t.Helper()
	m, err := Compile(inventorySchema(), where)
	require.NoError(t, err)
	ids := []string{}
	for _, r := range inventoryRows() {
		if m.Match(r) {
			ids = append(ids, r["item_id"].(string))
		}
	}
	return ids
}

func TestCompileMatches(t *testing.T) {
	tests := []struct {
		name  string
		where map[string]any
		want  []string
	}{
		{"nil matches all", nil, []string{"SG001", "SG002", "SG003", "SG004", "SG005", "SG006"}},
		{"empty matches all", map[string]any{}, []string{"SG001", "SG002", "SG003", "SG004", "SG005", "SG006"}},
		{"plain equality", map[string]any{"name": "Aviator"}, []string{"SG001"}},
		{"all keys must hold", map[string]any{"name": "Aviator", "price": 95.0}, []string{}},
		{"int operand on float field", map[string]any{"price": int64(80)}, []string{"SG001"}},
		{"float operand on int field", map[string]any{"quantity_in_stock": 10.0}, []string{"SG005", "SG006"}},
		{"Go int operand", map[string]any{"quantity_in_stock": 10}, []string{"SG005", "SG006"}},
		{"$eq", map[string]any{"name": map[string]any{"$eq": "Moon"}}, []string{"SG006"}},
		{"$eq None matches missing", map[string]any{"description": map[string]any{"$eq": nil}}, []string{"SG005"}},
		{"plain None matches missing", map[string]any{"discontinued": nil}, []string{"SG003", "SG004", "SG005", "SG006"}},
		{"$ne value keeps missing", map[string]any{"discontinued": map[string]any{"$ne": true}}, []string{"SG001", "SG003", "SG004", "SG005", "SG006"}},
		{"$ne None", map[string]any{"description": map[string]any{"$ne": nil}}, []string{"SG001", "SG002", "SG003", "SG004", "SG006"}},
		{"$lt", map[string]any{"price": map[string]any{"$lt": int64(80)}}, []string{"SG003", "SG005"}},
		{"$lte", map[string]any{"price": map[string]any{"$lte": int64(80)}}, []string{"SG001", "SG003", "SG005"}},
		{"$gt", map[string]any{"quantity_in_stock": map[string]any{"$gt": int64(10)}}, []string{"SG001", "SG004"}},
		{"$gte", map[string]any{"quantity_in_stock": map[string]any{"$gte": 10.5}}, []string{"SG001", "SG004"}},
		{"range ANDed", map[string]any{"price": map[string]any{"$gte": int64(70), "$lt": int64(100)}}, []string{"SG001", "SG002", "SG003"}},
		{"string order", map[string]any{"name": map[string]any{"$lt": "N"}}, []string{"SG001", "SG003", "SG005", "SG006"}},
		{"string order inclusive", map[string]any{"name": map[string]any{"$lte": "Moon", "$gte": "Moon"}}, []string{"SG006"}},
		{"timestamp order skips missing", map[string]any{"updated": map[string]any{"$gt": "2025-01-01T12:00:00"}}, []string{"SG002"}},
		{"$lt never matches missing", map[string]any{"updated": map[string]any{"$lt": "9999"}}, []string{"SG001", "SG002"}},
		{"$in", map[string]any{"name": map[string]any{"$in": []any{"Moon", "Sport", "Nope"}}}, []string{"SG004", "SG006"}},
		{"$in numbers cross kind", map[string]any{"price": map[string]any{"$in": []any{int64(60), 70.0}}}, []string{"SG003", "SG005"}},
		{"$in with None", map[string]any{"description": map[string]any{"$in": []any{nil, "Cat-eye glamour"}}}, []string{"SG003", "SG005"}},
		{"$in empty", map[string]any{"name": map[string]any{"$in": []any{}}}, []string{}},
		{"$in long strings", map[string]any{"name": map[string]any{"$in": []any{"a", "b", "c", "d", "e", "f", "g", "Moon", "Aviator"}}}, []string{"SG001", "SG006"}},
		{"$in long numbers", map[string]any{"quantity_in_stock": map[string]any{"$in": []any{int64(1), int64(2), 3.0, int64(4), int64(5), int64(7), int64(8), int64(9), int64(11)}}}, []string{"SG003", "SG004"}},
		{"$in long mixed", map[string]any{"description": map[string]any{"$in": []any{"a", "b", "c", "d", "e", "f", "g", "h", nil}}}, []string{"SG005"}},
		{"$nin", map[string]any{"name": map[string]any{"$nin": []any{"Moon", "Sport"}}}, []string{"SG001", "SG002", "SG003", "SG005"}},
		{"$nin keeps missing", map[string]any{"description": map[string]any{"$nin": []any{"Cat-eye glamour"}}}, []string{"SG001", "SG002", "SG004", "SG005", "SG006"}},
		{"$ieq", map[string]any{"name": map[string]any{"$ieq": "aVIATOR"}}, []string{"SG001"}},
		{"$contains", map[string]any{"description": map[string]any{"$contains": "frames"}}, []string{"SG002"}},
		{"$contains is case-sensitive", map[string]any{"description": map[string]any{"$contains": "ROUND"}}, []string{"SG006"}},
		{"$icontains", map[string]any{"description": map[string]any{"$icontains": "round"}}, []string{"SG004", "SG006"}},
		{"$startswith", map[string]any{"item_id": map[string]any{"$startswith": "SG00"}, "name": map[string]any{"$startswith": "M"}}, []string{"SG003", "SG006"}},
		{"$regex searches", map[string]any{"name": map[string]any{"$regex": "^[A-M]"}}, []string{"SG001", "SG003", "SG005", "SG006"}},
		{"$regex case flag", map[string]any{"description": map[string]any{"$regex": "(?i)^over"}}, []string{"SG006"}},
		{"$or", map[string]any{"$or": []any{map[string]any{"name": "Moon"}, map[string]any{"price": map[string]any{"$lt": int64(65)}}}}, []string{"SG005", "SG006"}},
		{"$or alternative is a conjunction", map[string]any{"$or": []any{map[string]any{"name": "Moon", "price": int64(1)}, map[string]any{"name": "Sport"}}}, []string{"SG004"}},
		{"$and", map[string]any{"$and": []any{map[string]any{"price": map[string]any{"$gt": int64(60)}}, map[string]any{"price": map[string]any{"$lt": int64(95)}}}}, []string{"SG001", "SG003"}},
		{"nested", map[string]any{
			"quantity_in_stock": map[string]any{"$gte": int64(10)},
			"$or": []any{
				map[string]any{"$and": []any{map[string]any{"name": "Moon"}, map[string]any{"price": map[string]any{"$gt": int64(100)}}}},
				map[string]any{"name": map[string]any{"$ieq": "classic"}},
			},
		}, []string{"SG005", "SG006"}},
		{"bool", map[string]any{"discontinued": true}, []string{"SG002"}},
		{"bool $in", map[string]any{"discontinued": map[string]any{"$in": []any{false, nil}}}, []string{"SG001", "SG003", "SG004", "SG005", "SG006"}},
		{"key field", map[string]any{"item_id": "SG004"}, []string{"SG004"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, matching(t, tt.where))
		})
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name       string
		where      map[string]any
		message    string // a substring of the message
		suggestion string
	}{
		{"unknown field", map[string]any{"quantity": int64(1)}, `unknown field "quantity"; the fields are item_id, name,`, "quantity_in_stock"},
		{"cut character", map[string]any{"name": map[string]any{"$startswith": "\xc3"}}, `not valid UTF-8 ("\xc3")`, ""},
		{"cut character in a list", map[string]any{"name": map[string]any{"$in": []any{"ok", "Zo\xc3"}}}, `not valid UTF-8`, ""},
		{"cut character in a field name", map[string]any{"na\xc3": "x"}, `not valid UTF-8`, ""},
		{"unknown field abbreviation", map[string]any{"qty": int64(1)}, `unknown field "qty"`, "quantity_in_stock"},
		{"unknown field typo", map[string]any{"prise": int64(1)}, `unknown field "prise"`, "price"},
		{"unknown field case", map[string]any{"Name": "x"}, `unknown field "Name"`, "name"},
		{"unknown field far", map[string]any{"zzzzzz": "x"}, `unknown field "zzzzzz"`, ""},
		{"unknown field in $or", map[string]any{"$or": []any{map[string]any{"nmae": "x"}}}, `unknown field "nmae"`, "name"},
		{"unknown operator", map[string]any{"price": map[string]any{"$lessthan": int64(1)}}, `unknown operator "$lessthan" for field "price"; the operators are $eq`, ""},
		{"operator without dollar", map[string]any{"price": map[string]any{"lt": int64(1)}}, `unknown operator "lt"`, "$lt"},
		{"operator typo", map[string]any{"name": map[string]any{"$contians": "x"}}, `unknown operator "$contians"`, "$contains"},
		{"operator alias", map[string]any{"price": map[string]any{"$le": int64(1)}}, `unknown operator "$le"`, "$lte"},
		{"logical in field", map[string]any{"price": map[string]any{"$or": []any{}}}, `$or belongs at the top of the filter`, ""},
		{"unknown top-level operator", map[string]any{"$ro": []any{}}, `unknown operator "$ro" at the top of the filter`, "$or"},
		{"field operator at top", map[string]any{"$lt": int64(5)}, `operator $lt must be applied to a field`, ""},
		{"$or needs a list", map[string]any{"$or": map[string]any{"name": "x"}}, `$or needs a list of filters`, ""},
		{"$or empty", map[string]any{"$or": []any{}}, `$or needs at least one filter`, ""},
		{"$and element not a dict", map[string]any{"$and": []any{"name"}}, `$and element 0 must be a filter dict`, ""},
		{"empty operator dict", map[string]any{"price": map[string]any{}}, `field "price" has an empty operator dict`, ""},
		{"$lt string on float", map[string]any{"price": map[string]any{"$lt": "100"}}, `field "price" is a float, so $lt needs a number; got string "100"`, ""},
		{"$lt None", map[string]any{"price": map[string]any{"$lt": nil}}, `$lt on field "price" needs a value, not None`, ""},
		{"$lt on bool", map[string]any{"discontinued": map[string]any{"$lt": true}}, `field "discontinued" is a bool and has no order`, ""},
		{"equality kind", map[string]any{"name": int64(5)}, `field "name" is a string, so $eq needs a string; got int 5`, ""},
		{"bool on int", map[string]any{"quantity_in_stock": true}, `needs a number; got bool True`, ""},
		{"number on bool", map[string]any{"discontinued": int64(1)}, `needs True or False; got int 1`, ""},
		{"list as value", map[string]any{"name": []any{"a", "b"}}, `use {"name": {"$in": [...]}}`, ""},
		{"dict in $in", map[string]any{"name": map[string]any{"$in": []any{map[string]any{}}}}, `cannot compare it with a dict`, ""},
		{"$in non-list", map[string]any{"name": map[string]any{"$in": "Aviator"}}, `$in needs a list of values`, ""},
		{"$nin element kind", map[string]any{"price": map[string]any{"$nin": []any{"1"}}}, `so $nin needs a number; got string "1"`, ""},
		{"$contains on number", map[string]any{"price": map[string]any{"$contains": int64(1)}}, `$contains applies to text or lists; field "price" is a float`, ""},
		{"$contains non-string", map[string]any{"name": map[string]any{"$contains": int64(1)}}, `$contains on field "name" needs a string`, ""},
		{"$icontains on int", map[string]any{"quantity_in_stock": map[string]any{"$icontains": "1"}}, `$icontains applies to text; field "quantity_in_stock" is an int`, ""},
		{"$startswith non-string", map[string]any{"name": map[string]any{"$startswith": nil}}, `$startswith on field "name" needs a string; got None`, ""},
		{"bad regex", map[string]any{"name": map[string]any{"$regex": "(?<=x)a"}}, `$regex on field "name": error parsing regexp`, ""},
		{"NaN", map[string]any{"price": math.NaN()}, `NaN never compares`, ""},
		{"unsupported Go type", map[string]any{"price": struct{}{}}, `unsupported value`, ""},
		{"unsupported Go type for $or", map[string]any{"$or": struct{}{}}, `$or needs a list of filters, such as {"$or": [{"name": "Aviator"}, {"price": {"$lt": 100}}]}; got struct {} {}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Compile(inventorySchema(), tt.where)
			require.Error(t, err)
			assert.Nil(t, m)
			var qe *QueryError
			require.True(t, errors.As(err, &qe), "want *QueryError, got %T", err)
			assert.Equal(t, "inventory", qe.Table)
			assert.Contains(t, qe.Message, tt.message)
			assert.Equal(t, tt.suggestion, qe.Suggestion)
			if tt.suggestion != "" {
				assert.Contains(t, err.Error(), fmt.Sprintf("(did you mean %q?)", tt.suggestion))
			}
		})
	}
}

func TestCompileDepthLimit(t *testing.T) {
	where := map[string]any{"name": "x"}
	for range MaxWhereDepth + 2 {
		where = map[string]any{"$and": []any{where}}
	}
	_, err := Compile(inventorySchema(), where)
	var qe *QueryError
	require.ErrorAs(t, err, &qe)
	assert.Contains(t, qe.Message, "nests $or/$and more than")
}

func TestCompileNilSchema(t *testing.T) {
	m, err := Compile(nil, map[string]any{
		"tags":  map[string]any{"$contains": "red"},
		"n":     map[string]any{"$gt": int64(1)},
		"shape": []any{int64(1), "a"},
	})
	require.NoError(t, err)
	assert.True(t, m.Match(Row{"tags": []any{"blue", "red"}, "n": 2.5, "shape": []any{1.0, "a"}}))
	assert.False(t, m.Match(Row{"tags": []any{"blue"}, "n": 2.5, "shape": []any{1.0, "a"}}))
	assert.False(t, m.Match(Row{"tags": "redish", "n": int64(1), "shape": []any{1.0, "a"}}))

	_, err = Compile(nil, map[string]any{"x": map[string]any{"$lt": []any{}}})
	assert.ErrorContains(t, err, "where: $lt on field \"x\" needs a number or a text")

	m, err = Compile(nil, map[string]any{"tags": map[string]any{"$icontains": "RED"}, "d": map[string]string{}})
	require.Error(t, err, "a map of another Go type is not a filter value")
	assert.Nil(t, m)
	m, err = Compile(nil, map[string]any{"tags": map[string]any{"$icontains": "RED"}})
	require.NoError(t, err)
	assert.True(t, m.Match(Row{"tags": []any{int64(1), "red"}}))
	assert.True(t, m.Match(Row{"tags": "bored"}))
	assert.False(t, m.Match(Row{"tags": int64(3)}))
}

func TestMatchKeyFieldWithoutDeclaration(t *testing.T) {
	s := &Schema{Name: "t", Key: "id", Fields: []Field{{Name: "v", Type: TypeInt}}}
	m, err := Compile(s, map[string]any{"id": int64(3)})
	require.NoError(t, err)
	assert.True(t, m.Match(Row{"id": 3.0}))
	assert.False(t, m.Match(Row{"id": "3"}))
}

func TestMatchRowValuesOfUnexpectedKinds(t *testing.T) {
	// Rows are validated by the store, but Match must stay total when they are not.
	m, err := Compile(inventorySchema(), map[string]any{
		"price": map[string]any{"$lt": int64(100)},
		"name":  map[string]any{"$regex": "a"},
	})
	require.NoError(t, err)
	assert.False(t, m.Match(Row{"price": "cheap", "name": "a"}))
	assert.False(t, m.Match(Row{"price": math.NaN(), "name": "a"}))
	assert.False(t, m.Match(Row{"price": 1.0, "name": int64(1)}))
	assert.True(t, m.Match(Row{"price": int64(1), "name": "a"}))
	var nilM *Matcher
	assert.True(t, nilM.Match(Row{}))
	assert.Nil(t, nilM.Equalities())
}

func TestMatchNumbersExactly(t *testing.T) {
	big := int64(1<<53 + 1)
	m, err := Compile(nil, map[string]any{"n": big})
	require.NoError(t, err)
	assert.True(t, m.Match(Row{"n": big}))
	assert.False(t, m.Match(Row{"n": float64(1 << 53)}), "2^53 as a float is not 2^53+1")
	m, err = Compile(nil, map[string]any{"n": map[string]any{"$gt": float64(1 << 53)}})
	require.NoError(t, err)
	assert.True(t, m.Match(Row{"n": big}))
}

func TestContainsFold(t *testing.T) {
	tests := []struct {
		s, sub string
		want   bool
	}{
		{"Oversized ROUND style", "round", true},
		{"", "", true},
		{"abc", "", true},
		{"", "a", false},
		{"ab", "abc", false},
		{"Straße", "STRASSE", false}, // simple folding only, as strings.EqualFold
		{"Grüße aus KÖLN", "köln", true},
		{"temperature 5\u212a", "5k", true}, // Kelvin sign folds to k
		{"ΣΊΣΥΦΟΣ", "σίσυφος", true},
		{"abcabd", "abd", true},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, containsFold(tt.s, tt.sub), "%q in %q", tt.sub, tt.s)
	}
}

func TestEqualities(t *testing.T) {
	m, err := Compile(inventorySchema(), map[string]any{
		"name":              "Aviator",
		"price":             map[string]any{"$eq": int64(80), "$lt": int64(100)},
		"quantity_in_stock": 23.0,
		"description":       nil,
		"$and":              []any{map[string]any{"item_id": "SG001"}},
		"$or":               []any{map[string]any{"discontinued": false}},
	})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{
		"name": "Aviator", "price": 80.0, "quantity_in_stock": int64(23), "item_id": "SG001",
	}, m.Equalities())

	m, err = Compile(inventorySchema(), map[string]any{"price": map[string]any{"$lt": int64(1)}})
	require.NoError(t, err)
	assert.Empty(t, m.Equalities())
}

func TestNearest(t *testing.T) {
	fields := inventorySchema().FieldNames()
	assert.Equal(t, "quantity_in_stock", Nearest("quantity", fields))
	assert.Equal(t, "quantity_in_stock", Nearest("stock", fields))
	assert.Equal(t, "quantity_in_stock", Nearest("qty", fields))
	assert.Equal(t, "price", Nearest("Price", fields))
	assert.Equal(t, "", Nearest("", fields))
	assert.Equal(t, "", Nearest("e", fields), "too short to guess among many")
	assert.Equal(t, "", Nearest("colour", fields))
}

// benchRows builds n inventory rows with varied prices and stock.
func benchRows(n int) []Row {
	rows := make([]Row, n)
	for i := range rows {
		rows[i] = Row{
			"item_id":           fmt.Sprintf("SG%06d", i),
			"name":              fmt.Sprintf("Model %d", i),
			"description":       "A pair of sunglasses with a long enough description to be realistic.",
			"quantity_in_stock": int64(i % 50),
			"price":             float64(i%200) + 0.5,
		}
	}
	return rows
}

// BenchmarkMatch runs the filter over 100k rows: with rows spread over the heap, it is
// bound by memory latency (compare BenchmarkMatchFloor); BenchmarkMatchHot is the compute cost.
func BenchmarkMatch(b *testing.B) { benchmarkMatch(b, 100_000) }

// BenchmarkMatchHot runs the filter over 64 rows that stay in cache.
func BenchmarkMatchHot(b *testing.B) { benchmarkMatch(b, 64) }

func benchmarkMatch(b *testing.B, n int) {
	rows := benchRows(n)
	m, err := Compile(inventorySchema(), map[string]any{
		"price":             map[string]any{"$lt": int64(100)},
		"quantity_in_stock": map[string]any{"$gt": int64(10)},
	})
	require.NoError(b, err)
	b.ReportAllocs()
	b.ResetTimer()
	hits := 0
	for i := 0; b.Loop(); i++ {
		if m.Match(rows[i%len(rows)]) {
			hits++
		}
	}
	if hits < 0 {
		b.Fatal(hits)
	}
}

// BenchmarkMatchFloor is the same filter written by hand over the same rows: the cost of the two
// map lookups that any evaluation of it over table.Row must pay, for comparison with Match.
func BenchmarkMatchFloor(b *testing.B) { benchmarkMatchFloor(b, 100_000) }

// BenchmarkMatchFloorHot is BenchmarkMatchFloor over 64 rows that stay in cache.
func BenchmarkMatchFloorHot(b *testing.B) { benchmarkMatchFloor(b, 64) }

func benchmarkMatchFloor(b *testing.B, n int) {
	rows := benchRows(n)
	fields := []string{"price", "quantity_in_stock"}
	hits := 0
	for i := 0; b.Loop(); i++ {
		r := rows[i%len(rows)]
		if p, ok := r[fields[0]].(float64); ok && p < 100 {
			if q, ok := r[fields[1]].(int64); ok && q > 10 {
				hits++
			}
		}
	}
	if hits < 0 {
		b.Fatal(hits)
	}
}

func BenchmarkMatchIcontainsRegex(b *testing.B) {
	rows := benchRows(100_000)
	m, err := Compile(inventorySchema(), map[string]any{
		"description": map[string]any{"$icontains": "REALISTIC"},
		"name":        map[string]any{"$regex": "9$"},
	})
	require.NoError(b, err)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		m.Match(rows[i%len(rows)])
	}
}

func BenchmarkCompile(b *testing.B) {
	s := inventorySchema()
	where := map[string]any{
		"price":             map[string]any{"$lt": int64(100)},
		"quantity_in_stock": map[string]any{"$gt": int64(10)},
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(s, where); err != nil {
			b.Fatal(err)
		}
	}
}

// skipUnderRace skips allocation counts in a binary built with -race, whose instrumentation
// allocates.
func skipUnderRace(t *testing.T) {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-race" && s.Value == "true" {
				t.Skip("allocation counts are meaningless under -race")
			}
		}
	}
}

func TestMatchDoesNotAllocate(t *testing.T) {
	skipUnderRace(t)
	rows := inventoryRows()
	m, err := Compile(inventorySchema(), map[string]any{
		"price":       map[string]any{"$lt": int64(100), "$in": []any{80.0, 95.0, 70.0, 60.0, 1.0, 2.0, 3.0, 4.0}},
		"description": map[string]any{"$icontains": "E", "$regex": "[a-z]"},
		"$or":         []any{map[string]any{"name": map[string]any{"$ieq": "aviator"}}, map[string]any{"quantity_in_stock": map[string]any{"$nin": []any{int64(1)}}}},
	})
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(100, func() {
		for _, r := range rows {
			m.Match(r)
		}
	})
	assert.Zero(t, allocs)
}

// FuzzCompile builds filters from arbitrary bytes, in two ways (JSON, and a small generator
// biased towards the schema's fields and operators), and checks that Compile never panics and
// that a compiled filter matches rows without panicking.
func FuzzCompile(f *testing.F) {
	f.Add([]byte(`{"price": {"$lt": 100}, "quantity_in_stock": {"$gt": 10}}`))
	f.Add([]byte(`{"$or": [{"name": "Moon"}, {"name": {"$regex": "^A"}}]}`))
	f.Add([]byte(`{"name": {"$in": ["a", null, 1]}}`))
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte("\x05\x03\x09\x01\x07\x02\x00\x11\x0e"))
	schema := inventorySchema()
	rows := append(inventoryRows(), Row{"price": "x", "tags": []any{int64(1), "a"}, "name": nil})
	f.Fuzz(func(t *testing.T, data []byte) {
		var where map[string]any
		if json.Unmarshal(data, &where) != nil {
			g := generator{data: data}
			where = g.filter(0)
		}
		for _, s := range []*Schema{schema, nil} {
			m, err := Compile(s, where)
			if err != nil {
				var qe *QueryError
				if !errors.As(err, &qe) {
					t.Fatalf("Compile returned %T, want *QueryError: %v", err, err)
				}
				continue
			}
			for _, r := range rows {
				m.Match(r)
			}
			m.Equalities()
		}
	})
}

// generator turns fuzz bytes into a filter.
type generator struct {
	data []byte
	pos  int
}

func (g *generator) byte() byte {
	if g.pos >= len(g.data) {
		return 0
	}
	b := g.data[g.pos]
	g.pos++
	return b
}

var fuzzKeys = append(append([]string{
	"item_id", "name", "description", "quantity_in_stock", "price", "discontinued", "updated",
	"", "$", "tags", "$le", "quantity",
}, FieldOperators...), LogicalOperators...)

func (g *generator) key() string {
	b := g.byte()
	if b >= 0xf0 && g.pos < len(g.data) {
		n := int(g.byte() % 8)
		end := min(g.pos+n, len(g.data))
		s := string(g.data[g.pos:end])
		g.pos = end
		return s
	}
	return fuzzKeys[int(b)%len(fuzzKeys)]
}

func (g *generator) filter(depth int) map[string]any {
	n := int(g.byte() % 4)
	m := make(map[string]any, n)
	for range n {
		m[g.key()] = g.value(depth + 1)
	}
	return m
}

func (g *generator) value(depth int) any {
	if depth > 40 || g.pos >= len(g.data) {
		return nil
	}
	switch g.byte() % 14 {
	case 0:
		return nil
	case 1:
		return g.byte()%2 == 0
	case 2:
		return int64(int8(g.byte()))
	case 3:
		return float64(int8(g.byte())) / 4
	case 4:
		return []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), math.MaxFloat64}[g.byte()%5]
	case 5:
		return []int64{math.MinInt64, math.MaxInt64, 1 << 53, 1<<53 + 1}[g.byte()%4]
	case 6, 7:
		return g.key()
	case 8:
		return []string{"(", "[a-", "^A", ".*", "a{1000}", "\\p{Greek}"}[g.byte()%6]
	case 9, 10:
		n := int(g.byte() % 10)
		l := make([]any, n)
		for i := range l {
			l[i] = g.value(depth + 1)
		}
		return l
	default:
		return g.filter(depth)
	}
}

// TestMatchOrderFastPath covers the inline order comparison against each kind of row value.
func TestMatchOrderFastPath(t *testing.T) {
	m, err := Compile(nil, map[string]any{"n": map[string]any{"$gte": int64(1 << 53), "$lt": 1e300}})
	require.NoError(t, err)
	for _, tt := range []struct {
		v    any
		want bool
	}{
		{int64(1 << 53), true},
		{int64(1<<53 + 1), true},
		{int64(1<<53 - 1), false},
		{int64(math.MaxInt64), true},
		{int(1 << 54), true},
		{int32(5), false},
		{float64(1 << 53), true},
		{math.Inf(1), false},
		{math.NaN(), false},
		{"9", false},
		{nil, false},
	} {
		assert.Equal(t, tt.want, m.Match(Row{"n": tt.v}), "%#v", tt.v)
	}
	m, err = Compile(nil, map[string]any{"n": map[string]any{"$lt": int64(5)}})
	require.NoError(t, err)
	assert.False(t, m.Match(Row{"n": int64(1 << 60)}), "large ints take the exact path")
	assert.True(t, m.Match(Row{"n": int64(-1 << 60)}))
	m, err = Compile(nil, map[string]any{"n": map[string]any{"$gt": int64(1<<53 + 1)}})
	require.NoError(t, err)
	assert.False(t, m.Match(Row{"n": int64(1<<53 + 1)}), "inexact operands take the exact path")
	assert.True(t, m.Match(Row{"n": int64(1<<53 + 2)}))
	assert.True(t, m.Match(Row{"n": float64(1<<53 + 2)}), "2^53+2 is exact as a float, and greater")
}

func TestCompileUntypedOperands(t *testing.T) {
	m, err := Compile(nil, map[string]any{
		"meta": map[string]any{"$eq": map[string]any{"a": 1, "b": []any{nil, true, float32(1.5)}}},
		"list": map[string]any{"$eq": []any{int32(1), "x", map[string]any{"k": false}}},
	})
	require.NoError(t, err)
	row := Row{
		"meta": map[string]any{"a": 1.0, "b": []any{nil, true, 1.5}},
		"list": []any{int64(1), "x", map[string]any{"k": false}},
	}
	assert.True(t, m.Match(row))
	for _, change := range []func(r Row){
		func(r Row) { r["meta"] = map[string]any{"a": 1.0, "c": []any{nil, true, 1.5}} },
		func(r Row) { r["meta"] = map[string]any{"a": 1.0} },
		func(r Row) { r["meta"] = map[string]any{"a": 1.0, "b": []any{false, true, 1.5}} },
		func(r Row) { r["meta"] = map[string]any{"a": 1.0, "b": []any{nil, nil, 1.5}} },
		func(r Row) { r["meta"] = map[string]any{"a": 1.0, "b": "x"} },
		func(r Row) { r["list"] = []any{int64(1), "x", map[string]any{"k": true}} },
		func(r Row) { r["list"] = []any{int64(2), "x", map[string]any{"k": false}} },
		func(r Row) { r["list"] = []any{"1", "x", map[string]any{"k": false}} },
		func(r Row) { r["list"] = "x" },
	} {
		r := Row{"meta": row["meta"], "list": row["list"]}
		change(r)
		assert.False(t, m.Match(r), "%v", r)
	}

	for _, where := range []map[string]any{
		{"x": map[string]any{"$eq": []any{1.0, math.NaN()}}},
		{"x": map[string]any{"$eq": map[string]any{"a": []any{math.NaN()}}}},
		{"x": map[string]any{"$ne": map[string]any{"a": map[string]any{"b": math.NaN()}}}},
	} {
		_, err := Compile(nil, where)
		assert.ErrorContains(t, err, "NaN never compares equal", "%v", where)
	}
	_, err = Compile(nil, map[string]any{"x": map[string]any{"$contains": nil}})
	assert.ErrorContains(t, err, `$contains on field "x" needs a value, not None`)
	_, err = Compile(nil, map[string]any{"x": map[string]any{"$in": []any{struct{}{}}}})
	assert.ErrorContains(t, err, `$in on field "x": unsupported value {} of Go type struct {}`)
}

func TestInLongListsOfNumbersStayExact(t *testing.T) {
	list := []any{int64(math.MaxInt64), int64(1), int64(2), int64(3), int64(4), int64(5), int64(6), int64(7)}
	m, err := Compile(nil, map[string]any{"n": map[string]any{"$in": list}})
	require.NoError(t, err)
	assert.True(t, m.Match(Row{"n": int64(math.MaxInt64)}))
	assert.False(t, m.Match(Row{"n": int64(math.MaxInt64 - 1)}), "no hash set of rounded floats")
	assert.True(t, m.Match(Row{"n": 3.0}))

	list[0] = int64(0)
	m, err = Compile(nil, map[string]any{"n": map[string]any{"$in": list}})
	require.NoError(t, err)
	assert.True(t, m.Match(Row{"n": 0.0}))
	assert.True(t, m.Match(Row{"n": int64(7)}))
	assert.False(t, m.Match(Row{"n": int64(1<<62 + 1)}), "ints beyond float precision take the exact path")
	assert.False(t, m.Match(Row{"n": math.NaN()}))
	assert.False(t, m.Match(Row{"n": "7"}))
}

func TestNearestAmbiguous(t *testing.T) {
	assert.Equal(t, "", Nearest("amount", []string{"transaction_amount", "amount_due_total"}), "two contain it")
	assert.Equal(t, "transaction_amount", Nearest("amount", []string{"transaction_amount", "price"}))
	assert.Equal(t, "", Nearest("tmt", []string{"transaction_amount", "timestamp"}), "two have its letters in order")
}

func TestValuesEqual(t *testing.T) {
	for _, tt := range []struct {
		a, b any
		want bool
	}{
		{nil, nil, true},
		{nil, false, false},
		{"a", "a", true},
		{1, "1", false},
		{1, int64(1), true},
		{int64(80), 80.0, true},
		{int64(1<<53 + 1), float64(1 << 53), false},
		{math.NaN(), math.NaN(), false},
		{[]any{int64(1), map[string]any{"k": "v"}}, []any{1.0, map[string]any{"k": "v"}}, true},
		{[]any{int64(1)}, []any{int64(1), int64(2)}, false},
		{map[string]any{"a": math.NaN()}, map[string]any{"a": math.NaN()}, false},
		{map[string]any{"a": nil}, map[string]any{"b": nil}, false},
	} {
		assert.Equal(t, tt.want, ValuesEqual(tt.a, tt.b), "ValuesEqual(%#v, %#v)", tt.a, tt.b)
		assert.Equal(t, tt.want, ValuesEqual(tt.b, tt.a), "ValuesEqual(%#v, %#v)", tt.b, tt.a)
	}
}

// A filter is evaluated by starplan itself against every row a query walks, so its size is
// bounded at compile time, whatever a plan builds.
func TestCompileBoundsTheFilter(t *testing.T) {
	s := &Schema{Name: "items", Key: "id", Fields: []Field{{Name: "id", Type: TypeString}, {Name: "name", Type: TypeString}}}
	alts := make([]any, MaxWhereRegexes+1)
	for i := range alts {
		alts[i] = map[string]any{"name": map[string]any{"$regex": fmt.Sprintf("a%d", i)}}
	}
	_, err := Compile(s, map[string]any{"$or": alts[:MaxWhereRegexes]})
	require.NoError(t, err)
	_, err = Compile(s, map[string]any{"$or": alts})
	assert.ErrorContains(t, err, "more than 16 $regex operators")

	_, err = Compile(s, map[string]any{"name": map[string]any{"$regex": strings.Repeat("a|", MaxRegexLen/2) + "b"}})
	assert.ErrorContains(t, err, "patterns may have at most 1024")

	in := make([]any, MaxWhereOperands)
	for i := range in {
		in[i] = fmt.Sprint(i)
	}
	_, err = Compile(s, map[string]any{"name": map[string]any{"$in": in[:MaxWhereOperands-1]}})
	require.NoError(t, err)
	_, err = Compile(s, map[string]any{"name": map[string]any{"$in": in}, "id": "x"})
	assert.ErrorContains(t, err, "more than 10000 operators and values")

	empties := make([]any, MaxWhereOperands+1)
	for i := range empties {
		empties[i] = map[string]any{}
	}
	_, err = Compile(s, map[string]any{"$or": empties})
	assert.ErrorContains(t, err, "more than 10000 operators and values")
}

func TestFormatValueIsBounded(t *testing.T) {
	assert.Equal(t, `"Aviator"`, FormatValue("Aviator"))
	long := strings.Repeat("é", 10_000)
	got := FormatValue(long)
	assert.Equal(t, `"`+strings.Repeat("é", MaxFormatted)+`"… (20000 bytes)`, got)
	list := make([]any, 10_000)
	got = FormatValue(list)
	assert.Less(t, len(got), 2*MaxFormatted)
	assert.Contains(t, got, "… (cut)")
	assert.Equal(t, `["a", 1, None, {"city": "Oslo", "geo": [1.5, True]}]`,
		FormatValue([]any{"a", int64(1), nil, map[string]any{"geo": []any{1.5, true}, "city": "Oslo"}}), "as a plan writes it")
	deep := map[string]any{"k": strings.Repeat("x", 10_000)}
	assert.Less(t, len(FormatValue([]any{deep, deep})), 2*MaxFormatted, "a long string inside is cut too")
}

// The static check of a plan reports unknown fields and operators through WhereFieldError and
// OperatorError before the run; Compile refuses the same filters with the same words, so the
// two can never disagree.
func TestCompileAndStaticCheckShareTheirWords(t *testing.T) {
	s := inventorySchema()
	tests := []struct {
		where map[string]any
		same  *QueryError
	}{
		{map[string]any{"nmae": "x"}, s.WhereFieldError("nmae")},
		{map[string]any{"price": map[string]any{"$le": 1}}, OperatorError("$le", false, "price")},
		{map[string]any{"price": map[string]any{"$and": 1}}, OperatorError("$and", false, "price")},
		{map[string]any{"$lt": 1}, OperatorError("$lt", true, "")},
		{map[string]any{"$ro": []any{}}, OperatorError("$ro", true, "")},
	}
	for _, tt := range tests {
		require.NotNil(t, tt.same, "%v", tt.where)
		_, err := Compile(s, tt.where)
		var qe *QueryError
		require.ErrorAs(t, err, &qe)
		assert.Equal(t, tt.same.Message, qe.Message)
		assert.Equal(t, tt.same.Suggestion, qe.Suggestion)
	}
	assert.Equal(t, "$lte", OperatorError("$le", false, "price").Suggestion)
	assert.Nil(t, s.WhereFieldError(s.Key))
	assert.Nil(t, s.WhereFieldError("price"))
	for _, op := range FieldOperators {
		assert.Nil(t, OperatorError(op, false, "price"), op)
		assert.NotNil(t, OperatorError(op, true, ""), op)
	}
	for _, op := range LogicalOperators {
		assert.Nil(t, OperatorError(op, true, ""), op)
		assert.NotNil(t, OperatorError(op, false, "price"), op)
	}
}
