package store

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A CSV number is read as CSV users write one; Go's own number syntaxes, which strconv takes,
// are refused with what to write instead.
func TestCSVNumberForms(t *testing.T) {
	for _, tc := range []struct {
		cell  string
		float bool
		want  any    // the value, when taken
		rule  string // the refusal (a part of it), when refused
	}{
		{cell: "5", want: int64(5)},
		{cell: "-5", want: int64(-5)},
		{cell: "+5", want: int64(5)},
		{cell: "007", want: int64(7)},
		{cell: "5.0", want: 5.0}, // validation makes it the int 5
		{cell: "5.", want: 5.0},
		{cell: ".5", float: true, want: 0.5},
		{cell: "-2.25", float: true, want: -2.25},
		{cell: "1e3", float: true, want: 1000.0},
		{cell: "+1.5E-2", float: true, want: 0.015},
		{cell: "5", float: true, want: int64(5)}, // validation makes it the float 5.0
		{cell: "123456789012345678901", float: true, want: 123456789012345678901.0},
		{cell: "cheap", want: "cheap"}, // not a number at all: csvValue says the field must be one
		{cell: "1.2.3", float: true, want: "1.2.3"},
		{cell: "--5", want: "--5"},
		{cell: "1_000", rule: `has "_" between digits (Go's syntax, not a CSV number's): write 1000`},
		{cell: "1_000.5", float: true, rule: "write 1000.5"},
		{cell: "0x10", rule: "is Go's hexadecimal (0x) syntax, not a CSV number: write 16"},
		{cell: "-0X10", rule: "write -16"},
		{cell: "0o17", rule: "is Go's octal (0o) syntax, not a CSV number: write 15"},
		{cell: "0b101", rule: "is Go's binary (0b) syntax, not a CSV number: write 5"},
		{cell: "0x1p4", float: true, rule: "hexadecimal (0x) syntax, not a CSV number: write 16"},
		{cell: "Inf", float: true, rule: "must be a finite number: CSV has no Inf or NaN"},
		{cell: "-infinity", float: true, rule: "must be a finite number"},
		{cell: "NaN", float: true, rule: "must be a finite number"},
		{cell: "+Inf", rule: "must be a finite number"},
		{cell: "1e3", rule: "has an exponent, which an int in CSV does not: write 1000"},
		{cell: "2.5E2", rule: "write 250"},
		{cell: "1e400", rule: "has an exponent, which an int in CSV does not: write digits"},
		{cell: "1,5", float: true, rule: "has a comma: write the number with a decimal point and no thousands separator"},
		{cell: "1,000", rule: "has a comma"},
		{cell: "99999999999999999999", rule: "is too large for an int: an int is between -9223372036854775808 and 9223372036854775807"},
		{cell: "1e400", float: true, rule: "is too large for a float"},
	} {
		v, rule := csvNumber(tc.cell, tc.float)
		if tc.rule != "" {
			assert.Contains(t, rule, tc.rule, "%q (float %v)", tc.cell, tc.float)
			assert.Nil(t, v, "%q", tc.cell)
			continue
		}
		assert.Empty(t, rule, "%q (float %v)", tc.cell, tc.float)
		assert.Equal(t, tc.want, v, "%q (float %v)", tc.cell, tc.float)
	}
}

// FuzzCSVNumberReadsExport: every finite float and every int, as Export writes it in a cell,
// reads back as the same number, and a cell csvNumber takes is one strconv reads as the same.
func FuzzCSVNumberReadsExport(f *testing.F) {
	for _, x := range []float64{0, -0.5, 57, 1031, 1e-7, 1.5e300, 1e21, 0.1, -123456789.125} {
		f.Add(x, int64(x), "1_000")
	}
	f.Add(math.MaxFloat64, int64(math.MinInt64), "+.5e-3")
	f.Fuzz(func(t *testing.T, x float64, n int64, cell string) {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			v, rule := csvNumber(CSVCell(x), true)
			require.Empty(t, rule, CSVCell(x))
			if i, ok := v.(int64); ok {
				v = float64(i)
			}
			require.Equal(t, x, v, CSVCell(x))
		}
		v, rule := csvNumber(CSVCell(n), false)
		require.Empty(t, rule)
		require.Equal(t, n, v)
		for _, float := range []bool{false, true} {
			v, rule := csvNumber(cell, float)
			switch v := v.(type) {
			case int64:
				i, err := strconv.ParseInt(cell, 10, 64)
				require.NoError(t, err, cell)
				require.Equal(t, i, v)
			case float64:
				x, err := strconv.ParseFloat(cell, 64)
				require.NoError(t, err, cell)
				require.Equal(t, x, v)
				require.False(t, strings.ContainsAny(cell, "_xXoObBnN"), "%q: Go's syntax", cell)
				require.True(t, float || !strings.ContainsAny(cell, "eE"), "%q: an exponent for an int", cell)
			case nil:
				require.NotEmpty(t, rule, cell)
			case string:
				require.Equal(t, cell, v)
				require.Empty(t, rule)
			}
		}
	})
}
