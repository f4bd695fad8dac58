//lint:file-ignore ST1005 the error strings here are Python's own messages, word for word, which plans and their authors recognise

package builtins

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.starlark.net/starlark"
)

// This file implements Python's format-spec mini-language,
//
//	[[fill]align][sign][z][#][0][width][grouping][.precision][type]
//
// following CPython's Python/formatter_unicode.c and the float layout of Python/pystrtod.c
// (format_float_short) step by step, so that the sandbox's rewrite of f-strings, %-formatting and
// str.format produces exactly what Python would.

// formatChargeFloor is the field size (width or precision) from which format charges the run's
// budget; smaller fields are not worth the look-up.
const formatChargeFloor = 1024

// format is the builtin format(value, spec="").
func format(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var v starlark.Value
	var spec string
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &v, &spec); err != nil {
		return nil, err
	}
	s, err := FormatValue(thread, v, spec)
	if err != nil {
		if isLimit(err) {
			return nil, err
		}
		return nil, fmt.Errorf("%s: %v", b.Name(), err)
	}
	return starlark.String(s), nil
}

// FormatValue formats v with a Python format spec, as Python's format(v, spec). Ints, bools,
// floats and strings take the full mini-language; any other value accepts only the empty spec,
// which renders it with str(). A field wider than MaxFormatBytes is refused with a *MemoryError,
// and large fields are charged to thread's budget (thread may be nil: no budget). Errors carry
// Python's messages, such as "Unknown format code 'd' for object of type 'float'".
func FormatValue(thread *starlark.Thread, v starlark.Value, spec string) (string, error) {
	switch v := v.(type) {
	case starlark.String:
		if spec == "" {
			return string(v), nil
		}
		fs, err := parseFormatSpec(spec, 's', '<', "str")
		if err != nil {
			return "", err
		}
		return formatString(thread, string(v), fs)
	case starlark.Bool:
		if spec == "" {
			return v.String(), nil
		}
		i, _ := asInt(v)
		return formatIntSpec(thread, i, spec, "bool")
	case starlark.Int:
		if spec == "" {
			if err := chargeIntText(thread, "format()", v); err != nil {
				return "", err
			}
			return v.String(), nil
		}
		return formatIntSpec(thread, v, spec, "int")
	case starlark.Float:
		if spec == "" {
			return FloatRepr(float64(v)), nil
		}
		fs, err := parseFormatSpec(spec, 0, '>', "float")
		if err != nil {
			return "", err
		}
		switch fs.typ {
		case 0, 'e', 'E', 'f', 'F', 'g', 'G', 'n', '%':
		default:
			return "", unknownFormatCode(fs.typ, "float")
		}
		return formatFloat(thread, float64(v), fs)
	}
	if spec == "" {
		return v.String(), nil
	}
	return "", fmt.Errorf("unsupported format string passed to %s.__format__", pyType(v))
}

// FloatRepr renders x as Python's repr(x) and str(x): the shortest string that reads back as x,
// in positional notation from 1e-4 up to 1e16 and with an exponent outside that range
// ("0.1", "3.0", "1e+16", "1e-05", "inf", "nan").
func FloatRepr(x float64) string {
	if s, ok := nonFinite(x, false); ok {
		return s
	}
	digits, decpt := dtoa(x, 0, 0)
	var buf []byte
	if math.Signbit(x) {
		buf = append(buf, '-')
	}
	return string(layoutFloat(buf, digits, decpt, 'r', 0, true, false, false))
}

// formatSpec is a parsed format spec; -1 marks an absent width or precision, 0 an absent rune.
type formatSpec struct {
	fill      rune
	align     rune
	sign      rune
	noNegZero bool
	alt       bool
	width     int64
	grouping  rune // ',' or '_'
	precision int64
	typ       rune
}

func isAlign(r rune) bool { return r == '<' || r == '>' || r == '=' || r == '^' }

