package builtins

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"sync"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// Limits of the language builtins that hold whether or not a run has a memory budget. They bound
// the CPU time of one call as well as its memory, because work inside a builtin is not counted
// in steps and a cancelled run only stops between steps.
const (
	// MaxIntResultBytes is the largest integer, in bytes of magnitude (about 2.4 decimal digits per
	// byte), that *, <<, int(), pow, math.prod, math.factorial, math.comb, math.perm and math.lcm
	// may create: 128 KiB, about 315,000 decimal digits. Arithmetic on an integer of that size
	// takes milliseconds; at 1 MiB a single multiplication took 0.75 s and math.isqrt 12 s.
	MaxIntResultBytes = 128 << 10
	// MaxFormatBytes is the largest field format may pad or fill, in bytes: a width or precision
	// above it is refused. 1 MiB.
	MaxFormatBytes = 1 << 20
)

// intCapRule names MaxIntResultBytes in a *MemoryError.
const intCapRule = "the cap on integer size"

// pollEvery is how many iterations a builtin's loop runs between two checks of cancellation.
const pollEvery = 4096

// Language returns the language builtins and modules as registry entries: sum, round, pow,
// isinstance, format (group GroupLanguage) and the modules math, json and re (group GroupModule).
// The values are stateless (re's compiled-pattern cache is the one shared, locked structure) and
// may be shared, frozen, by concurrent runs.
func Language() Registry {
	return Registry{
		{
			Name: "sum", Group: GroupLanguage, Value: starlark.NewBuiltin("sum", sum),
			Signature: "sum(iterable, start=0)",
			Doc:       "Adds the items of iterable to start, like Python: ints stay ints, any float makes a float (compensated summation, as Python 3.12).",
			Example:   `total = sum([r["price"] * r["qty"] for r in rows])`,
		},
		{
			Name: "round", Group: GroupLanguage, Value: starlark.NewBuiltin("round", round),
			Signature: "round(x, ndigits=None)",
			Doc:       "Rounds half to even like Python 3: round(x) is an int, round(x, n) keeps x's type; n may be negative.",
			Example:   `avg = round(total / count, 2)`,
		},
		{
			Name: "pow", Group: GroupLanguage, Value: starlark.NewBuiltin("pow", pow),
			Signature: "pow(base, exp, mod=None)",
			Doc:       "Raises base to exp like Python (Starlark has no ** operator); with mod, modular exponentiation of ints. Results over 128 KiB are refused.",
			Example:   `growth = pow(1.05, years)`,
		},
		{
			Name: "isinstance", Group: GroupLanguage, Value: starlark.NewBuiltin("isinstance", isinstance),
			Signature: "isinstance(x, type_or_tuple)",
			Doc:       "Reports whether x is a str, int, float, bool, list, dict, tuple or set (or one of a tuple of them), like Python: a bool is also an int.",
			Example:   `if isinstance(v, (int, float)): total += v`,
		},
		{
			Name: "format", Group: GroupLanguage, Value: starlark.NewBuiltin("format", format),
			Signature: `format(value, spec="")`,
			Doc:       "Formats value with Python's format-spec mini-language: [[fill]align][sign][z][#][0][width][,|_][.precision][type].",
			Example:   `line = "Total: " + format(total, ",.2f")`,
		},
		{
			Name: "math", Group: GroupModule, Value: newMathModule(),
			Signature: "math",
			Doc:       "Python's math module: floor, ceil, sqrt, log, exp, isclose, fsum, prod, isnan, isinf, pi, e, inf, nan, ... (math.floor and math.ceil return ints).",
			Example:   `pages = math.ceil(len(rows) / 20)`,
		},
		{
			Name: "json", Group: GroupModule, Value: newJSONModule(),
			Signature: "json",
			Doc:       "JSON: dumps(obj, indent=None, sort_keys=False) and loads(s) like Python, plus Starlark's encode, decode, encode_indent and indent.",
			Example:   `payload = json.dumps({"ids": ids}, sort_keys=True)`,
		},
		{
			Name: "re", Group: GroupModule, Value: newReModule(),
			Signature: "re",
			Doc:       "Regular expressions on RE2 (linear time, so no lookaround or backreferences): search, match, fullmatch, findall, finditer, sub, subn, split, compile, escape, flags I, M, S, X, A.",
			Example:   `m = re.search(r"(\d+)-(\d+)", code)`,
		},
		RunSubject(),
	}
}

