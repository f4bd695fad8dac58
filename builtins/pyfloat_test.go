package builtins

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// The golden table of CPython's outputs runs through the sandbox (sandbox/pyfloat_test.go);
// these tests hold what it cannot reach.

func TestReprRendersFloatsInsideContainers(t *testing.T) {
	l := starlark.NewList([]starlark.Value{starlark.Float(1234567.0), starlark.MakeInt(2)})
	l.Append(l) // a list that holds itself
	d := starlark.NewDict(1)
	require.NoError(t, d.SetKey(starlark.Float(1e16), starlark.Tuple{starlark.Float(math.Copysign(0, -1))}))
	require.NoError(t, d.SetKey(starlark.MakeInt(1), d))
	s := starlark.NewSet(1)
	require.NoError(t, s.Insert(starlark.Float(math.Inf(1))))
	assert.Equal(t, "[1234567.0, 2, [...]]", Repr(l))
	assert.Equal(t, "{1e+16: (-0.0,), 1: {...}}", Repr(d))
	assert.Equal(t, "set([inf])", Repr(s))
	assert.Equal(t, `["a", None, True]`, Repr(starlark.NewList([]starlark.Value{starlark.String("a"), starlark.None, starlark.True})),
		"everything but floats renders as Starlark renders it")
}

func TestInterpolateRefusesHexOfAFloatAsPython(t *testing.T) {
	for _, c := range []string{"%x", "%o", "%X"} {
		_, err := interpolate(c, starlark.Float(3.0))
		require.Error(t, err, c)
		assert.Contains(t, err.Error(), "an integer is required, not float")
		assert.Contains(t, err.Error(), "int(x)", "the error says what to do")
	}
	got, err := interpolate("%d|%i|%x", starlark.Tuple{starlark.Float(-3.7), starlark.Float(1e20), starlark.MakeInt(255)})
	require.NoError(t, err)
	assert.Equal(t, starlark.String("-3|100000000000000000000|ff"), got)
}

// The interpreter's messages survive in the copy of its %.
func TestInterpolateKeepsStarlarkErrors(t *testing.T) {
	f := starlark.Float(1.5)
	for format, want := range map[string]string{
		"%s %s":  "not enough arguments for format string",
		"%(k)s":  "format requires a mapping",
		"%":      "incomplete format",
		"%y":     "unknown conversion %y",
		"%c":     "%c format requires int or single-character string, not float",
		"":       "too many arguments for format string",
		"%(k":    "incomplete format key",
		"%s %%":  "",
		"%e":     "",
		"%5.1f%": "unknown conversion %5", // flags are the rewrite's business (pycompat)
	} {
		_, err := interpolate(format, f)
		if want == "" {
			assert.NoError(t, err, format)
			continue
		}
		if assert.Error(t, err, format) {
			assert.Equal(t, want, err.Error(), format)
		}
	}
}

// Floats and ints mix as in Python; any other operand is the interpreter's business.
func TestFloatBinaryOperands(t *testing.T) {
	z, ok, err := floatBinary(syntax.SLASHSLASH, starlark.MakeInt(1), starlark.Float(0.1))
	require.True(t, ok)
	require.NoError(t, err)
	assert.Equal(t, starlark.Float(9), z)
	_, ok, _ = floatBinary(syntax.SLASHSLASH, starlark.MakeInt(7), starlark.MakeInt(2))
	assert.False(t, ok, "int // int is the interpreter's")
	_, ok, _ = floatBinary(syntax.PERCENT, starlark.Float(1), starlark.String("a"))
	assert.False(t, ok)
	huge := starlark.MakeInt(1).Lsh(1100)
	_, ok, err = floatBinary(syntax.SLASHSLASH, huge, starlark.Float(2))
	assert.True(t, ok)
	assert.EqualError(t, err, "int too large to convert to float")
	for _, op := range []syntax.Token{syntax.SLASHSLASH, syntax.PERCENT} {
		_, ok, err = floatBinary(op, starlark.Float(1), starlark.Float(math.Copysign(0, -1)))
		assert.True(t, ok)
		assert.ErrorContains(t, err, "by zero")
	}
}

func checkFloatRepr(t *testing.T, x float64) {
	s := FloatRepr(x)
	switch {
	case math.IsNaN(x):
		require.Equal(t, "nan", s)
		return
	case math.IsInf(x, 0):
		require.Equal(t, map[bool]string{true: "inf", false: "-inf"}[x > 0], s)
		return
	}
	back, err := strconv.ParseFloat(s, 64)
	require.NoError(t, err, s)
	require.Equal(t, math.Float64bits(x), math.Float64bits(back), "%s does not read back as %v", s, x)
	// The shortest digits, as strconv finds them, in Python's notation.
	short := strconv.FormatFloat(math.Abs(x), 'e', -1, 64)
	mant, exp, _ := strings.Cut(short, "e")
	digits := strings.TrimRight(strings.Replace(mant, ".", "", 1), "0")
	if digits == "" {
		digits = "0"
	}
	e, _ := strconv.Atoi(exp)
	sci := x != 0 && (e < -4 || e >= 16)
	body := strings.TrimPrefix(s, "-")
	require.Equal(t, math.Signbit(x), strings.HasPrefix(s, "-"), s)
	if sci {
		require.Contains(t, body, "e", s)
		require.Equal(t, digits, strings.Replace(body[:strings.IndexByte(body, 'e')], ".", "", 1), s)
		return
	}
	require.NotContains(t, body, "e", s)
	require.Contains(t, body, ".", "%s: a float always shows its point", s)
	got := strings.TrimLeft(strings.TrimRight(strings.Replace(body, ".", "", 1), "0"), "0")
	if got == "" {
		got = "0"
	}
	require.Equal(t, digits, got, s)
}