// parseFormatSpec is CPython's parse_internal_render_format_spec.
func parseFormatSpec(spec string, defaultType, defaultAlign rune, typeName string) (formatSpec, error) {
	fs := formatSpec{fill: ' ', align: defaultAlign, width: -1, precision: -1, typ: defaultType}
	var runes [32]rune
	rs := runes[:0]
	for _, r := range spec {
		rs = append(rs, r)
	}
	pos, end := 0, len(rs)
	fillSpecified, alignSpecified := false, false
	if end-pos >= 2 && isAlign(rs[pos+1]) {
		fs.align, fs.fill = rs[pos+1], rs[pos]
		fillSpecified, alignSpecified = true, true
		pos += 2
	} else if end-pos >= 1 && isAlign(rs[pos]) {
		fs.align = rs[pos]
		alignSpecified = true
		pos++
	}
	if end-pos >= 1 && (rs[pos] == '+' || rs[pos] == '-' || rs[pos] == ' ') {
		fs.sign = rs[pos]
		pos++
	}
	if end-pos >= 1 && rs[pos] == 'z' {
		fs.noNegZero = true
		pos++
	}
	if end-pos >= 1 && rs[pos] == '#' {
		fs.alt = true
		pos++
	}
	if !fillSpecified && end-pos >= 1 && rs[pos] == '0' {
		fs.fill = '0'
		if !alignSpecified && defaultAlign == '>' {
			fs.align = '='
		}
		pos++
	}
	n, consumed, err := specInteger(rs, &pos)
	if err != nil {
		return fs, err
	}
	if consumed > 0 {
		fs.width = n
	}
	if end-pos > 0 && rs[pos] == ',' {
		fs.grouping = ','
		pos++
	}
	if end-pos > 0 && rs[pos] == '_' {
		if fs.grouping != 0 {
			return fs, errors.New("Cannot specify both ',' and '_'.")
		}
		fs.grouping = '_'
		pos++
	}
	if end-pos > 0 && rs[pos] == ',' && fs.grouping == '_' {
		return fs, errors.New("Cannot specify both ',' and '_'.")
	}
	if end-pos > 0 && rs[pos] == '.' {
		pos++
		n, consumed, err := specInteger(rs, &pos)
		if err != nil {
			return fs, err
		}
		if consumed == 0 {
			return fs, errors.New("Format specifier missing precision")
		}
		fs.precision = n
	}
	if end-pos > 1 {
		return fs, fmt.Errorf("Invalid format specifier '%s' for object of type '%s'", spec, typeName)
	}
	if end-pos == 1 {
		fs.typ = rs[pos]
	}
	if fs.grouping != 0 {
		switch fs.typ {
		case 'd', 'e', 'f', 'g', 'E', 'G', '%', 'F', 0:
		case 'b', 'o', 'x', 'X':
			if fs.grouping != '_' {
				return fs, invalidGrouping(fs.grouping, fs.typ)
			}
		default:
			return fs, invalidGrouping(fs.grouping, fs.typ)
		}
	}
	return fs, nil
}

func invalidGrouping(sep, typ rune) error {
	if typ > 32 && typ < 128 {
		return fmt.Errorf("Cannot specify '%c' with '%c'.", sep, typ)
	}
	return fmt.Errorf("Cannot specify '%c' with '\\x%x'.", sep, typ)
}

func unknownFormatCode(typ rune, typeName string) error {
	if typ > 32 && typ < 128 {
		return fmt.Errorf("Unknown format code '%c' for object of type '%s'", typ, typeName)
	}
	return fmt.Errorf("Unknown format code '\\x%x' for object of type '%s'", typ, typeName)
}

// specInteger reads a run of decimal digits (any Unicode decimal digit, as Python), returning
// the value, how many runes it consumed, and Python's error when it overflows.
func specInteger(rs []rune, pos *int) (int64, int, error) {
	var acc int64
	n := 0
	for *pos < len(rs) {
		d := decimalValue(rs[*pos])
		if d < 0 {
			break
		}
		if acc > (math.MaxInt64-int64(d))/10 {
			return 0, n, errors.New("Too many decimal digits in format string")
		}
		acc = acc*10 + int64(d)
		*pos++
		n++
	}
	return acc, n, nil
}

