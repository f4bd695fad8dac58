package builtins

import (
	"errors"
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.starlark.net/starlark"
)

// The expected strings and messages below were produced by CPython 3.11's format().

type formatCase struct {
	v    starlark.Value
	spec string
	want string // the output, or the error message for formatErrors
}

var negZero = math.Copysign(0, -1)

func bigInt(s string) starlark.Value {
	b, ok := new(big.Int).SetString(s, 10)
	if !ok {
		panic(s)
	}
	return starlark.MakeBigInt(b)
}

var formatCases = []formatCase{
	{starlark.Float(3.0), "", "3.0"},
	{starlark.Float(1e+16), "", "1e+16"},
	{starlark.Float(1000000000000000.0), "", "1000000000000000.0"},
	{starlark.Float(1e-05), "", "1e-05"},
	{starlark.Float(0.0001), "", "0.0001"},
	{starlark.Float(0.1), "", "0.1"},
	{starlark.Float(negZero), "", "-0.0"},
	{starlark.Float(math.NaN()), "", "nan"},
	{starlark.Float(math.Inf(-1)), "", "-inf"},
	{starlark.Float(1234567.891), ",.2f", "1,234,567.89"},
	{starlark.Float(0.5), ".0%", "50%"},
	{starlark.Float(0.125), ".1%", "12.5%"},
	{starlark.MakeInt64(-3), "05d", "-0003"},
	{starlark.MakeInt64(5), ">5", "    5"},
	{starlark.String("ab"), "^6", "  ab  "},
	{starlark.String("ab"), "^7", "  ab   "},
	{starlark.Bool(true), "d", "1"},
	{starlark.Bool(true), "", "True"},
	{starlark.Bool(false), "5", "    0"},
	{starlark.Bool(true), ">5", "    1"},
	{starlark.Float(2.675), ".2f", "2.67"},
	{starlark.Float(0.125), ".2f", "0.12"},
	{starlark.Float(0.375), ".2f", "0.38"},
	{starlark.Float(2.5), ".0f", "2"},
	{starlark.Float(3.5), ".0f", "4"},
	{starlark.Float(-0.001), "z.2f", "0.00"},
	{starlark.Float(-0.001), ".2f", "-0.00"},
	{starlark.Float(3.14159), ".3", "3.14"},
	{starlark.Float(10.0), ".2", "1e+01"},
	{starlark.Float(123.0), ".3", "1.23e+02"},
	{starlark.Float(1234.5), ".3", "1.23e+03"},
	{starlark.Float(100.0), "g", "100"},
	{starlark.Float(1000000.0), "g", "1e+06"},
	{starlark.Float(1e-05), "g", "1e-05"},
	{starlark.Float(123456789.0), "g", "1.23457e+08"},
	{starlark.Float(0.0001), "g", "0.0001"},
	{starlark.Float(1.5), "#g", "1.50000"},
	{starlark.Float(1.0), "#.0f", "1."},
	{starlark.Float(1.0), "#.0e", "1.e+00"},
	{starlark.Float(1234.5678), "e", "1.234568e+03"},
	{starlark.Float(1234.5678), "E", "1.234568E+03"},
	{starlark.Float(1234.5678), ".2e", "1.23e+03"},
	{starlark.Float(0.0), "e", "0.000000e+00"},
	{starlark.Float(math.Inf(1)), "F", "INF"},
	{starlark.Float(math.NaN()), "E", "NAN"},
	{starlark.Float(math.Inf(1)), "010", "0000000inf"},
	{starlark.Float(math.Inf(-1)), "+.2f", "-inf"},
	{starlark.MakeInt64(1234567), ",", "1,234,567"},
	{starlark.MakeInt64(1234567), "_", "1_234_567"},
	{starlark.MakeInt64(-1234567), ",d", "-1,234,567"},
	{starlark.MakeInt64(1234), "010,", "00,001,234"},
	{starlark.Float(1234.5), "012,.2f", "0,001,234.50"},
	{starlark.Float(-1234.5), "=+12,.1f", "-    1,234.5"},
	{starlark.MakeInt64(255), "x", "ff"},
	{starlark.MakeInt64(255), "X", "FF"},
	{starlark.MakeInt64(255), "#x", "0xff"},
	{starlark.MakeInt64(255), "#X", "0XFF"},
	{starlark.MakeInt64(255), "#010x", "0x000000ff"},
	{starlark.MakeInt64(255), "o", "377"},
	{starlark.MakeInt64(255), "#o", "0o377"},
	{starlark.MakeInt64(5), "b", "101"},
	{starlark.MakeInt64(5), "#b", "0b101"},
	{starlark.MakeInt64(3735928559), "_x", "dead_beef"},
	{starlark.MakeInt64(1023), "_b", "11_1111_1111"},
	{starlark.MakeInt64(65), "c", "A"},
	{starlark.MakeInt64(233), "c", "é"},
	{starlark.MakeInt64(42), "+d", "+42"},
	{starlark.MakeInt64(42), " d", " 42"},
	{starlark.MakeInt64(-42), " d", "-42"},
	{starlark.MakeInt64(42), "*^10", "****42****"},
	{starlark.MakeInt64(42), "*<10", "42********"},
	{starlark.MakeInt64(42), "0=8", "00000042"},
	{starlark.MakeInt64(-42), "0=8", "-0000042"},
	{starlark.MakeInt64(-42), "08", "-0000042"},
	{starlark.String("ab"), "05", "ab000"},
	{starlark.String("ab"), "0>5", "000ab"},
	{starlark.String("ab"), "x<5", "abxxx"},
	{starlark.String("hello"), ".3", "hel"},
	{starlark.String("hello"), "10.3", "hel       "},
	{starlark.String("héllo"), ">7", "  héllo"},
	{starlark.String("日本"), "^6", "  日本  "},
	{bigInt("100000000000000000000"), ",", "100,000,000,000,000,000,000"},
	{bigInt("-100000000000000000000"), "_", "-100_000_000_000_000_000_000"},
	{starlark.MakeInt64(12), "%", "1200.000000%"},
	{starlark.MakeInt64(12), ".1f", "12.0"},
	{starlark.MakeInt64(12), "e", "1.200000e+01"},
	{starlark.MakeInt64(7), "n", "7"},
	{starlark.Float(1234567.0), "n", "1.23457e+06"},
	{starlark.Float(0.1), ".17g", "0.10000000000000001"},
	{starlark.Float(0.1), ".20f", "0.10000000000000000555"},
	{starlark.Float(0.3333333333333333), "", "0.3333333333333333"},
	{starlark.Float(0.6666666666666666), ".5", "0.66667"},
	{starlark.Float(1e+301), "", "1e+301"},
	{starlark.Float(1.5), "€^9", "€€€1.5€€€"},
	{starlark.Float(99.995), ".2f", "100.00"},
	{starlark.Float(1.005), ".2f", "1.00"},
	{starlark.Float(-1.5), "+", "-1.5"},
	{starlark.Float(1.5), " ", " 1.5"},
	{starlark.Float(0.0), "+.1f", "+0.0"},
	{starlark.Float(negZero), "+.1f", "-0.0"},
	{starlark.Float(negZero), "+z.1f", "+0.0"},
	{starlark.Float(5e-324), "", "5e-324"},
	{starlark.Float(1.7976931348623157e+308), "", "1.7976931348623157e+308"},
	{starlark.Float(1.7976931348623157e+308), ",.0f", "179,769,313,486,231,570,814,527,423,731,704,356,798,070,567,525,844,996,598,917,476,803,157,260,780,028,538,760,589,558,632,766,878,171,540,458,953,514,382,464,234,321,326,889,464,182,768,467,546,703,537,516,986,049,910,576,551,282,076,245,490,090,389,328,944,075,868,508,455,133,942,304,583,236,903,222,948,165,808,559,332,123,348,274,797,826,204,144,723,168,738,177,180,919,299,881,250,404,026,184,124,858,368"},
}

