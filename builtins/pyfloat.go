package builtins

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// This file makes floats read and compute as in Python wherever a plan turns them into text or
// divides them. go.starlark.net prints a float with Go's %g (str(1234567.0) is "1.234567e+06",
// an overflow is "+inf") and floors a float quotient with math.Floor (1 // 0.1 is 10.0), and
// starplan does not fork it: the guards that already stand between a plan and str, repr, print,
// fail, % and str.format (see Guards) hand any value holding a float to the functions here, and
// GuardTree routes // and % of numbers to guardFloorDiv and guardMod. Values without a float
// take the interpreter's own path, unchanged.

// Repr renders v as Python's repr(v) would, as far as Starlark's values allow: a float is
// FloatRepr(f), and lists, tuples, dicts and sets holding floats render them so; everything
// else, strings included, is v.String() (Starlark quotes strings with double quotes).
func Repr(v starlark.Value) string {
	if f, ok := v.(starlark.Float); ok {
		return FloatRepr(float64(f))
	}
	var b strings.Builder
	writeRepr(&b, v, nil)
	return b.String()
}

// writeRepr is go.starlark.net's writeValue (starlark/value.go) with floats rendered by
// FloatRepr: the same brackets, separators and cycle marks ("[...]" for a list or dict that
// holds itself).
func writeRepr(b *strings.Builder, v starlark.Value, path []starlark.Value) {
	switch v := v.(type) {
	case starlark.Float:
		b.WriteString(FloatRepr(float64(v)))
	case *starlark.List:
		b.WriteByte('[')
		if containsValue(path, v) {
			b.WriteString("...")
		} else {
			for i := range v.Len() {
				if i > 0 {
					b.WriteString(", ")
				}
				writeRepr(b, v.Index(i), append(path, v))
			}
		}
		b.WriteByte(']')
	case starlark.Tuple:
		b.WriteByte('(')
		for i, e := range v {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, e, path)
		}
		if len(v) == 1 {
			b.WriteByte(',')
		}
		b.WriteByte(')')
	case *starlark.Dict:
		b.WriteByte('{')
		if containsValue(path, v) {
			b.WriteString("...")
		} else {
			for i, kv := range v.Items() {
				if i > 0 {
					b.WriteString(", ")
				}
				writeRepr(b, kv[0], path)
				b.WriteString(": ")
				writeRepr(b, kv[1], append(path, v))
			}
		}
		b.WriteByte('}')
	case *starlark.Set:
		b.WriteString("set([")
		iter := v.Iterate()
		var x starlark.Value
		for i := 0; iter.Next(&x); i++ {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, x, path)
		}
		iter.Done()
		b.WriteString("])")
	default:
		b.WriteString(v.String())
	}
}

// jsonFloatsAsPython rewrites the floats of s, JSON text that go.starlark.net's json.encode
// wrote, in the text json.dumps gives them: FloatRepr, Python's repr (1234567.0 where the upstream
// encoder writes Go's 1.234567e+06). The encoder writes a float as Go's shortest text that reads
// back as it, always with a '.' or an exponent, and an int with neither, so a number token holding
// one of those is a float that reads back exactly. Strings are skipped whole; text without a
// float is returned as it is.
func jsonFloatsAsPython(s string) string {
	var b strings.Builder
	done := 0 // s[:done] is in b
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '"' {
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' {
					i++
				}
			}
			continue
		}
		if c != '-' && (c < '0' || c > '9') {
			continue
		}
		j := i
		float := false
		for ; j < len(s) && strings.IndexByte("+-0123456789.eE", s[j]) >= 0; j++ {
			float = float || s[j] == '.' || s[j] == 'e' || s[j] == 'E'
		}
		if float {
			if f, err := strconv.ParseFloat(s[i:j], 64); err == nil {
				if b.Len() == 0 {
					b.Grow(len(s) + len(s)/4)
				}
				b.WriteString(s[done:i])
				b.WriteString(FloatRepr(f))
				done = j
			}
		}
		i = j - 1
	}
	if done == 0 {
		return s
	}
	b.WriteString(s[done:])
	return b.String()
}

func containsValue(path []starlark.Value, v starlark.Value) bool {
	for _, p := range path {
		if p == v {
			return true
		}
	}
	return false
}