// --- shared helpers ---------------------------------------------------------------------------

// tickFn is a Starlark function that does nothing. Calling it runs one interpreter step, which
// is where go.starlark.net checks the thread's cancellation and step limit; builtins that loop
// over caller-sized input call it every pollEvery iterations, so a cancelled run stops promptly
// even inside sum(range(10**12)).
var tickFn = sync.OnceValue(func() starlark.Value {
	opts := &syntax.FileOptions{}
	globals, err := starlark.ExecFileOptions(opts, &starlark.Thread{Name: "builtins.tick"}, "builtins.star", "def tick():\n    pass\n", nil)
	if err != nil {
		return nil // cannot happen for this constant program; poll then does nothing
	}
	globals.Freeze()
	return globals["tick"]
})

// poll returns an error if thread has been cancelled (time limit, step limit, watchdog).
func poll(thread *starlark.Thread) error {
	fn := tickFn()
	if fn == nil || thread == nil {
		return nil
	}
	_, err := starlark.Call(thread, fn, nil, nil)
	return err
}

// pacer counts the iterations of a builtin's loop and polls for cancellation now and then.
type pacer struct {
	thread *starlark.Thread
	n      uint
}

func (p *pacer) step() error {
	p.n++
	if p.n%pollEvery == 0 {
		return poll(p.thread)
	}
	return nil
}

// meter asks the run's budget about a result that grows piece by piece (a re.sub output, a
// json.dumps document, a findall list): Charge is consulted with the whole size each time it has
// grown by a quarter (and at least CheckThreshold) since the last question, and once more with
// the finished size (settle): between two questions a result may grow unasked, but it is never
// handed to the plan without its whole size asked about.
type meter struct {
	thread *starlark.Thread
	op     string
	next   int64 // the size at which to ask again
	asked  int64 // the size last asked about
}

func newMeter(thread *starlark.Thread, op string) *meter {
	return &meter{thread: thread, op: op, next: CheckThreshold}
}

// grow records that the result now holds total bytes.
func (m *meter) grow(total int64) error {
	if total < m.next {
		return nil
	}
	if err := Charge(m.thread, m.op, total); err != nil {
		return err
	}
	m.asked = total
	m.next = total + max(total/4, CheckThreshold)
	return nil
}

// settle asks about the finished result's total bytes unless that was the last question: a
// result that stopped growing between two questions (1.0 MiB asked, 1.9 MiB made) is refused
// as its whole size, not let through as the part asked about.
func (m *meter) settle(total int64) error {
	if total <= m.asked {
		return nil
	}
	if err := Charge(m.thread, m.op, total); err != nil {
		return err
	}
	m.asked = total
	return nil
}

// pyType names a Starlark value's type as Python would, for messages that mimic Python's.
func pyType(v starlark.Value) string {
	switch v.(type) {
	case starlark.String:
		return "str"
	case starlark.NoneType:
		return "NoneType"
	}
	return v.Type()
}

// toFloat converts an int, bool or float to float64, with Python's error for huge ints.
func toFloat(v starlark.Value) (float64, bool, error) {
	switch v := v.(type) {
	case starlark.Float:
		return float64(v), true, nil
	case starlark.Bool:
		if v {
			return 1, true, nil
		}
		return 0, true, nil
	case starlark.Int:
		f := float64(v.Float())
		if math.IsInf(f, 0) {
			return 0, true, errors.New("int too large to convert to float")
		}
		return f, true, nil
	}
	return 0, false, nil
}