var formatErrors = []formatCase{
	{starlark.Float(1.5), "d", "Unknown format code 'd' for object of type 'float'"},
	{starlark.Float(1.5), "s", "Unknown format code 's' for object of type 'float'"},
	{starlark.String("ab"), "d", "Unknown format code 'd' for object of type 'str'"},
	{starlark.String("ab"), "+", "Sign not allowed in string format specifier"},
	{starlark.String("ab"), " ", "Space not allowed in string format specifier"},
	{starlark.String("ab"), "=", "'=' alignment not allowed in string format specifier"},
	{starlark.String("ab"), "#", "Alternate form (#) not allowed in string format specifier"},
	{starlark.String("ab"), ",", "Cannot specify ',' with 's'."},
	{starlark.MakeInt64(1), ".2", "Precision not allowed in integer format specifier"},
	{starlark.MakeInt64(1), "z", "Negative zero coercion (z) not allowed in integer format specifier"},
	{starlark.MakeInt64(1), "+c", "Sign not allowed with integer format specifier 'c'"},
	{starlark.MakeInt64(1), "#c", "Alternate form (#) not allowed with integer format specifier 'c'"},
	{starlark.MakeInt64(-1), "c", "%c arg not in range(0x110000)"},
	{bigInt("100000000000000000000"), "c", "Python int too large to convert to C long"},
	{starlark.MakeInt64(1), ",_", "Cannot specify both ',' and '_'."},
	{starlark.MakeInt64(1), "_,", "Cannot specify both ',' and '_'."},
	{starlark.MakeInt64(1), ",x", "Cannot specify ',' with 'x'."},
	{starlark.MakeInt64(1), ".", "Format specifier missing precision"},
	{starlark.MakeInt64(1), "ab", "Invalid format specifier 'ab' for object of type 'int'"},
	{starlark.Bool(true), "s", "Unknown format code 's' for object of type 'bool'"},
	{starlark.Float(1.5), "5 ", "Unknown format code '\\x20' for object of type 'float'"},
	{starlark.Float(1.5), ",n", "Cannot specify ',' with 'n'."},
	{starlark.MakeInt64(1), "Q", "Unknown format code 'Q' for object of type 'int'"},
	{bigInt("10000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"), "f", "int too large to convert to float"},
	{starlark.MakeInt64(1), "é", "Unknown format code '\\xe9' for object of type 'int'"},
}