// pyText stands in for a value holding floats where the interpreter renders a value by calling
// its String method (str, repr, print, fail, str.format): it renders as Repr. It is only ever an
// argument of those calls, never a value a plan holds.
type pyText struct{ v starlark.Value }

func (p pyText) String() string        { return Repr(p.v) }
func (p pyText) Type() string          { return p.v.Type() }
func (p pyText) Freeze()               {}
func (p pyText) Truth() starlark.Bool  { return p.v.Truth() }
func (p pyText) Hash() (uint32, error) { return p.v.Hash() }

// pyTexts returns args with every value that holds a float (by hasFloat) standing in as pyText.
func pyTexts(args starlark.Tuple) starlark.Tuple {
	out := make(starlark.Tuple, len(args))
	for i, a := range args {
		out[i] = asPyText(a)
	}
	return out
}

func asPyText(v starlark.Value) starlark.Value {
	if _, _, floats, _ := measureText(v); floats {
		return pyText{v}
	}
	return v
}

// interpolate is format % x: go.starlark.net's interpolate (starlark/eval.go), with its grammar
// and messages, but with floats as Python formats them: %s and %r by Repr, %e %f %g (and upper
// case) as Python's printf, and %o %x %X refused for a float, as Python 3 refuses them. The
// guard calls it only when x holds a float; otherwise the interpreter's own % runs.
func interpolate(format string, x starlark.Value) (starlark.Value, error) {
	var buf strings.Builder
	index := 0
	nargs := 1
	if tuple, ok := x.(starlark.Tuple); ok {
		nargs = len(tuple)
	}
	for {
		i := strings.IndexByte(format, '%')
		if i < 0 {
			buf.WriteString(format)
			break
		}
		buf.WriteString(format[:i])
		format = format[i+1:]
		if format != "" && format[0] == '%' {
			buf.WriteByte('%')
			format = format[1:]
			continue
		}
		var arg starlark.Value
		if format != "" && format[0] == '(' {
			format = format[1:]
			j := strings.IndexByte(format, ')')
			if j < 0 {
				return nil, fmt.Errorf("incomplete format key")
			}
			key := format[:j]
			dict, ok := x.(starlark.Mapping)
			if !ok {
				return nil, fmt.Errorf("format requires a mapping")
			}
			v, found, _ := dict.Get(starlark.String(key))
			if !found {
				return nil, fmt.Errorf("key not found: %s", key)
			}
			arg = v
			format = format[j+1:]
		} else {
			if index >= nargs {
				return nil, fmt.Errorf("not enough arguments for format string")
			}
			if tuple, ok := x.(starlark.Tuple); ok {
				arg = tuple[index]
			} else {
				arg = x
			}
		}
		if format == "" {
			return nil, fmt.Errorf("incomplete format")
		}
		switch c := format[0]; c {
		case 's', 'r':
			if s, ok := starlark.AsString(arg); ok && c == 's' {
				buf.WriteString(s)
			} else {
				writeRepr(&buf, arg, nil)
			}
		case 'd', 'i', 'o', 'x', 'X':
			if _, ok := arg.(starlark.Float); ok && c != 'd' && c != 'i' {
				return nil, fmt.Errorf("%%%c format: an integer is required, not float; convert it first: int(x)", c)
			}
			n, err := starlark.NumberToInt(arg)
			if err != nil {
				return nil, fmt.Errorf("%%%c format requires integer: %v", c, err)
			}
			switch c {
			case 'd', 'i':
				fmt.Fprintf(&buf, "%d", n)
			case 'o':
				fmt.Fprintf(&buf, "%o", n)
			case 'x':
				fmt.Fprintf(&buf, "%x", n)
			case 'X':
				fmt.Fprintf(&buf, "%X", n)
			}
		case 'e', 'f', 'g', 'E', 'F', 'G':
			f, ok := starlark.AsFloat(arg)
			if !ok {
				return nil, fmt.Errorf("%%%c format requires float, not %s", c, arg.Type())
			}
			s, err := formatFloat(nil, f, formatSpec{fill: ' ', align: '>', width: -1, precision: -1, typ: rune(c)})
			if err != nil {
				return nil, err
			}
			buf.WriteString(s)
		case 'c':
			switch arg := arg.(type) {
			case starlark.Int:
				r, err := starlark.AsInt32(arg)
				if err != nil || r < 0 || r > unicode.MaxRune {
					return nil, fmt.Errorf("%%c format requires a valid Unicode code point, got %s", arg)
				}
				buf.WriteRune(rune(r))
			case starlark.String:
				r, size := utf8.DecodeRuneInString(string(arg))
				if size != len(arg) || len(arg) == 0 {
					return nil, fmt.Errorf("%%c format requires a single-character string")
				}
				buf.WriteRune(r)
			default:
				return nil, fmt.Errorf("%%c format requires int or single-character string, not %s", arg.Type())
			}
		default:
			return nil, fmt.Errorf("unknown conversion %%%c", c)
		}
		format = format[1:]
		index++
	}
	if _, ok := x.(starlark.Mapping); index < nargs && !ok {
		return nil, fmt.Errorf("too many arguments for format string")
	}
	return starlark.String(buf.String()), nil
}

