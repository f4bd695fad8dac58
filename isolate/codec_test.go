package isolate

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/sandbox/pycompat"
	"github.com/starplan/starplan/table"
)

// pipe encodes with one conn and decodes with another, through a buffer.
func roundTrip(t *testing.T, build func(e *encoder) error) (byte, *decoder) {
	t.Helper()
	var buf bytes.Buffer
	w := newConn(nil, &buf, 0)
	require.NoError(t, build(&w.enc))
	require.NoError(t, w.send())
	r := newConn(&buf, nil, 1<<30)
	typ, d, err := r.recv()
	require.NoError(t, err)
	return typ, d
}

// TestValueKinds: every kind of table.Row value arrives as the same Go kind; JSON would turn
// int64 into float64 and lose 1 != 1.0.
func TestValueKinds(t *testing.T) {
	values := []any{
		nil, true, false,
		int64(0), int64(1), int64(-1), int64(math.MaxInt64), int64(math.MinInt64),
		float64(1), 0.5, math.Copysign(0, -1), math.Inf(1), math.MaxFloat64,
		"", "Aviator", "ünïcødé ✓", string([]byte{0, 255, 1}),
		[]any{}, []any{int64(1), 1.0, "1", nil, []any{[]any{}}},
		map[string]any{}, map[string]any{"a": int64(1), "b": map[string]any{"a": 2.5, "c": []any{false}}},
	}
	for _, v := range values {
		t.Run(fmt.Sprintf("%T %v", v, v), func(t *testing.T) {
			_, d := roundTrip(t, func(e *encoder) error { e.reset(msgReply); return e.value(v) })
			got := d.value()
			require.NoError(t, d.err)
			assert.Equal(t, v, got)
			if f, ok := v.(float64); ok {
				assert.Equal(t, math.Float64bits(f), math.Float64bits(got.(float64)), "the exact bits")
			}
		})
	}
	_, d := roundTrip(t, func(e *encoder) error { e.reset(msgReply); return e.value(math.NaN()) })
	assert.True(t, math.IsNaN(d.value().(float64)))

	var e encoder
	e.reset(msgReply)
	assert.ErrorContains(t, e.value(struct{}{}), "Go type struct {}")
	assert.ErrorContains(t, e.value(map[string]any{"f": func() {}}), "cannot cross")
}

// TestRows: a table's rows are written in the schema's field order, each field's name once
// per frame; a missing field stays missing (not None), and fields outside the schema survive.
func TestRows(t *testing.T) {
	shape := []string{"item_id", "quantity_in_stock", "price"}
	rows := make([]table.Row, 1000)
	for i := range rows {
		rows[i] = table.Row{"item_id": fmt.Sprintf("SG%03d", i), "quantity_in_stock": int64(i), "price": float64(i) + 0.5}
	}
	rows[1] = table.Row{"item_id": "SG001", "price": nil}
	rows[2] = table.Row{"item_id": "SG002", "colour": "red", "tags": []any{"a"}}
	rows[3] = table.Row{}
	var e encoder
	e.reset(msgReply)
	require.NoError(t, e.rows(rows, shape, nil))
	assert.LessOrEqual(t, len(e.buf), 1000*(1+1+7+3+9+1)+100, "a row costs its mask, its values and its count of other fields")
	d := newDecoder(e.buf[5:])
	assert.Equal(t, rows, d.rows(nil))
	require.NoError(t, d.err)

	e.reset(msgReply)
	require.NoError(t, e.rows(nil, shape, nil))
	d = newDecoder(e.buf[5:])
	assert.Empty(t, d.rows(nil))
	require.NoError(t, d.err)
}