// decimalValue returns the value of a Unicode decimal digit (category Nd), or -1.
func decimalValue(r rune) int {
	if r >= '0' && r <= '9' {
		return int(r - '0')
	}
	if r < utf8.RuneSelf || !unicode.Is(unicode.Nd, r) {
		return -1
	}
	// Decimal digits come in contiguous runs of ten that start at a zero.
	for _, rg := range unicode.Nd.R16 {
		if r >= rune(rg.Lo) && r <= rune(rg.Hi) {
			return int(r-rune(rg.Lo)) % 10
		}
	}
	for _, rg := range unicode.Nd.R32 {
		if r >= rune(rg.Lo) && r <= rune(rg.Hi) {
			return int(r-rune(rg.Lo)) % 10
		}
	}
	return -1
}

// checkField refuses a field wider than MaxFormatBytes and charges a large one to the budget.
func checkField(thread *starlark.Thread, fs formatSpec, content int) error {
	if fs.width <= formatChargeFloor/4 && fs.precision <= formatChargeFloor {
		return nil
	}
	// The fill character may take up to 4 bytes in UTF-8.
	width := fs.width
	if width > 0 && width < math.MaxInt64/4 {
		width *= int64(max(utf8.RuneLen(fs.fill), 1))
	}
	n := int64(content)
	for _, f := range []int64{width, fs.precision} {
		if f > MaxFormatBytes {
			return &MemoryError{Op: "format", Bytes: f, Limit: MaxFormatBytes}
		}
		if f > 0 {
			n += f
		}
	}
	if thread == nil {
		return nil
	}
	return Charge(thread, "format", n)
}

// --- strings ----------------------------------------------------------------------------------

func formatString(thread *starlark.Thread, s string, fs formatSpec) (string, error) {
	if fs.typ != 's' {
		return "", unknownFormatCode(fs.typ, "str")
	}
	switch {
	case fs.sign == ' ':
		return "", errors.New("Space not allowed in string format specifier")
	case fs.sign != 0:
		return "", errors.New("Sign not allowed in string format specifier")
	case fs.noNegZero:
		return "", errors.New("Negative zero coercion (z) not allowed in string format specifier")
	case fs.alt:
		return "", errors.New("Alternate form (#) not allowed in string format specifier")
	case fs.align == '=':
		return "", errors.New("'=' alignment not allowed in string format specifier")
	}
	if err := checkField(thread, fs, len(s)); err != nil {
		return "", err
	}
	n := int64(utf8.RuneCountInString(s))
	if fs.precision >= 0 && n > fs.precision {
		k := int64(0)
		for i := range s {
			if k == fs.precision {
				s = s[:i]
				break
			}
			k++
		}
		n = fs.precision
	}
	if fs.width <= n {
		return s, nil
	}
	var b strings.Builder
	pad(&b, s, nil, int(fs.width-n), fs.align, fs.fill)
	return b.String(), nil
}

// pad writes the field: body (or parts, in order) with total padding p placed by align.
func pad(b *strings.Builder, body string, parts []string, p int, align, fill rune) {
	left, right := 0, 0
	switch align {
	case '<':
		right = p
	case '^':
		left = p / 2
		right = p - left
	default:
		left = p
	}
	writeFill(b, fill, left)
	b.WriteString(body)
	for _, s := range parts {
		b.WriteString(s)
	}
	writeFill(b, fill, right)
}

func writeFill(b *strings.Builder, fill rune, n int) {
	for ; n > 0; n-- {
		b.WriteRune(fill)
	}
}

// --- numbers ----------------------------------------------------------------------------------

// number is a number laid out by CPython's calc_number_widths and fill_number:
// <lpadding><sign><prefix><spadding><grouped digits><decimal><remainder><rpadding>.
type number struct {
	negative   bool
	prefix     string // "0x" and friends
	digits     string // the integer digits, to group and zero-pad
	hasDecimal bool
	remainder  string // after the decimal point: fraction, exponent, "%", or a 'c' character
	sep        string // thousands separator, "" for none
	group      int    // digits per group (3, or 4 for '_' with b, o, x, X)
}