// floatOperands returns x and y as float64 when one is a float and the other a float or an int,
// as Python converts them for float arithmetic; ok is false for any other pair. An int too large
// for a float is Python's OverflowError.
func floatOperands(x, y starlark.Value) (vx, wy float64, ok bool, err error) {
	_, fx := x.(starlark.Float)
	_, fy := y.(starlark.Float)
	if !fx && !fy {
		return 0, 0, false, nil
	}
	conv := func(v starlark.Value) (float64, bool, error) {
		switch v := v.(type) {
		case starlark.Float:
			return float64(v), true, nil
		case starlark.Int:
			f, _, err := toFloat(v)
			return f, true, err
		}
		return 0, false, nil
	}
	vx, okx, err := conv(x)
	if !okx || err != nil {
		return 0, 0, okx, err
	}
	wy, oky, err := conv(y)
	return vx, wy, oky, err
}

// FloatDivMod is Python's divmod for floats (CPython's _float_div_mod in Objects/floatobject.c):
// the floored quotient, rounded to the nearest integer where x - mod is not an exact multiple
// of y (1 // 0.1 is 9.0, not floor(1 / 0.1) = 10.0), and the remainder with the sign of y,
// a zero remainder included (-6.0 % 3.0 is 0.0, 6.0 % -3.0 is -0.0). y must not be zero.
func FloatDivMod(vx, wx float64) (div, mod float64) {
	mod = math.Mod(vx, wx)
	div = (vx - mod) / wx
	if mod != 0 { // NaN included, as in C
		if (wx < 0) != (mod < 0) {
			mod += wx
			div -= 1.0
		}
	} else {
		mod = math.Copysign(0, wx)
	}
	if div != 0 {
		floordiv := math.Floor(div)
		if div-floordiv > 0.5 {
			floordiv += 1.0
		}
		div = floordiv
	} else {
		div = math.Copysign(0, vx/wx)
	}
	return div, mod
}

// floatBinary does x // y and x % y (op SLASHSLASH or PERCENT) as Python when an operand is a
// float; ok is false when neither is (or the other is not a number), for the interpreter to do.
// A zero divisor fails with the interpreter's own messages.
func floatBinary(op syntax.Token, x, y starlark.Value) (starlark.Value, bool, error) {
	vx, wy, ok, err := floatOperands(x, y)
	if !ok || err != nil {
		return nil, ok, err
	}
	if wy == 0 {
		if op == syntax.SLASHSLASH {
			return nil, true, fmt.Errorf("floored division by zero")
		}
		return nil, true, fmt.Errorf("floating-point modulo by zero")
	}
	div, mod := FloatDivMod(vx, wy)
	if op == syntax.SLASHSLASH {
		return starlark.Float(div), true, nil
	}
	return starlark.Float(mod), true, nil
}

// guardFloorDiv is a // b: Python's floored quotient for floats (see FloatDivMod), the
// interpreter's // for everything else.
func guardFloorDiv(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
	x, y := args[0], args[1]
	if z, ok, err := floatBinary(syntax.SLASHSLASH, x, y); ok {
		return z, err
	}
	return starlark.Binary(syntax.SLASHSLASH, x, y)
}
