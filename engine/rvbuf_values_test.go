package engine

// rvbuf: the audit6e encoder's shortcuts held to encoding/json: one encoder's shapes carried
// across records whose tables' columns change, whole floats as integers, and the plain JSON
// reader that stands in for json.Valid.

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/internal/testtier"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

// rvbufFloats are the floats around the integer shortcut's edges and encoding/json's format
// switches.
var rvbufFloats = []float64{0, math.Copysign(0, -1), 1, -1, 0.5, 1e15, -1e15, 1<<53 - 1, 1 << 53, 1<<53 + 2, -(1 << 53), -(1<<53 - 1),
	1e20, 1e21, -1e21, 1e22, 1e-6, 1e-7, 123456789012345680, math.MaxFloat64, math.SmallestNonzeroFloat64, 9.999999999999999e20, 4503599627370497}

// rvbufValue is a random row value: the kinds rows hold, nested, with names from a small pool
// (escapes, HTML characters, non-ASCII) so that objects share, extend and cut each other's
// shapes.
func rvbufValue(rnd *rand.Rand, names []string, depth int) any {
	switch k := rnd.IntN(10); {
	case k == 0:
		return nil
	case k == 1:
		return names[rnd.IntN(len(names))] + " text"
	case k == 2:
		return rnd.Int64N(1<<60) - 1<<59
	case k == 3:
		return rvbufFloats[rnd.IntN(len(rvbufFloats))]
	case k == 4:
		return math.Trunc(rnd.NormFloat64() * math.Pow(10, float64(rnd.IntN(22))))
	case k == 5:
		return rnd.IntN(2) == 0
	case k == 6 && depth < 3:
		l := make([]any, rnd.IntN(4))
		for i := range l {
			l[i] = rvbufValue(rnd, names, depth+1)
		}
		return l
	case k >= 7 && depth < 3:
		return rvbufObject(rnd, names, depth+1)
	}
	return rnd.Float64() * 1000
}

func rvbufObject(rnd *rand.Rand, names []string, depth int) map[string]any {
	m := map[string]any{}
	for range rnd.IntN(len(names) + 1) {
		m[names[rnd.IntN(len(names))]] = rvbufValue(rnd, names, depth)
	}
	return m
}

// One encoder writes a long run of records, as a batch's and the background writer's do,
// whose rows have the names of other records' rows in other orders, more of them, fewer, and
// nested objects with the same names: every record is encoding/json's bytes.
func TestRvbufOneEncoderAcrossChangingShapes(t *testing.T) {
	t.Parallel()
	names := []string{"item_id", "name", "price", "quantity_in_stock", "a\"b", "<tag>", "é", "x\u2028y", "", "a&b", "\\", "z"}
	rnd := rand.New(rand.NewPCG(3, 4))
	var batch recordEncoder
	for i := range testtier.Size(500, 3000) { // 17 s under -race at 3,000 on a busy CI machine
		r := fullRecord()
		r.Writes = nil
		cs := table.ChangeSet{}
		for _, tbl := range []string{"inventory", "transactions", "other"}[:1+rnd.IntN(3)] {
			tc := &table.TableChanges{Key: "item_id"}
			for range rnd.IntN(4) {
				tc.Inserted = append(tc.Inserted, table.Row(rvbufObject(rnd, names, 0)))
			}
			for range rnd.IntN(3) {
				before := table.Row(rvbufObject(rnd, names, 0))
				after := table.Row(rvbufObject(rnd, names, 0))
				tc.Updated = append(tc.Updated, table.Update{Key: rvbufValue(rnd, names, 2), Before: before, After: after, Fields: []string{"price"}})
			}
			cs[tbl] = tc
		}
		r.Changes = cs
		s := r.stored()
		want, err := json.Marshal(s.cut())
		require.NoError(t, err)
		got, err := batch.record(nil, s)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "record %d", i)
	}
}