// TestRowCache: a row the worker already holds crosses as its number; the worker hands out the
// very map it decoded before; a full cache keeps crossing the rows it holds as numbers, and is
// stale when runs hardly use it.
func TestRowCache(t *testing.T) {
	shape := []string{"item_id", "price"}
	a, b, c := table.Row{"item_id": "A", "price": 1.0}, table.Row{"item_id": "B", "price": 2.0}, table.Row{"item_id": "C"}
	sent := newRowCache(DefaultRowCache, nil)
	var held []table.Row
	send := func(rs ...table.Row) ([]table.Row, int) {
		var e encoder
		e.reset(msgReply)
		require.NoError(t, e.rows(rs, shape, sent))
		d := newDecoder(bytes.Clone(e.buf[5:]))
		got := d.rows(&held)
		require.NoError(t, d.err)
		return got, len(e.buf)
	}
	got, first := send(a, b)
	assert.Equal(t, []table.Row{a, b}, got)
	require.Len(t, held, 2)

	got, again := send(b, c, a)
	assert.Equal(t, []table.Row{b, c, a}, got)
	assert.Less(t, again, first+12, "a and b cross as numbers")
	assert.Equal(t, reflect.ValueOf(held[1]).UnsafePointer(), reflect.ValueOf(got[0]).UnsafePointer(), "the worker's own map for b")
	assert.Len(t, held, 3)

	// An equal row in another map is another row: only the map says which version it is.
	b2 := table.Row{"item_id": "B", "price": 2.5}
	got, _ = send(b2)
	assert.Equal(t, []table.Row{b2}, got)

	// A cache without room keeps what it holds: those rows still cross as numbers, new ones
	// cross whole and are not kept.
	sent.limit = sent.allowance()
	d2 := table.Row{"item_id": "D", "price": 4.0}
	got, _ = send(a, d2)
	assert.Equal(t, []table.Row{a, d2}, got)
	assert.Len(t, held, 4, "d is not kept")
	assert.Len(t, sent.order, 4)
	assert.LessOrEqual(t, sent.allowance(), sent.limit)
	_, alone := send(d2)
	got, both := send(d2, a)
	assert.Equal(t, []table.Row{d2, a}, got)
	assert.Less(t, both, alone+3, "a still crosses as its number")
	assert.Equal(t, reflect.ValueOf(held[0]).UnsafePointer(), reflect.ValueOf(got[1]).UnsafePointer(), "the worker's own map for a")
	assert.Len(t, held, 4)

	// A full cache that recent runs hardly used is stale: the pool replaces the worker. Until
	// then the record still counts every row the worker holds.
	kept := sent.allowance()
	assert.False(t, sent.startRun(), "the last run used it")
	stale := false
	for range 4 {
		stale = sent.startRun()
	}
	assert.True(t, stale)
	assert.Equal(t, kept, sent.allowance(), "the worker still holds its rows")
	assert.Len(t, sent.order, len(held))

	var e encoder
	e.reset(msgReply)
	e.uvarint(1)
	e.uvarint(0)
	e.uvarint(refCached + 7)
	d := newDecoder(e.buf[5:])
	d.rows(&held)
	assert.ErrorIs(t, d.err, errMalformed, "a number the worker does not hold")
}