// asInt returns v as an Int when it is an int or a bool (Python's bool is an int).
func asInt(v starlark.Value) (starlark.Int, bool) {
	switch v := v.(type) {
	case starlark.Int:
		return v, true
	case starlark.Bool:
		if v {
			return starlark.MakeInt(1), true
		}
		return starlark.MakeInt(0), true
	}
	return starlark.Int{}, false
}

// clipInt returns i as an int64, clipped to ±MaxInt64 as Python clips an index.
func clipInt(i starlark.Int) int64 {
	if n, ok := i.Int64(); ok {
		return n
	}
	if i.Sign() < 0 {
		return math.MinInt64
	}
	return math.MaxInt64
}

// --- sum --------------------------------------------------------------------------------------

const sumStringsMsg = "sum() can't sum strings [use ''.join(seq) instead]"

// sum implements Python 3.12's sum: exact int accumulation, Neumaier-compensated float
// accumulation, and + for anything else (lists, tuples), charged against the budget.
func sum(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var iterable starlark.Iterable
	var start starlark.Value = starlark.MakeInt(0)
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "iterable", &iterable, "start?", &start); err != nil {
		return nil, err
	}
	switch start.(type) {
	case starlark.String, starlark.Bytes:
		return nil, fmt.Errorf("%s: %s", b.Name(), sumStringsMsg)
	}
	s := summer{name: b.Name(), thread: thread}
	if i, ok := asInt(start); ok {
		s.mode, s.i = sumInt, i
	} else if f, ok := start.(starlark.Float); ok {
		s.mode, s.f = sumFloat, float64(f)
	} else {
		s.mode, s.acc = sumOther, start
	}
	iter := iterable.Iterate()
	defer iter.Done()
	p := pacer{thread: thread}
	var x starlark.Value
	for iter.Next(&x) {
		if err := s.add(x); err != nil {
			return nil, err
		}
		if err := p.step(); err != nil {
			return nil, err
		}
	}
	return s.result(), nil
}

type sumMode int

const (
	sumInt sumMode = iota
	sumFloat
	sumOther
)

type summer struct {
	name   string
	thread *starlark.Thread
	mode   sumMode
	i      starlark.Int
	f, c   float64 // running float sum and its Neumaier compensation
	acc    starlark.Value
}

func (s *summer) add(x starlark.Value) error {
	switch x.(type) {
	case starlark.String, starlark.Bytes:
		return fmt.Errorf("%s: %s", s.name, sumStringsMsg)
	}
	switch s.mode {
	case sumInt:
		if xi, ok := asInt(x); ok {
			s.i = s.i.Add(xi)
			return nil
		}
		if xf, ok := x.(starlark.Float); ok {
			f, _, err := toFloat(s.i)
			if err != nil {
				return fmt.Errorf("%s: %v", s.name, err)
			}
			s.mode, s.f, s.c = sumFloat, f+float64(xf), 0
			return nil
		}
		s.mode, s.acc = sumOther, s.i
	case sumFloat:
		if xf, ok := x.(starlark.Float); ok {
			// Neumaier's improvement of Kahan–Babuška summation, as CPython 3.12.
			v := float64(xf)
			t := s.f + v
			if math.Abs(s.f) >= math.Abs(v) {
				s.c += (s.f - t) + v
			} else {
				s.c += (v - t) + s.f
			}
			s.f = t
			return nil
		}
		if xi, ok := asInt(x); ok {
			if n, ok := xi.Int64(); ok {
				s.f += float64(n)
				return nil
			}
			xf, _, err := toFloat(xi)
			if err != nil {
				return fmt.Errorf("%s: %v", s.name, err)
			}
			s.f += xf
			return nil
		}
		s.mode, s.acc = sumOther, s.floatResult()
	}
	// Generic +: lists and tuples concatenate, everything else fails as in Python.
	switch a := s.acc.(type) {
	case *starlark.List, starlark.Tuple:
		if l, ok := x.(starlark.Sequence); ok && (x.Type() == "list" || x.Type() == "tuple") {
			n := int64(a.(starlark.Sequence).Len() + l.Len())
			if err := Charge(s.thread, "sum", n*elemBytesLang); err != nil {
				return err
			}
		}
	}
	v, err := starlark.Binary(syntax.PLUS, s.acc, x)
	if err != nil {
		return fmt.Errorf("%s: unsupported operand type(s) for +: '%s' and '%s'", s.name, pyType(s.acc), pyType(x))
	}
	s.acc = v
	return nil
}