// Whole floats, and those around them, in a row, a key and a range of a queued record, through
// the store: the bytes stored are encoding/json's and the hash chained.
func TestRvbufFloatEdgesThroughTheLog(t *testing.T) {
	e := tailEngine(t)
	ctx := context.Background()
	var ids []string
	wayfarer := example(t, "02_purchase_wayfarer.star")
	for _, f := range rvbufFloats {
		if f == math.MaxFloat64 {
			continue // a price the store may refuse as too large: not what this test is about
		}
		lit := strings.ReplaceAll(fmt.Sprintf("%#v", f), "+", "")
		// A pending run whose reads' filters hold f, and a refused one whose changes hold it.
		pending := fmt.Sprintf(`n = inventory_tbl.count({"price": {"$gt": %[1]s}})
m = inventory_tbl.search({"price": %[1]s})
`, lit) + wayfarer
		res, err := e.Run(ctx, Request{Reply: pending, UserRequest: fmt.Sprint(f)})
		require.NoError(t, err)
		require.True(t, res.Pending, "%v: %s", f, res.Diagnostics)
		ids = append(ids, res.RunID)
		plan := fmt.Sprintf(`transactions_tbl.insert({"transaction_id": next_transaction_id(transactions_tbl), "customer_name": "x", "transaction_summary": "y",
    "transaction_amount": %[1]s, "balance_after_transaction": get_current_balance(transactions_tbl) + %[1]s, "timestamp": now()})
STATUS = "success"
answer_text = "Done."`, lit)
		res, err = e.Run(ctx, Request{Reply: plan, UserRequest: fmt.Sprint(f)})
		require.NoError(t, err)
		ids = append(ids, res.RunID)
	}
	want := map[string]string{}
	for _, q := range e.audit.tail() {
		raw, err := json.Marshal(q.rec.stored().cut())
		require.NoError(t, err)
		got, err := q.EncodeJSON()
		require.NoError(t, err)
		require.Equal(t, string(raw), string(got), "run %s (%s)", q.rec.ID, q.rec.Request)
		want[q.rec.ID] = string(raw)
	}
	var all strings.Builder
	for _, raw := range want {
		all.WriteString(raw)
	}
	for _, f := range []string{`"transaction_amount":-1e+21,`, `"transaction_amount":4503599627370497,`, `"transaction_amount":5e-324,`, `"$gt":-9007199254740992}`} {
		require.Contains(t, all.String(), f, "the floats reach the records")
	}
	require.NoError(t, e.audit.flush())
	for _, id := range ids {
		var raw json.RawMessage
		_, err := e.st.GetSys(auditCollection, id, &raw)
		require.NoError(t, err)
		require.Equal(t, want[id], string(raw))
	}
	require.Equal(t, "[]", chainProblems(t, e))
}

// Non-finite floats a plan makes never reach a record (the run refuses them, or its record
// holds their names), so they never leave a batch that cannot be written at the queue's head.
func TestRvbufNonFiniteFloatsNeverBlockTheLog(t *testing.T) {
	e := tailEngine(t)
	ctx := context.Background()
	for _, f := range []string{`float("nan")`, `float("inf")`, `float("-inf")`} {
		for _, plan := range []string{
			`it = inventory_tbl.get({"price": %s})`,
			`it = inventory_tbl.search({"price": {"$lt": %s}})`,
			`it = inventory_tbl.get({"item_id": %s})`,
			`it = inventory_tbl.get(None)
inventory_tbl.update({"price": %s}, it)`,
			`inventory_tbl.insert({"item_id": %s, "name": "x", "price": 1.0, "quantity_in_stock": 1})`,
			`x = %s`,
		} {
			plan = fmt.Sprintf(plan, f) + "\n" + `it = inventory_tbl.get(None)
inventory_tbl.update({"quantity_in_stock": 3}, it)
STATUS = "success"
answer_text = "Done."`
			_, err := e.Run(ctx, Request{Reply: plan})
			require.NoError(t, err)
			require.NoError(t, e.audit.flush(), "%s", plan)
		}
	}
	require.Equal(t, "[]", chainProblems(t, e))
}