func TestMessagesRoundTrip(t *testing.T) {
	t.Run("run", func(t *testing.T) {
		m := &runMsg{
			Job: sandbox.Request{
				Reply: "x = 1", Bare: true, Inputs: map[string]any{"user_request": "buy 2"},
				Globals: []string{"STATUS", "answer_text"},
				Limits:  sandbox.Limits{MaxSteps: 7, Timeout: 3 * time.Second, MaxOutput: 5, MaxMemory: 1 << 20, MaxProgram: 9, MaxNesting: 4},
				Now:     time.Date(2025, 3, 14, 17, 9, 26, 123, time.FixedZone("UTC+2", 2*3600)),
			},
			Schemas: `[{"name":"inventory"}]`, Names: []string{"inventory", "transactions"},
			GoLimit: 1, MemCeiling: 2, DataLimit: 3, CPUSeconds: 4,
		}
		typ, d := roundTrip(t, func(e *encoder) error { return e.run(m) })
		assert.Equal(t, msgRun, typ)
		got := d.run()
		require.NoError(t, d.err)
		assert.True(t, m.Job.Now.Equal(got.Job.Now))
		assert.Equal(t, m.Job.Now.Format(time.RFC3339Nano), got.Job.Now.Format(time.RFC3339Nano), "the same wall clock and offset")
		got.Job.Now = m.Job.Now
		assert.Equal(t, m, got)

		m.Job.Globals = nil
		_, d = roundTrip(t, func(e *encoder) error { return e.run(m) })
		assert.Nil(t, d.run().Job.Globals, "nil (every global) stays nil")
		m.Job.Globals = []string{}
		_, d = roundTrip(t, func(e *encoder) error { return e.run(m) })
		assert.Equal(t, []string{}, d.run().Job.Globals, "no global at all stays empty")

		m.Job.Inputs = map[string]any{"f": func() {}}
		_, err := func() (byte, error) { var e encoder; return 0, e.run(m) }()
		assert.ErrorContains(t, err, "cannot cross", "an input that is not a plain value is refused")
	})
	t.Run("calls", func(t *testing.T) {
		where := map[string]any{"price": map[string]any{"$lt": int64(100)}}
		for _, c := range []*call{
			{op: opLen, table: "inventory"},
			{op: opFind, table: "inventory", where: where, limit: 3, reverse: true},
			{op: opFind, table: "inventory"},
			{op: opCount, table: "inventory", where: where},
			{op: opGet, table: "inventory", key: "SG001"},
			{op: opGet, table: "numbers", key: int64(7)},
			{op: opInsert, table: "inventory", row: table.Row{"item_id": "SG9", "price": 1.0}},
			{op: opUpdate, table: "inventory", row: table.Row{"price": 2.0}, where: where, limit: 1},
			{op: opRemove, table: "inventory", where: where},
		} {
			typ, d := roundTrip(t, func(e *encoder) error { return e.call(c) })
			assert.Equal(t, msgCall, typ)
			assert.Equal(t, c, d.call())
			require.NoError(t, d.err)
		}
	})
	t.Run("answers", func(t *testing.T) {
		rows := []table.Row{{"item_id": "SG001", "quantity_in_stock": int64(3)}}
		for _, tc := range []struct {
			op byte
			a  *answer
		}{
			{opLen, &answer{n: 6}},
			{opFind, &answer{rows: rows, shape: []string{"item_id"}, total: 3, more: true}},
			{opFind, &answer{}},
			{opGet, &answer{row: rows[0]}},
			{opGet, &answer{}},
			{opInsert, &answer{key: "TXN002"}},
			{opInsert, &answer{key: int64(2)}},
			{opUpdate, &answer{n: 2}},
		} {
			_, d := roundTrip(t, func(e *encoder) error { return e.answer(tc.op, tc.a) })
			want := *tc.a
			want.shape = nil
			assert.Equal(t, &want, d.answer(tc.op, nil))
			require.NoError(t, d.err)
		}
	})
	t.Run("done", func(t *testing.T) {
		res := &sandbox.Result{
			Outcome: sandbox.OutcomeOK, Program: "x = 1",
			Diagnostics: diag.List{{Stage: diag.StageRun, Code: "c", Line: 1, Col: 2, Message: "m", Hint: "h"}},
			Stdout:      "hi\n", StdoutTruncated: true,
			Rewrites: []pycompat.Rewrite{{Line: 3, Rule: "r", Before: "b", After: "a"}},
			Globals:  map[string]any{"STATUS": "success", "n": int64(2)},
			Steps:    42, Duration: time.Millisecond,
		}
		_, d := roundTrip(t, func(e *encoder) error { e.done(done{Res: res, VMData: 5}); return nil })
		assert.Equal(t, done{Res: res, VMData: 5}, d.done())
		require.NoError(t, d.err)

		res.Outcome, res.Limit = sandbox.OutcomeLimitExceeded, sandbox.LimitMemory
		_, d = roundTrip(t, func(e *encoder) error { e.done(done{Res: res}); return nil })
		got := d.done().Res
		assert.Nil(t, got.Globals, "a run that did not end ok sends no globals")
		assert.Equal(t, sandbox.LimitMemory, got.Limit)
		assert.NotNil(t, res.Globals, "the worker's own result is left as it was")

		res.Outcome, res.Globals = sandbox.OutcomeOK, map[string]any{"f": func() {}}
		_, d = roundTrip(t, func(e *encoder) error { e.done(done{Res: res, VMData: 5}); return nil })
		m := d.done()
		require.NoError(t, d.err, "globals that cannot cross (a defect) leave the frame whole")
		assert.Nil(t, m.Res.Globals)
		assert.Equal(t, "hi\n", m.Res.Stdout)
		assert.Equal(t, int64(5), m.VMData)
	})
}