// elemBytesLang estimates one element of a list or tuple: an interface value.
const elemBytesLang = 16

func (s *summer) floatResult() starlark.Value {
	f := s.f
	// As CPython: keep the sign of a negative result and never turn an infinite sum into NaN.
	if s.c != 0 && !math.IsInf(s.c, 0) && !math.IsNaN(s.c) {
		f += s.c
	}
	return starlark.Float(f)
}

func (s *summer) result() starlark.Value {
	switch s.mode {
	case sumInt:
		return s.i
	case sumFloat:
		return s.floatResult()
	}
	return s.acc
}

// --- round ------------------------------------------------------------------------------------

// round implements Python 3's round: half to even, exact on the binary value of a float.
func round(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var x starlark.Value
	var nd starlark.Value = starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "number", &x, "ndigits?", &nd); err != nil {
		return nil, err
	}
	var ndigits int64
	hasN := nd != starlark.None
	if hasN {
		n, err := intValue(b, nd)
		if err != nil {
			return nil, err
		}
		ndigits = clipInt(n)
	}
	var (
		v   starlark.Value
		err error
	)
	switch x := x.(type) {
	case starlark.Int:
		if bits := bitLen(x); bits > 0 && hasN && ndigits < 0 {
			// A power of ten about as large as x, a division and a product.
			if err := ChargeWork(thread, "round() of a big integer", workSteps(3*textNanos(bits))); err != nil {
				return nil, err
			}
		}
		v, err = roundInt(x, hasN, ndigits)
	case starlark.Bool:
		i, _ := asInt(x)
		v, err = roundInt(i, hasN, ndigits)
	case starlark.Float:
		if !hasN {
			v, err = floatToInt(math.RoundToEven(float64(x)))
		} else {
			var f float64
			f, err = RoundFloat(float64(x), ndigits)
			v = starlark.Float(f)
		}
	default:
		return nil, fmt.Errorf("%s: type %s doesn't define __round__ method", b.Name(), pyType(x))
	}
	if err != nil {
		if isLimit(err) {
			return nil, err
		}
		return nil, fmt.Errorf("%s: %v", b.Name(), err)
	}
	return v, nil
}

// floatToInt converts an integral float to an Int, with Python's errors for NaN and infinities.
func floatToInt(f float64) (starlark.Value, error) {
	switch {
	case math.IsNaN(f):
		return nil, errors.New("cannot convert float NaN to integer")
	case math.IsInf(f, 0):
		return nil, errors.New("cannot convert float infinity to integer")
	}
	if f > -1<<62 && f < 1<<62 {
		return starlark.MakeInt64(int64(f)), nil
	}
	i, _ := new(big.Float).SetFloat64(f).Int(nil)
	return starlark.MakeBigInt(i), nil
}