// FuzzFloatRepr holds FloatRepr to what repr(float) promises: it reads back as the same float,
// with the fewest digits, positional from 1e-4 up to 1e16 and with an exponent outside.
func FuzzFloatRepr(f *testing.F) {
	for _, x := range []float64{0, 1e16, 1e-5, 1e-4, 9999999999999998, 123456789012345, 0.1, 5e-324, math.MaxFloat64, 1e22, 2.675} {
		f.Add(math.Float64bits(x))
		f.Add(math.Float64bits(-x))
	}
	f.Fuzz(func(t *testing.T, bits uint64) {
		checkFloatRepr(t, math.Float64frombits(bits))
	})
}

// FuzzFloatDivMod holds FloatDivMod to Python's invariants: the quotient is a whole number, the
// remainder has the divisor's sign (or is a zero with it) and is no larger than the divisor,
// and the two put x back together up to rounding.
func FuzzFloatDivMod(f *testing.F) {
	for _, p := range [][2]float64{{1, 0.1}, {-7, 2}, {7, -3}, {6, -3}, {-6, 3}, {1e308, 1e-308}, {5e-324, 1}, {-1e-300, 1}} {
		f.Add(math.Float64bits(p[0]), math.Float64bits(p[1]))
	}
	f.Fuzz(func(t *testing.T, xb, yb uint64) {
		x, y := math.Float64frombits(xb), math.Float64frombits(yb)
		if y == 0 || math.IsNaN(x) || math.IsNaN(y) || math.IsInf(x, 0) || math.IsInf(y, 0) {
			return
		}
		div, mod := FloatDivMod(x, y)
		require.False(t, math.IsNaN(div) || math.IsNaN(mod), "%v divmod %v", x, y)
		if !math.IsInf(div, 0) {
			require.Equal(t, math.Floor(div), div, "%v // %v = %v is not whole", x, y, div)
		}
		require.Equal(t, math.Signbit(y), math.Signbit(mod), "%v %% %v = %v", x, y, mod)
		require.LessOrEqual(t, math.Abs(mod), math.Abs(y), "%v %% %v = %v", x, y, mod)
		if q := x / y; !math.IsInf(q, 0) && math.Abs(q) < 1<<52 {
			require.InDelta(t, math.Floor(q), div, 1, "%v // %v", x, y)
		}
	})
}

// rowLike is a mapping of another type than dict, as a table's row is.
type rowLike struct{ *starlark.Dict }

func (r rowLike) String() string { return Repr(r.Dict) }

// "%(price)s" % row takes a float from a mapping the guard cannot look into: it formats it as
// Python does all the same.
func TestPercentOfAMappingFormatsItsFloats(t *testing.T) {
	d := starlark.NewDict(1)
	require.NoError(t, d.SetKey(starlark.String("price"), starlark.Float(1234567.0)))
	thread := &starlark.Thread{}
	got, err := guardMod(thread, nil, starlark.Tuple{starlark.String("%(price)s|%(price)r|%(price)g"), rowLike{d}}, nil)
	require.NoError(t, err)
	assert.Equal(t, starlark.String("1234567.0|1234567.0|1.23457e+06"), got)
	got, err = guardMethod(thread, nil, starlark.Tuple{starlark.String("{} {}"), starlark.String("format"), rowLike{d}, starlark.Float(1e16)}, nil)
	require.NoError(t, err)
	assert.Equal(t, starlark.String(`{"price": 1234567.0} 1e+16`), got)
}

// json.encode's text keeps everything but its floats: ints, strings that look like numbers
// (escaped quotes included) and the separators; floats read back exactly.
func TestJSONFloatsAsPythonRewritesOnlyFloats(t *testing.T) {
	for in, want := range map[string]string{
		`1.234567e+06`:                          `1234567.0`,
		`[-1.5e-07,1e+08,-0.0,12,-3,1e+16]`:     `[-1.5e-07,100000000.0,-0.0,12,-3,1e+16]`,
		`{"1e+06":"2.5e+06","x\"1e+06":1e+06}`:  `{"1e+06":"2.5e+06","x\"1e+06":1000000.0}`,
		`{"a\\":1.25e+06,"b":[true,null,"\\"]}`: `{"a\\":1250000.0,"b":[true,null,"\\"]}`,
		`0.30000000000000004`:                   `0.30000000000000004`,
		`[123456789012345680000]`:               `[123456789012345680000]`,
	} {
		assert.Equal(t, want, jsonFloatsAsPython(in), in)
	}
	s := `{"a":[1,2,"x"]}`
	assert.Equal(t, s, jsonFloatsAsPython(s))
}
