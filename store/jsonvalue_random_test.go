package store

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// randFilterValue is a random value of the kinds a where-filter holds, with hostile strings
// (escapes, HTML, invalid UTF-8, U+2028) and floats at every exponent, both zeros and integers.
func randFilterValue(r *rand.Rand, depth int) any {
	switch k := r.IntN(9); {
	case k == 0:
		return nil
	case k == 1:
		return r.IntN(2) == 0
	case k == 2:
		return int64(r.Uint64())
	case k == 3:
		f := math.Float64frombits(r.Uint64())
		if math.IsNaN(f) || math.IsInf(f, 0) {
			f = float64(r.IntN(5)) - 2 // 0, ±1, ±2 as floats
			if r.IntN(2) == 0 {
				f = math.Copysign(0, -1)
			}
		}
		return f
	case k == 4:
		return float64(r.Int64N(1<<20)) * math.Pow(10, float64(r.IntN(50)-25))
	case k == 5 || depth > 2:
		return randString(r)
	case k == 6 || k == 7:
		m := map[string]any{}
		for range r.IntN(12) {
			m[randString(r)] = randFilterValue(r, depth+1)
		}
		return m
	default:
		l := make([]any, r.IntN(4))
		for i := range l {
			l[i] = randFilterValue(r, depth+1)
		}
		return l
	}
}

// AppendMarshal is json.Marshal byte for byte, and whereEqual is equality of json.Marshal, on
// random filters.
func TestAppendMarshalAndWhereEqualOnRandomFilters(t *testing.T) {
	r := rand.New(rand.NewPCG(32, 7))
	var prev map[string]any
	for i := range 3000 {
		w := map[string]any{"f": randFilterValue(r, 0)}
		want, err := json.Marshal(w)
		require.NoError(t, err)
		got, err := AppendMarshal(nil, w)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "%d: %#v", i, w)
		pj, _ := json.Marshal(prev)
		require.Equal(t, string(pj) == string(want), whereEqual(prev, w), "%s vs %s", pj, want)
		// The same filter rebuilt (fresh maps): equal.
		var back map[string]any
		require.NoError(t, json.Unmarshal(want, &back))
		bj, _ := json.Marshal(back)
		require.Equal(t, string(bj) == string(want), whereEqual(back, w))
		prev = w
	}
}

func randString(r *rand.Rand) string {
	const alphabet = "aZ09 \"\\/<>&\x00\x01\x1f\x7f\b\f\n\r\t\xff\xe2\x80\xa8\xe2\x80\xa9é漢🙂\xed\xa0\x80\xc0\xaf"
	b := make([]byte, r.IntN(12))
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}