// roundInt rounds an int to ndigits (only negative ndigits change it) half to even.
func roundInt(x starlark.Int, hasN bool, ndigits int64) (starlark.Value, error) {
	if !hasN || ndigits >= 0 || x.Sign() == 0 {
		return x, nil
	}
	bx := x.BigInt()
	// 10**k > 2|x| when k exceeds x's decimal digits plus one: the result is 0.
	if k := -ndigits; k < 0 || k > int64(float64(bx.BitLen())*0.30103)+2 {
		return starlark.MakeInt(0), nil
	}
	p := new(big.Int).Exp(big.NewInt(10), big.NewInt(-ndigits), nil)
	q, r := new(big.Int).DivMod(bx, p, new(big.Int)) // Euclidean: 0 <= r < p
	r2 := new(big.Int).Lsh(r, 1)
	if c := r2.Cmp(p); c > 0 || (c == 0 && q.Bit(0) == 1) {
		q.Add(q, big.NewInt(1))
	}
	return starlark.MakeBigInt(q.Mul(q, p)), nil
}

// RoundFloat rounds x to ndigits decimal places exactly as Python 3's round(x, ndigits): the
// exact binary value of x is rounded half to even (so round(2.675, 2) is 2.67, because 2.675 is
// stored as 2.67499999...), NaN and infinities round to themselves, and a result too large for
// a float is an error.
func RoundFloat(x float64, ndigits int64) (float64, error) {
	// Python's NDIGITS_MAX and NDIGITS_MIN: beyond them x rounds to itself or to a signed zero.
	const ndigitsMax, ndigitsMin = 323, -308
	switch {
	case math.IsNaN(x) || math.IsInf(x, 0):
		return x, nil
	case ndigits > ndigitsMax:
		return x, nil
	case ndigits < ndigitsMin:
		return 0.0 * x, nil
	case ndigits >= 0:
		// Go's fixed formatting is exact and rounds ties to even, like David Gay's dtoa mode 3.
		var buf [64]byte
		s := strconv.AppendFloat(buf[:0], x, 'f', int(ndigits), 64)
		r, err := strconv.ParseFloat(string(s), 64)
		if err != nil {
			return 0, errors.New("rounded value too large to represent")
		}
		return r, nil
	}
	// ndigits < 0: round the exact rational value of x to a multiple of 10**-ndigits.
	r := new(big.Rat).SetFloat64(x)
	p := new(big.Int).Exp(big.NewInt(10), big.NewInt(-ndigits), nil)
	num := new(big.Int).Abs(r.Num())
	den := new(big.Int).Mul(r.Denom(), p)
	q, rem := new(big.Int).QuoRem(num, den, new(big.Int))
	rem.Lsh(rem, 1)
	if c := rem.Cmp(den); c > 0 || (c == 0 && q.Bit(0) == 1) {
		q.Add(q, big.NewInt(1))
	}
	q.Mul(q, p)
	f, _ := new(big.Float).SetInt(q).Float64()
	if math.IsInf(f, 0) {
		return 0, errors.New("rounded value too large to represent")
	}
	return math.Copysign(f, x), nil
}

// --- pow --------------------------------------------------------------------------------------

// pow implements Python's pow for ints and floats; an int result is size-checked before it is
// computed (MaxIntResultBytes, then the run's budget).
func pow(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var base, exp starlark.Value
	var mod starlark.Value = starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "base", &base, "exp", &exp, "mod?", &mod); err != nil {
		return nil, err
	}
	v, err := powValues(thread, base, exp, mod)
	if err != nil {
		if isLimit(err) {
			return nil, err
		}
		return nil, fmt.Errorf("%s: %v", b.Name(), err)
	}
	return v, nil
}