func (num number) layout(fs formatSpec) string {
	sign := ""
	switch fs.sign {
	case '+':
		sign = "+"
		if num.negative {
			sign = "-"
		}
	case ' ':
		sign = " "
		if num.negative {
			sign = "-"
		}
	default:
		if num.negative {
			sign = "-"
		}
	}
	decimal := ""
	if num.hasDecimal {
		decimal = "."
	}
	nonDigit := len(sign) + len(num.prefix) + len(decimal) + utf8.RuneCountInString(num.remainder)
	minWidth := int64(0)
	if fs.fill == '0' && fs.align == '=' {
		minWidth = fs.width - int64(nonDigit)
	}
	grouped := ""
	if num.digits != "" {
		grouped = groupDigits(num.digits, int(minWidth), num.sep, num.group)
	}
	padding := int(fs.width) - (nonDigit + len(grouped))
	var b strings.Builder
	if padding <= 0 {
		b.Grow(nonDigit + len(grouped))
		for _, s := range [...]string{sign, num.prefix, grouped, decimal, num.remainder} {
			b.WriteString(s)
		}
		return b.String()
	}
	b.Grow(nonDigit + len(grouped) + padding)
	if fs.align == '=' {
		b.WriteString(sign)
		b.WriteString(num.prefix)
		writeFill(&b, fs.fill, padding)
		for _, s := range [...]string{grouped, decimal, num.remainder} {
			b.WriteString(s)
		}
		return b.String()
	}
	pad(&b, sign, []string{num.prefix, grouped, decimal, num.remainder}, padding, fs.align, fs.fill)
	return b.String()
}