// plainValid never calls valid what json.Valid refuses, and what it calls valid is written as
// encoding/json writes a json.RawMessage: random plain JSON, cut, spliced and mutated.
func TestRvbufPlainValidIsSure(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(5, 6))
	alphabet := []byte(`{}[]":,-+.eE0123456789tfnrulasx\/<>&` + "\x7f \t")
	var gen func(depth int) string
	gen = func(depth int) string {
		switch k := rnd.IntN(9); {
		case k == 0 && depth < 40:
			var sb strings.Builder
			sb.WriteByte('[')
			for i := range rnd.IntN(4) {
				if i > 0 {
					sb.WriteByte(',')
				}
				sb.WriteString(gen(depth + 1))
			}
			sb.WriteByte(']')
			return sb.String()
		case k == 1 && depth < 40:
			var sb strings.Builder
			sb.WriteByte('{')
			for i := range rnd.IntN(4) {
				if i > 0 {
					sb.WriteByte(',')
				}
				sb.WriteString(`"k` + fmt.Sprint(i) + `":`)
				sb.WriteString(gen(depth + 1))
			}
			sb.WriteByte('}')
			return sb.String()
		case k == 2:
			return []string{`"a"`, `""`, `"\"x\""`, `"\u00e9"`, `"\ud800"`, `"a/b"`, `"<>"`, `"\\"`, `"\q"`}[rnd.IntN(9)]
		case k == 3:
			return []string{"0", "-0", "1.5", "1e5", "1E+5", "-1e-5", "01", "1.", ".5", "-", "1e", "+1", "123456789012345678901234567890", "1e999", "0.0000001", "-0.0e-0"}[rnd.IntN(16)]
		case k == 4:
			return []string{"true", "false", "null", "tru", "nul", "falsey"}[rnd.IntN(6)]
		}
		return fmt.Sprint(rnd.IntN(100))
	}
	check := func(raw []byte) {
		if !compactASCII(raw) {
			return
		}
		if plainValid(raw) {
			require.True(t, json.Valid(raw), "plainValid calls %q valid", raw)
		}
		var e recordEncoder
		got := e.rawJSON(nil, raw)
		want, err := json.Marshal(json.RawMessage(raw))
		if err != nil {
			require.Error(t, e.err, "%q", raw)
			return
		}
		require.NoError(t, e.err, "%q", raw)
		require.Equal(t, string(want), string(got), "%q", raw)
	}
	deep := strings.Repeat("[", maxPlainDepth+5) + strings.Repeat("]", maxPlainDepth+5)
	check([]byte(deep))
	check([]byte(deep[:len(deep)-1]))
	for range testtier.Size(30_000, 200_000) { // 11 s under -race at 200,000 on a busy CI machine
		s := []byte(gen(0))
		switch rnd.IntN(4) {
		case 0:
			if len(s) > 0 {
				s = s[:rnd.IntN(len(s))]
			}
		case 1:
			for range 1 + rnd.IntN(3) {
				if len(s) > 0 {
					s[rnd.IntN(len(s))] = alphabet[rnd.IntN(len(alphabet))]
				}
			}
		case 2:
			t := []byte(gen(0))
			s = append(s, t...)
		}
		check(s)
	}
	// Filters as plans write them, through store.AppendMarshal's plain form, are sure.
	for _, w := range []any{map[string]any{"name": map[string]any{"$ieq": "a\"b\\c\u2028<>&é\x00"}}, map[string]any{"price": map[string]any{"$gt": 1e21}},
		map[string]any{"$and": []any{map[string]any{"a": int64(1)}, map[string]any{"b": []any{nil, true, -0.5}}}}} {
		raw, err := store.AppendMarshal(nil, w)
		require.NoError(t, err)
		check(raw)
	}
}

// Records larger than a pooled buffer (they grow out of it, and their buffer is not kept) among
// small ones, batch after batch: every stored record is encoding/json's bytes of its record.
func TestRvbufLargeRecordsAmongSmall(t *testing.T) {
	e := tailEngine(t)
	ctx := context.Background()
	want := map[string]string{}
	for round := range 4 {
		for i := range 12 {
			req := fmt.Sprint("small ", round, " ", i)
			if i%3 == round%3 {
				req = strings.Repeat(fmt.Sprintf("large %d %d <&> é. ", round, i), 1+(maxPooledBuf/10)*(i%4))
			}
			_, err := e.Run(ctx, Request{Reply: example(t, "03_two_item_order.star"), UserRequest: req})
			require.NoError(t, err)
		}
		for _, q := range e.audit.tail() {
			raw, err := json.Marshal(q.rec.stored().cut())
			require.NoError(t, err)
			want[q.rec.ID] = string(raw)
		}
		require.NoError(t, e.audit.flush())
	}
	require.Len(t, want, 48)
	large := 0
	for _, w := range want {
		if len(w) > maxPooledBuf {
			large++
		}
	}
	require.Positive(t, large, "no record outgrew a pooled buffer")
	for id, w := range want {
		var raw json.RawMessage
		_, err := e.st.GetSys(auditCollection, id, &raw)
		require.NoError(t, err)
		require.Equal(t, w, string(raw))
	}
	require.Equal(t, "[]", chainProblems(t, e))
}