func powValues(thread *starlark.Thread, base, exp, mod starlark.Value) (starlark.Value, error) {
	bi, bInt := asInt(base)
	ei, eInt := asInt(exp)
	if mod != starlark.None {
		mi, mInt := asInt(mod)
		if !bInt || !eInt || !mInt {
			return nil, errors.New("pow() 3rd argument not allowed unless all arguments are integers")
		}
		if bitLen(ei) > 0 || bitLen(mi) > 0 {
			// One modular product per exponent bit: pow(3, m-1, m) with a 1,000,000-bit m ran
			// for minutes.
			mBits := mi.BigInt().BitLen()
			ns := powModNanos(ei.BigInt().BitLen(), mBits) + divNanos(bi.BigInt().BitLen(), mBits)
			if ei.Sign() < 0 {
				ns += gcdNanos(mBits, mBits) // the modular inverse
			}
			steps := workSteps(ns)
			if err := ChargeWork(thread, "pow() with a modulus", steps); err != nil {
				return nil, err
			}
		}
		return powMod(bi.BigInt(), ei.BigInt(), mi.BigInt())
	}
	if bInt && eInt && ei.Sign() >= 0 {
		return powInt(thread, bi, ei)
	}
	bf, ok, err := toFloat(base)
	if !ok {
		return nil, fmt.Errorf("unsupported operand type(s) for ** or pow(): '%s' and '%s'", pyType(base), pyType(exp))
	}
	if err != nil {
		return nil, err
	}
	ef, ok, err := toFloat(exp)
	if !ok {
		return nil, fmt.Errorf("unsupported operand type(s) for ** or pow(): '%s' and '%s'", pyType(base), pyType(exp))
	}
	if err != nil {
		return nil, err
	}
	f, err := PowFloat(bf, ef)
	if err != nil {
		return nil, err
	}
	return starlark.Float(f), nil
}

func powInt(thread *starlark.Thread, base, exp starlark.Int) (starlark.Value, error) {
	bb := base.BigInt()
	if exp.Sign() == 0 {
		return starlark.MakeInt(1), nil
	}
	if abs := new(big.Int).Abs(bb); abs.Cmp(big.NewInt(1)) <= 0 {
		// 0, 1 and -1 stay small whatever the exponent.
		if bb.Sign() < 0 && exp.BigInt().Bit(0) == 0 {
			return starlark.MakeInt(1), nil
		}
		return base, nil
	}
	// Estimate the result's size: exp * log2|base| bits.
	ef := float64(exp.Float())
	bytes := ef * log2Abs(bb) / 8
	if bytes > MaxIntResultBytes || math.IsInf(bytes, 0) {
		n := int64(math.MaxInt64)
		if bytes < math.MaxInt64 {
			n = int64(bytes)
		}
		return nil, &MemoryError{Op: "pow", Bytes: n, Limit: MaxIntResultBytes, Rule: intCapRule}
	}
	if bytes > 8 {
		if err := ChargeWork(thread, "pow", workSteps(productNanos(int(bytes*8), 2))); err != nil {
			return nil, err
		}
	}
	if err := Charge(thread, "pow", int64(bytes)+8); err != nil {
		return nil, err
	}
	return starlark.MakeBigInt(new(big.Int).Exp(bb, exp.BigInt(), nil)), nil
}

// log2Abs returns log2|x| for x != 0.
func log2Abs(x *big.Int) float64 {
	n := x.BitLen()
	if n <= 1000 {
		f, _ := new(big.Float).SetInt(x).Float64()
		return math.Log2(math.Abs(f))
	}
	return float64(n)
}

func powMod(base, exp, mod *big.Int) (starlark.Value, error) {
	if mod.Sign() == 0 {
		return nil, errors.New("pow() 3rd argument cannot be 0")
	}
	m := new(big.Int).Abs(mod)
	b := new(big.Int).Mod(base, m) // Euclidean, so 0 <= b < m
	e := exp
	if m.Cmp(big.NewInt(1)) == 0 {
		return starlark.MakeInt(0), nil
	}
	if exp.Sign() < 0 {
		inv := new(big.Int).ModInverse(b, m)
		if inv == nil {
			return nil, errors.New("base is not invertible for the given modulus")
		}
		b, e = inv, new(big.Int).Neg(exp)
	}
	r := new(big.Int).Exp(b, e, m)
	r.Mod(r, m)
	if mod.Sign() < 0 && r.Sign() != 0 {
		r.Add(r, mod)
	}
	return starlark.MakeBigInt(r), nil
}

