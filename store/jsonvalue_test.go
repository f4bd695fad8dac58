package store

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// AppendMarshal writes what json.Marshal writes, byte for byte: a predicate read's filter is
// stored in this form and compared with what an older starplan stored.
func TestAppendMarshalIsJSONMarshal(t *testing.T) {
	values := []any{
		nil, "", "plain", "<a href=\"x\">&</a>", "tab\t nl\n cr\r bs\b ff\f \x00 \x1f \x7f", "bad \xff utf8 \xe2\x82",
		"line\u2028para\u2029", "ünï©ødé 漢字 🙂", true, false, int64(0), int64(-42), int64(math.MaxInt64), int64(math.MinInt64), 7,
		0.0, math.Copysign(0, -1), 1.5, -2.25, 100.0, 1e-6, 1e-7, 9.99e-7, 1e20, 1e21, 1.23456789e25, -5e-324, math.MaxFloat64, 0.1 + 0.2,
		map[string]any(nil), map[string]any{}, []any(nil), []any{},
		map[string]any{"name": map[string]any{"$ieq": "Classic"}, "price": map[string]any{"$lt": 100.0, "$gte": int64(3)}},
		map[string]any{"$or": []any{map[string]any{"a": "x"}, map[string]any{"b": nil}}, "z": []any{int64(1), "two", 3.5, nil, []any{}}},
		map[string]any{"k1": 1, "k0": 2, "k10": 3, "K": 4, "é": 5, "a<b": 6, "": 7, "k2": 8, "k3": 9, "k4": 10, "k5": 11},
		time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), []string{"other", "kinds"}, map[string]int{"b": 1, "a": 2},
	}
	for _, v := range values {
		want, err := json.Marshal(v)
		require.NoError(t, err)
		got, err := AppendMarshal([]byte("prefix"), v)
		require.NoError(t, err)
		assert.Equal(t, "prefix"+string(want), string(got), "%#v", v)
	}
	for _, v := range []any{math.NaN(), math.Inf(1), map[string]any{"x": []any{math.Inf(-1)}}, make(chan int)} {
		_, want := json.Marshal(v)
		_, err := AppendMarshal(nil, v)
		assert.Error(t, want)
		assert.Error(t, err, "%#v", v)
	}
}

// AppendJSONFloat writes whole numbers by their integer's digits (its shortcut) as
// encoding/json writes them: around 2^53, where the shortcut ends, around zero, and at random.
func TestAppendJSONFloatWholeNumbers(t *testing.T) {
	check := func(f float64) {
		want, err := json.Marshal(f)
		require.NoError(t, err)
		require.Equal(t, string(want), string(AppendJSONFloat(nil, f)), "%v", f)
	}
	for _, f := range []float64{0, math.Copysign(0, -1), 1, -1, 80, 1e15, 1e16, 1e20, 1e21, 1e22, 123456789012345680, math.MaxInt64, math.MinInt64} {
		check(f)
	}
	for _, edge := range []float64{1 << 53, -(1 << 53), 1 << 63, 1 << 52} {
		for d := -4.0; d <= 4; d++ {
			check(edge + d)
			check(edge + d/2)
		}
	}
	rnd := rand.New(rand.NewPCG(7, 8))
	for range 100_000 {
		f := float64(rnd.Int64N(1<<55) - 1<<54)
		if rnd.IntN(3) == 0 {
			f = math.Trunc(rnd.NormFloat64() * math.Pow(10, float64(rnd.IntN(25))))
		}
		check(f)
	}
}

// A filter asked again is recognised without encoding it, and only when its JSON is the same.
func TestWhereEqualIsJSONEquality(t *testing.T) {
	ws := []map[string]any{
		nil, {}, {"a": "x"}, {"a": "y"}, {"b": "x"}, {"a": int64(1)}, {"a": 1.0}, {"a": 1.5}, {"a": 0.0},
		{"a": math.Copysign(0, -1)}, {"a": int64(0)}, {"a": true}, {"a": nil}, {"a": []any{"x"}}, {"a": []any{"x", nil}},
		{"a": map[string]any{"$ieq": "x"}}, {"a": map[string]any{"$ieq": "X"}}, {"a": "x", "b": "y"}, {"a": 1}, {"a": []any(nil)},
		{"a": map[string]any(nil)}, {"a": []any{}}, {"a": map[string]any{}},
	}
	for _, a := range ws {
		for _, b := range ws {
			ja, _ := json.Marshal(a)
			jb, _ := json.Marshal(b)
			assert.Equal(t, string(ja) == string(jb), whereEqual(a, b), "%s vs %s", ja, jb)
		}
	}
}

// AppendJSONString writes every string as encoding/json does, whichever of its bytes fall in the
// eight-byte steps: each byte value at each place of a block, and random text.
func TestAppendJSONStringIsEncodingJSON(t *testing.T) {
	check := func(s string) {
		want, err := json.Marshal(s)
		require.NoError(t, err)
		require.Equal(t, string(want), string(AppendJSONString(nil, s)), "%q", s)
	}
	for c := 0; c < 256; c++ {
		for at := 0; at < 17; at++ {
			b := []byte(strings.Repeat("abcdefgh", 3))
			b[at] = byte(c)
			check(string(b))
		}
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "Z", " ", "\"", "\\", "<", ">", "&", "\n", "\x00", "\x1f", "\x7f", "é", "\u2028", "\u2029", "日", "\xff", "\xe2\x80"}
	for range 2000 {
		var sb strings.Builder
		for range rnd.IntN(40) {
			sb.WriteString(alphabet[rnd.IntN(len(alphabet))])
		}
		check(sb.String())
	}
}

// BenchmarkAppendJSONString writes the text of a plan (the audit record's reply: quotes and line
// ends to escape every few words) and a row's plain description.
//
//	go test ./store -run '^$' -bench AppendJSONString -count 6 | tee new.txt; benchstat new.txt
func BenchmarkAppendJSONString(b *testing.B) {
	plan, err := os.ReadFile("../testdata/examples/03_two_item_order.star")
	require.NoError(b, err)
	for _, c := range []struct{ name, s string }{
		{"plan", string(plan)},
		{"plain", "Classic round profile with minimalist metal frames, offering a timeless and versatile style that fits both casual and formal wear."},
	} {
		b.Run(c.name, func(b *testing.B) {
			buf := make([]byte, 0, 2*len(c.s)+2)
			b.SetBytes(int64(len(c.s)))
			for b.Loop() {
				buf = AppendJSONString(buf[:0], c.s)
			}
		})
	}
}
