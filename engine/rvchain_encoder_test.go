package engine

// rvchain: an attacker's review of the record encoder's shortcuts (4dd0bce, b812caa): a hostile
// plan chooses its rows' names and its filters, and the record's bytes are what the chain
// hashes and what a later starplan reads; each shortcut must write what encoding/json writes.

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/internal/testtier"
)

// rvObject is a random row: names from a small set (so that rows often have as many names as an
// earlier one, the same or others, and nested objects share names with their parents), values
// of every kind a row holds, objects and lists nested.
func rvObject(rnd *rand.Rand, depth int) map[string]any {
	names := []string{"a", "b", "c", "d", "<", "", "é", "a\u2028"}
	m := map[string]any{}
	for range rnd.IntN(5) {
		m[names[rnd.IntN(len(names))]] = rvValue(rnd, depth)
	}
	return m
}

func rvValue(rnd *rand.Rand, depth int) any {
	switch k := rnd.IntN(9); {
	case k == 0:
		return nil
	case k == 1:
		return []string{"x", "<&>", "\u2028", "q\"", ""}[rnd.IntN(5)]
	case k == 2:
		return int64(rnd.IntN(2000) - 1000)
	case k == 3:
		return rnd.Float64() * 1e3
	case k == 4:
		return rnd.IntN(2) == 0
	case k <= 6 && depth < 2:
		return rvObject(rnd, depth+1)
	case k == 7 && depth < 2:
		l := make([]any, rnd.IntN(3))
		for i := range l {
			l[i] = rvValue(rnd, depth+1)
		}
		return l
	}
	return "s"
}

// One encoder writes a stream of random rows (its shapes carried from row to row, as in a
// record): each as json.Marshal writes it.
func TestRvchainObjectShapesRandom(t *testing.T) {
	rnd := rand.New(rand.NewPCG(21, 22))
	var e recordEncoder
	for range testtier.Size(5_000, 2_000_000) {
		m := rvObject(rnd, 0)
		want, err := json.Marshal(m)
		require.NoError(t, err)
		got := e.object(nil, m)
		require.NoError(t, e.err)
		require.Equal(t, string(want), string(got))
	}
	require.Positive(t, e.nshape)
}

// The same count of names as a shape but other names, or a name of the shape missing: not
// written in the shape's order, nor with a value of the shape's missing name.
func TestRvchainObjectShapesNearMisses(t *testing.T) {
	var e recordEncoder
	rows := []map[string]any{
		{"a": 1, "b": 2, "c": 3},
		{"a": 1, "b": 2, "d": 3},   // same count, one other name
		{"d": 1, "c": 2, "b": 3},   // same count, other order in the map
		{"a": 1, "b": 2},           // fewer
		{"b": 1, "a": 2, "c": nil}, // the first shape, a nil value
		{"A": 1, "B": 2, "C": 3},   // case
		{"a ": 1, "b": 2, "c": 3},  // a name that sorts elsewhere
		{"c": 1, "b": 2, "a": 3},
		{"x": map[string]any{"a": 1, "b": 2, "c": 3}, "y": map[string]any{"a": 1, "b": 2, "e": 3}, "z": 0},
	}
	for round := range 3 {
		for _, m := range rows {
			want, err := json.Marshal(m)
			require.NoError(t, err)
			require.Equal(t, string(want), string(e.object(nil, m)), "round %d", round)
		}
	}
}

// A predicate read's filter, as a hostile plan can make it (store.AppendMarshal's compact form,
// or any valid JSON with escapes, HTML characters, white space, \u2028 written out or as an
// escape): rawJSON writes what json.Marshal of the json.RawMessage writes.
func TestRvchainRawJSONRandomFilters(t *testing.T) {
	rnd := rand.New(rand.NewPCG(23, 24))
	pieces := []string{`"a"`, `"<b>"`, `"\u2028"`, "\"\u2028\"", `"\u003c"`, `"x\"y"`, `"\\"`, `1`, `-0.5e3`, `true`, `null`, `"&amp;"`, `"é"`, `"\/"`}
	var gen func(depth int) string
	gen = func(depth int) string {
		switch k := rnd.IntN(4); {
		case k == 0 && depth < 3:
			var parts []string
			for range rnd.IntN(3) {
				parts = append(parts, pieces[rnd.IntN(len(pieces))]+":"+gen(depth+1))
			}
			return "{" + strings.Join(parts, ",") + "}"
		case k == 1 && depth < 3:
			var parts []string
			for range rnd.IntN(3) {
				parts = append(parts, gen(depth+1))
			}
			return "[" + strings.Join(parts, ",") + "]"
		}
		return pieces[rnd.IntN(len(pieces))]
	}
	for i := range testtier.Size(8_000, 1_000_000) {
		raw := gen(0)
		if i%5 == 0 {
			raw = strings.ReplaceAll(raw, ",", " , ")
		}
		if i%7 == 0 { // not valid: an error either way
			raw = raw[:len(raw)/2]
		}
		want, wantErr := json.Marshal(json.RawMessage(raw))
		var e recordEncoder
		got := e.rawJSON([]byte("x"), json.RawMessage(raw))
		if wantErr != nil {
			require.Error(t, e.err, raw)
			continue
		}
		require.NoError(t, e.err, raw)
		require.Equal(t, "x"+string(want), string(got), fmt.Sprintf("%q", raw))
	}
}