// PowFloat is Python's float ** float: 0.0 to a negative power and overflow are errors, a
// negative base to a fractional power (a complex number in Python) is an error, and the special
// cases of NaN and the infinities follow CPython's float_pow.
func PowFloat(v, w float64) (float64, error) {
	switch {
	case w == 0:
		return 1, nil
	case math.IsNaN(v):
		return v, nil
	case math.IsNaN(w):
		if v == 1 {
			return 1, nil
		}
		return w, nil
	case math.IsInf(w, 0):
		av := math.Abs(v)
		if av == 1 {
			return 1, nil
		}
		if (w > 0) == (av > 1) {
			return math.Inf(1), nil
		}
		return 0, nil
	case math.IsInf(v, 0):
		odd := isOddInteger(w)
		if w > 0 {
			if odd {
				return v, nil
			}
			return math.Abs(v), nil
		}
		if odd {
			return math.Copysign(0, v), nil
		}
		return 0, nil
	case v == 0:
		if w < 0 {
			return 0, errors.New("0.0 cannot be raised to a negative power")
		}
		if isOddInteger(w) {
			return v, nil
		}
		return 0, nil
	}
	negate := false
	if v < 0 {
		if w != math.Floor(w) {
			return 0, errors.New("a negative number cannot be raised to a fractional power (Python would return a complex number)")
		}
		v, negate = -v, isOddInteger(w)
	}
	if v == 1 {
		if negate {
			return -1, nil
		}
		return 1, nil
	}
	r := math.Pow(v, w)
	if math.IsInf(r, 0) {
		return 0, errors.New("(34, 'Numerical result out of range')")
	}
	if negate {
		r = -r
	}
	return r, nil
}

func isOddInteger(w float64) bool {
	return math.Abs(w) < 1<<53 && w == math.Trunc(w) && math.Mod(w, 2) != 0
}

// --- isinstance -------------------------------------------------------------------------------

// instanceTypes maps the names of the builtins isinstance accepts to the Starlark types
// (Value.Type()) that count as instances. Python's bool is a subclass of int.
var instanceTypes = map[string][]string{
	"str":   {"string"},
	"int":   {"int", "bool"},
	"float": {"float"},
	"bool":  {"bool"},
	"list":  {"list"},
	"dict":  {"dict"},
	"tuple": {"tuple"},
	"set":   {"set"},
}

const isinstanceHint = "isinstance accepts str, int, float, bool, list, dict, tuple and set, or a tuple of them; for any other kind compare type(x) with its name, as in type(x) == \"NoneType\""

// isinstance implements Python's isinstance for the builtin types a plan meets. It decides by
// x.Type(), so values that present themselves as a dict (table rows) count as dicts.
func isinstance(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var x, t starlark.Value
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 2, &x, &t); err != nil {
		return nil, err
	}
	ok, err := isInstance(x, t, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %v (hint: %s)", b.Name(), err, isinstanceHint)
	}
	return starlark.Bool(ok), nil
}

func isInstance(x, t starlark.Value, depth int) (bool, error) {
	if tup, ok := t.(starlark.Tuple); ok && depth < 8 {
		for _, e := range tup {
			ok, err := isInstance(x, e, depth+1)
			if err != nil || ok {
				return ok, err
			}
		}
		return false, nil
	}
	fn, ok := t.(*starlark.Builtin)
	if !ok || fn.Receiver() != nil {
		return false, fmt.Errorf("isinstance() arg 2 must be a type or tuple of types, not %s", t.Type())
	}
	types, ok := instanceTypes[fn.Name()]
	if !ok {
		return false, fmt.Errorf("isinstance() arg 2 must be a type or tuple of types, not the builtin %s", fn.Name())
	}
	xt := x.Type()
	for _, want := range types {
		if xt == want {
			return true, nil
		}
	}
	return false, nil
}