// groupDigits is CPython's _PyUnicode_InsertThousandsGrouping: it inserts sep every group
// digits from the right and pads with zeros (and separators) to at least minWidth characters.
func groupDigits(digits string, minWidth int, sep string, group int) string {
	if minWidth < 0 {
		minWidth = 0
	}
	if sep == "" || group <= 0 {
		if n := minWidth - len(digits); n > 0 {
			return strings.Repeat("0", n) + digits
		}
		return digits
	}
	// Fill from the right, as CPython does.
	var stack [64]byte
	out := stack[:0]
	remaining, pos := len(digits), len(digits)
	useSep := false
	for {
		l := min(group, max(remaining, minWidth, 1))
		zeros := max(0, l-remaining)
		chars := max(0, min(remaining, l))
		if useSep {
			for i := len(sep) - 1; i >= 0; i-- {
				out = append(out, sep[i])
			}
		}
		for i := pos - 1; i >= pos-chars; i-- {
			out = append(out, digits[i])
		}
		for ; zeros > 0; zeros-- {
			out = append(out, '0')
		}
		useSep = true
		remaining -= chars
		pos -= chars
		minWidth -= l
		if remaining <= 0 && minWidth <= 0 {
			break
		}
		minWidth -= len(sep)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return string(out)
}

// --- ints -------------------------------------------------------------------------------------

func formatIntSpec(thread *starlark.Thread, x starlark.Int, spec, typeName string) (string, error) {
	fs, err := parseFormatSpec(spec, 'd', '>', typeName)
	if err != nil {
		return "", err
	}
	switch fs.typ {
	case 'b', 'c', 'd', 'o', 'x', 'X', 'n':
		return formatInt(thread, x, fs)
	case 'e', 'E', 'f', 'F', 'g', 'G', '%':
		f, _, err := toFloat(x)
		if err != nil {
			return "", err
		}
		return formatFloat(thread, f, fs)
	}
	return "", unknownFormatCode(fs.typ, typeName)
}

func formatInt(thread *starlark.Thread, x starlark.Int, fs formatSpec) (string, error) {
	if fs.precision != -1 {
		return "", errors.New("Precision not allowed in integer format specifier")
	}
	if fs.noNegZero {
		return "", errors.New("Negative zero coercion (z) not allowed in integer format specifier")
	}
	if err := checkField(thread, fs, 0); err != nil {
		return "", err
	}
	var num number
	if fs.typ == 'c' {
		if fs.sign != 0 {
			return "", errors.New("Sign not allowed with integer format specifier 'c'")
		}
		if fs.alt {
			return "", errors.New("Alternate form (#) not allowed with integer format specifier 'c'")
		}
		c, ok := x.Int64()
		if !ok {
			return "", errors.New("Python int too large to convert to C long")
		}
		if c < 0 || c > 0x10ffff {
			return "", errors.New("%c arg not in range(0x110000)")
		}
		num.remainder = string(rune(c))
		return num.layout(fs), nil
	}
	base, prefix := 10, ""
	switch fs.typ {
	case 'b':
		base, prefix = 2, "0b"
	case 'o':
		base, prefix = 8, "0o"
	case 'x':
		base, prefix = 16, "0x"
	case 'X':
		base, prefix = 16, "0X"
	}
	if fs.alt {
		num.prefix = prefix
	}
	if small, ok := x.Int64(); ok && small != math.MinInt64 {
		num.negative = small < 0
		if small < 0 {
			small = -small
		}
		num.digits = strconv.FormatInt(small, base)
	} else {
		if base&(base-1) != 0 { // in a power-of-two base the conversion is linear
			if err := chargeIntText(thread, "format()", x); err != nil {
				return "", err
			}
		}
		bi := x.BigInt()
		num.negative = bi.Sign() < 0
		num.digits = new(big.Int).Abs(bi).Text(base)
	}
	if fs.typ == 'X' {
		num.digits = strings.ToUpper(num.digits)
	}
	num.sep, num.group = groupSep(fs)
	return num.layout(fs), nil
}

// groupSep returns the separator and group size of a spec (none for 'n' in the C locale).
func groupSep(fs formatSpec) (string, int) {
	switch {
	case fs.typ == 'n' || fs.grouping == 0:
		return "", 0
	case fs.grouping == '_' && (fs.typ == 'b' || fs.typ == 'o' || fs.typ == 'x' || fs.typ == 'X'):
		return "_", 4
	}
	return string(fs.grouping), 3
}

// --- floats -----------------------------------------------------------------------------------

// formatFloat is CPython's format_float_internal.
func formatFloat(thread *starlark.Thread, x float64, fs formatSpec) (string, error) {
	if err := checkField(thread, fs, 0); err != nil {
		return "", err
	}
	typ := fs.typ
	addDot0, defaultPrec := false, int64(6)
	if typ == 0 {
		addDot0, typ, defaultPrec = true, 'r', 0
	}
	if typ == 'n' {
		typ = 'g'
	}
	pct := false
	if typ == '%' {
		typ, x, pct = 'f', x*100, true
	}
	prec := fs.precision
	if prec < 0 {
		prec = defaultPrec
	} else if typ == 'r' {
		typ = 'g'
	}
	upper := typ == 'E' || typ == 'F' || typ == 'G'
	code := byte(unicode.ToLower(typ))

	var num number
	num.negative = math.Signbit(x)
	var bodyBuf [64]byte
	body := bodyBuf[:0]
	if s, ok := nonFinite(math.Abs(x), upper); ok {
		if math.IsNaN(x) {
			num.negative = false
		}
		body = append(body, s...)
	} else {
		var digits []byte
		var decpt int
		switch code {
		case 'e':
			prec++
			digits, decpt = dtoa(x, 2, int(prec))
		case 'f':
			digits, decpt = dtoa(x, 3, int(prec))
		case 'g':
			if prec == 0 {
				prec = 1
			}
			digits, decpt = dtoa(x, 2, int(prec))
		default: // 'r'
			digits, decpt = dtoa(x, 0, 0)
		}
		if fs.noNegZero && num.negative && (len(digits) == 0 || string(digits) == "0") {
			num.negative = false
		}
		body = layoutFloat(body, digits, decpt, code, int(prec), addDot0, fs.alt, upper)
	}
	if pct {
		body = append(body, '%')
	}
	// parse_number: the leading digits are grouped, the rest is copied.
	i := 0
	for i < len(body) && body[i] >= '0' && body[i] <= '9' {
		i++
	}
	num.digits = string(body[:i])
	rest := body[i:]
	if len(rest) > 0 && rest[0] == '.' {
		num.hasDecimal = true
		rest = rest[1:]
	}
	num.remainder = string(rest)
	num.sep, num.group = groupSep(fs)
	return num.layout(fs), nil
}

// nonFinite renders inf and nan (x may be negative: "-inf").
func nonFinite(x float64, upper bool) (string, bool) {
	var s string
	switch {
	case math.IsNaN(x):
		s = "nan"
	case math.IsInf(x, 1):
		s = "inf"
	case math.IsInf(x, -1):
		s = "-inf"
	default:
		return "", false
	}
	if upper {
		s = strings.ToUpper(s)
	}
	return s, true
}

// dtoa returns the decimal digits of |x| and the position of the decimal point, as David Gay's
// _Py_dg_dtoa: mode 0 is the shortest round-tripping string, mode 2 rounds to prec significant
// digits, mode 3 to prec digits after the point. Trailing zeros are removed; zero is "0" with
// decpt 1; a mode-3 result that rounds to zero has no digits and decpt -prec. Go's strconv
// rounds exactly and breaks ties to even, as dtoa does.
func dtoa(x float64, mode, prec int) ([]byte, int) {
	x = math.Abs(x)
	if x == 0 {
		return []byte{'0'}, 1
	}
	var buf [32]byte
	var s []byte
	switch mode {
	case 3:
		s = strconv.AppendFloat(buf[:0], x, 'f', prec, 64)
		intEnd := len(s)
		digits := make([]byte, 0, len(s))
		for i, c := range s {
			if c == '.' {
				intEnd = i
				continue
			}
			digits = append(digits, c)
		}
		decpt := intEnd
		k := 0
		for k < len(digits) && digits[k] == '0' {
			k++
		}
		digits, decpt = digits[k:], decpt-k
		if len(digits) == 0 {
			return digits, -prec
		}
		return trimZeros(digits), decpt
	case 2:
		s = strconv.AppendFloat(buf[:0], x, 'e', prec-1, 64)
	default:
		s = strconv.AppendFloat(buf[:0], x, 'e', -1, 64)
	}
	e := 0
	for e < len(s) && s[e] != 'e' {
		e++
	}
	exp, _ := strconv.Atoi(string(s[e+1:]))
	digits := make([]byte, 0, e)
	for _, c := range s[:e] {
		if c != '.' {
			digits = append(digits, c)
		}
	}
	return trimZeros(digits), exp + 1
}

func trimZeros(d []byte) []byte {
	n := len(d)
	for n > 1 && d[n-1] == '0' {
		n--
	}
	return d[:n]
}

// layoutFloat is CPython's format_float_short after the call to dtoa: it places the digits,
// the decimal point, padding zeros and an exponent for code 'e', 'f', 'g' or 'r' (repr).
func layoutFloat(buf, digits []byte, decpt int, code byte, precision int, addDot0, alt, upper bool) []byte {
	digitsLen := len(digits)
	vdEnd := digitsLen
	useExp := false
	switch code {
	case 'e':
		useExp = true
		vdEnd = precision
	case 'f':
		vdEnd = decpt + precision
	case 'g':
		lim := precision
		if addDot0 {
			lim = precision - 1
		}
		if decpt <= -4 || decpt > lim {
			useExp = true
		}
		if alt {
			vdEnd = precision
		}
	case 'r':
		if decpt <= -4 || decpt > 16 {
			useExp = true
		}
	}
	exp := 0
	if useExp {
		exp = decpt - 1
		decpt = 1
	}
	vdStart := 0
	if decpt <= 0 {
		vdStart = decpt - 1
	}
	if !useExp && addDot0 {
		vdEnd = max(vdEnd, decpt+1)
	} else {
		vdEnd = max(vdEnd, decpt)
	}
	zeros := func(n int) {
		for ; n > 0; n-- {
			buf = append(buf, '0')
		}
	}
	if decpt <= 0 {
		zeros(decpt - vdStart)
		buf = append(buf, '.')
		zeros(-decpt)
	} else {
		zeros(-vdStart)
	}
	if decpt > 0 && decpt <= digitsLen {
		buf = append(buf, digits[:decpt]...)
		buf = append(buf, '.')
		buf = append(buf, digits[decpt:]...)
	} else {
		buf = append(buf, digits...)
	}
	if digitsLen < decpt {
		zeros(decpt - digitsLen)
		buf = append(buf, '.')
		zeros(vdEnd - decpt)
	} else {
		zeros(vdEnd - digitsLen)
	}
	if buf[len(buf)-1] == '.' && !alt {
		buf = buf[:len(buf)-1]
	}
	if useExp {
		if upper {
			buf = append(buf, 'E')
		} else {
			buf = append(buf, 'e')
		}
		if exp < 0 {
			buf = append(buf, '-')
			exp = -exp
		} else {
			buf = append(buf, '+')
		}
		if exp < 10 {
			buf = append(buf, '0')
		}
		buf = strconv.AppendInt(buf, int64(exp), 10)
	}
	return buf
}