// fill sets every field of v, recursively, to a non-zero value the protocol can carry, each
// different from the others (n counts them). A field of an interface type other than any (the
// job's View) is left for the caller.
func fill(t *testing.T, v reflect.Value, path string, n *int) {
	*n++
	i := *n
	switch v.Type() {
	case reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(time.Unix(1_700_000_000+int64(i), int64(i)).In(time.FixedZone(fmt.Sprint("Z", i), i*60))))
		return
	case reflect.TypeFor[any]():
		v.Set(reflect.ValueOf(fmt.Sprint(path, i)))
		return
	case reflect.TypeFor[map[string]any]():
		v.Set(reflect.ValueOf(map[string]any{path: []any{int64(i), float64(i) + 0.5, "s", true, nil, map[string]any{"k": int64(-i)}}}))
		return
	}
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(-int64(i % 100))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(i % 100))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(i) + 0.25)
	case reflect.String:
		v.SetString(fmt.Sprint(path, "=", i))
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for j := range 2 {
			fill(t, s.Index(j), fmt.Sprint(path, "[", j, "]"), n)
		}
		v.Set(s)
	case reflect.Map:
		require.Equal(t, reflect.String, v.Type().Key().Kind(), "%s: maps cross with string keys", path)
		m := reflect.MakeMapWithSize(v.Type(), 2)
		for j := range 2 {
			k, x := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			k.SetString(fmt.Sprint(path, "{", j, "}"))
			fill(t, x, fmt.Sprint(path, "{", j, "}"), n)
			m.SetMapIndex(k, x)
		}
		v.Set(m)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(t, p.Elem(), path, n)
		v.Set(p)
	case reflect.Struct:
		for j := range v.NumField() {
			f := v.Type().Field(j)
			require.True(t, f.IsExported(), "%s.%s: fill sets exported fields only", path, f.Name)
			fill(t, v.Field(j), path+"."+f.Name, n)
		}
	case reflect.Interface:
	default:
		t.Fatalf("fill: %s is of kind %s, which the protocol does not carry", path, v.Kind())
	}
}

// TestRecordsCrossWhole: every field of a job and of a result, and of the messages around them,
// filled by reflection with a non-zero value, arrives equal, so a field added to sandbox.Request
// or sandbox.Result (or to a diagnostic, a rewrite, the limits) cannot be forgotten on the way
// to the worker and back.
func TestRecordsCrossWhole(t *testing.T) {
	var n int
	t.Run("job", func(t *testing.T) {
		st := openStore(t)
		var job sandbox.Request
		fill(t, reflect.ValueOf(&job).Elem(), "job", &n)
		job.View = st.Stage()
		m, err := (&Pool{}).runMsg(job)
		require.NoError(t, err)
		_, d := roundTrip(t, func(e *encoder) error { return e.run(m) })
		got := d.run()
		require.NoError(t, d.err)
		var spec envSpec
		require.NoError(t, json.Unmarshal([]byte(got.Schemas), &spec))
		assert.Equal(t, job.View.Names(), got.Names)
		job.View = nil // the worker's own view (a remote one) stands in for the pool's
		assert.Equal(t, job, got.request(nil, spec.Helpers), "the job the worker runs is the job the pool was given")
	})
	t.Run("run", func(t *testing.T) {
		var m runMsg
		fill(t, reflect.ValueOf(&m).Elem(), "run", &n)
		_, d := roundTrip(t, func(e *encoder) error { return e.run(&m) })
		got := d.run()
		require.NoError(t, d.err)
		m.Job.Helpers = "" // travels in Schemas
		assert.Equal(t, &m, got)
	})
	t.Run("done", func(t *testing.T) {
		var m done
		fill(t, reflect.ValueOf(&m).Elem(), "done", &n)
		m.Res.Outcome = sandbox.OutcomeOK // only an ok run's globals cross
		_, d := roundTrip(t, func(e *encoder) error { e.done(m); return nil })
		got := d.done()
		require.NoError(t, d.err)
		assert.Equal(t, m, got)
	})
	t.Run("ready", func(t *testing.T) {
		var m ready
		fill(t, reflect.ValueOf(&m).Elem(), "ready", &n)
		_, d := roundTrip(t, func(e *encoder) error { e.ready(m); return nil })
		got := d.ready()
		require.NoError(t, d.err)
		assert.Equal(t, m, got)
	})
}

// A record with a field the protocol cannot carry stops the program at its start, naming the
// field, rather than leaving the field behind.
func TestRecordCodecRefusesWhatCannotCross(t *testing.T) {
	assert.PanicsWithValue(t, "isolate: struct { Ch chan int }.Ch of type chan int cannot cross to the worker: give its kind a wire form in record.go, or list the field in notSent",
		func() { recordCodec[struct{ Ch chan int }]() })
	assert.Panics(t, func() { recordCodec[struct{ v table.View }]() }, "unexported")
	assert.Panics(t, func() { recordCodec[struct{ V table.View }]() }, "an interface other than any")
	assert.Panics(t, func() { recordCodec[struct{ M map[int]string }]() }, "a map keyed by other than strings")
}