func TestFormatMatchesPython(t *testing.T) {
	for _, c := range formatCases {
		got, err := FormatValue(nil, c.v, c.spec)
		if assert.NoError(t, err, "format(%s, %q)", c.v, c.spec) {
			assert.Equal(t, c.want, got, "format(%s, %q)", c.v, c.spec)
		}
	}
}

func TestFormatErrorsMatchPython(t *testing.T) {
	for _, c := range formatErrors {
		_, err := FormatValue(nil, c.v, c.spec)
		if assert.Error(t, err, "format(%s, %q)", c.v, c.spec) {
			assert.Equal(t, c.want, err.Error(), "format(%s, %q)", c.v, c.spec)
		}
	}
}

func TestFormatOtherValues(t *testing.T) {
	got, err := FormatValue(nil, starlark.None, "")
	require.NoError(t, err)
	assert.Equal(t, "None", got)
	_, err = FormatValue(nil, starlark.NewList(nil), ">5")
	assert.EqualError(t, err, "unsupported format string passed to list.__format__")
}

func TestFloatRepr(t *testing.T) {
	for f, want := range map[float64]string{
		3: "3.0", 0.1: "0.1", 1e16: "1e+16", 1e15: "1000000000000000.0", 1e-5: "1e-05", 1234567.0: "1234567.0",
		-2.5: "-2.5", math.Inf(1): "inf", 5e-324: "5e-324", negZero: "-0.0",
	} {
		assert.Equal(t, want, FloatRepr(f), "repr(%v)", f)
	}
	x, y := 0.1, 0.2
	assert.Equal(t, "0.30000000000000004", FloatRepr(x+y))
}

func TestFormatRefusesHugeFields(t *testing.T) {
	// Above the hard cap, with or without a budget: no gigabyte of padding.
	_, err := FormatValue(nil, starlark.MakeInt(1), "1000000000")
	var me *MemoryError
	require.True(t, errors.As(err, &me), "got %v", err)
	assert.Equal(t, "format", me.Op)
	_, err = FormatValue(nil, starlark.Float(1), ".2000000f")
	assert.True(t, errors.As(err, &me), "got %v", err)
	_, err = FormatValue(nil, starlark.String("x"), "<2000000")
	assert.True(t, errors.As(err, &me), "got %v", err)

	// The builtin passes the refusal through unwrapped, so the sandbox sees a memory limit.
	_, err = starlark.Call(new(starlark.Thread), starlark.NewBuiltin("format", format), starlark.Tuple{starlark.MakeInt(1), starlark.String("5000000")}, nil)
	assert.True(t, errors.As(err, &me), "got %v", err)
}

func TestFormatPrecisionCountsCodePoints(t *testing.T) {
	got, err := FormatValue(nil, starlark.String("héllo"), ".2")
	require.NoError(t, err)
	assert.Equal(t, "hé", got)
}

func FuzzFormatSpec(f *testing.F) {
	for _, c := range formatCases {
		f.Add(c.spec, 1234.5, int64(-42), "ab")
	}
	for _, c := range formatErrors {
		f.Add(c.spec, math.Copysign(0, -1), int64(7), "héllo")
	}
	f.Add("\x00<99999999999999999999", math.Inf(1), int64(math.MinInt64), "")
	f.Add("\xbf<700000", 5533.625, int64(32), "0") // a 3-byte fill: 2 MB if the cap counted runes
	f.Fuzz(func(t *testing.T, spec string, x float64, i int64, s string) {
		for _, v := range []starlark.Value{starlark.Float(x), starlark.MakeInt64(i), starlark.String(s), starlark.Bool(i%2 == 0), bigInt("123456789012345678901234567890")} {
			out, err := FormatValue(nil, v, spec)
			if err == nil && len(out) > MaxFormatBytes+4096 {
				t.Fatalf("format(%v, %q) produced %d bytes", v, spec, len(out))
			}
		}
	})
}

func BenchmarkFormatComma2f(b *testing.B) {
	v := starlark.Float(1234567.891)
	for b.Loop() {
		if s, err := FormatValue(nil, v, ",.2f"); err != nil || !strings.HasPrefix(s, "1,234") {
			b.Fatal(s, err)
		}
	}
}