// TestErrorsKeepTheirTypes: the view's typed errors arrive as the same types with the same
// messages, so errors.As in the builtins and the message a plan's author reads are unchanged.
func TestErrorsKeepTheirTypes(t *testing.T) {
	fe := &table.FieldError{Table: "inventory", Key: "SG001", Field: "price", Value: -1.0, Rule: "must be >= 0"}
	qe := &table.QueryError{Table: "inventory", Message: "unknown field pricee", Suggestion: "price"}
	wrapped := fmt.Errorf("validating: %w", fe)
	for _, err := range []error{fe, qe, wrapped, errors.New("plain")} {
		_, d := roundTrip(t, func(e *encoder) error { return e.answer(opInsert, &answer{err: err}) })
		got := d.answer(opInsert, nil).err
		require.NoError(t, d.err)
		assert.Equal(t, err.Error(), got.Error())
		var gfe *table.FieldError
		var gqe *table.QueryError
		assert.Equal(t, errors.As(err, new(*table.FieldError)), errors.As(got, &gfe))
		assert.Equal(t, errors.As(err, new(*table.QueryError)), errors.As(got, &gqe))
		if gfe != nil {
			assert.Equal(t, fe, gfe)
		}
		if gqe != nil {
			assert.Equal(t, qe, gqe)
		}
	}
}

// TestHostileFrames: a truncated or corrupt payload fails to decode; it never panics and never
// allocates what its lengths claim.
func TestHostileFrames(t *testing.T) {
	var e encoder
	res := &sandbox.Result{Outcome: sandbox.OutcomeOK, Globals: map[string]any{"l": []any{int64(1), "x", map[string]any{"k": 1.5}}}}
	e.done(done{Res: res})
	payload := e.buf[5:]
	for n := range len(payload) {
		d := newDecoder(bytes.Clone(payload[:n]))
		d.done()
		assert.Error(t, d.err, "truncated at %d of %d bytes", n, len(payload))
	}
	huge := []byte{tagList, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}
	d := newDecoder(huge)
	assert.Empty(t, d.value())
	assert.ErrorIs(t, d.err, errMalformed, "a count larger than the payload could hold")

	// A result claiming a million diagnostics in a frame of a million zero bytes: a diagnostic
	// takes at least 6 bytes, so the claim fails before anything is allocated for it.
	claim := binary.AppendUvarint([]byte{1, 0, 0, 0}, 1<<20)
	claim = append(claim, make([]byte, 1<<20)...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	d = newDecoder(claim)
	d.done()
	runtime.ReadMemStats(&after)
	assert.ErrorIs(t, d.err, errMalformed, "more elements than the frame could hold")
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(16<<20), "nothing like 80 MB allocated for the claim")

	deep := bytes.Repeat([]byte{tagList, 1}, 10_000)
	d = newDecoder(deep)
	d.value()
	assert.ErrorIs(t, d.err, errMalformed, "nesting is bounded")

	c := newConn(bytes.NewReader([]byte{0xff, 0xff, 0xff, 0x7f, msgDone}), nil, 1<<20)
	_, _, err := c.recv()
	var tl *errTooLarge
	assert.ErrorAs(t, err, &tl, "a frame over the limit is refused before it is read")
	c = newConn(bytes.NewReader([]byte{0, 0, 0, 0}), nil, 1<<20)
	_, _, err = c.recv()
	assert.ErrorIs(t, err, errMalformed)
	c = newConn(bytes.NewReader([]byte{9, 0, 0, 0, msgDone, 1}), nil, 1<<20)
	_, _, err = c.recv()
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
}

// FuzzDecode: no input makes a decoder panic.
func FuzzDecode(f *testing.F) {
	var e encoder
	e.done(done{Res: &sandbox.Result{Outcome: sandbox.OutcomeOK, Globals: map[string]any{"a": []any{int64(1)}}}})
	f.Add(bytes.Clone(e.buf[5:]))
	_ = e.call(&call{op: opUpdate, table: "t", row: table.Row{"a": 1.0}, where: map[string]any{"k": "v"}})
	f.Add(bytes.Clone(e.buf[5:]))
	f.Fuzz(func(t *testing.T, b []byte) {
		newDecoder(bytes.Clone(b)).done()
		newDecoder(bytes.Clone(b)).call()
		newDecoder(bytes.Clone(b)).run()
		for op := opLen; op <= opRemove; op++ {
			var held []table.Row
			newDecoder(bytes.Clone(b)).answer(op, &held)
		}
	})
}
