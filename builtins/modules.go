//lint:file-ignore ST1005 the error strings here are Python's own messages, word for word, which plans and their authors recognise

package builtins

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strings"
	"unicode/utf8"

	sjson "go.starlark.net/lib/json"
	smath "go.starlark.net/lib/math"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"
)

// --- math -------------------------------------------------------------------------------------

// newMathModule returns Python's math module: go.starlark.net/lib/math's functions with Python's
// errors ("math domain error" where upstream returns NaN, "math range error" for overflow), bools
// accepted as ints, plus the functions and constants plans commonly use that upstream lacks.
func newMathModule() *starlarkstruct.Module {
	m := &starlarkstruct.Module{Name: "math", Members: starlark.StringDict{}}
	for name, v := range smath.Module.Members {
		if b, ok := v.(*starlark.Builtin); ok {
			m.Members[name] = checkedMath(name, b)
		} else {
			m.Members[name] = v
		}
	}
	unary := map[string]func(float64) float64{
		"log10": math.Log10, "log2": math.Log2, "log1p": math.Log1p, "expm1": math.Expm1,
		"exp2": math.Exp2, "cbrt": math.Cbrt, "erf": math.Erf, "erfc": math.Erfc,
		"lgamma": func(x float64) float64 { y, _ := math.Lgamma(x); return y },
	}
	for name, fn := range unary {
		m.Members[name] = unaryMath(name, fn)
	}
	m.Members["fmod"] = checkedMath("fmod", smath.Module.Members["mod"].(*starlark.Builtin))
	m.Members["inf"] = starlark.Float(math.Inf(1))
	m.Members["nan"] = starlark.Float(math.NaN())
	m.Members["tau"] = starlark.Float(2 * math.Pi)
	for name, fn := range map[string]func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error){
		"isnan": mathIsNaN, "isinf": mathIsInf, "isfinite": mathIsFinite, "isclose": mathIsClose,
		"fsum": mathFsum, "prod": mathProd, "trunc": mathTrunc, "gcd": mathGCD, "lcm": mathLCM,
		"factorial": mathFactorial, "comb": mathComb, "perm": mathPerm, "isqrt": mathIsqrt,
		"modf": mathModf, "frexp": mathFrexp, "ldexp": mathLdexp,
	} {
		m.Members[name] = starlark.NewBuiltin(name, fn)
	}
	return m
}

// poleFuncs are the functions whose infinite result for finite arguments is a domain error in
// Python (a pole such as log(0)) rather than an overflow.
var poleFuncs = map[string]bool{"log": true, "log2": true, "log10": true, "log1p": true, "atanh": true, "lgamma": true}

// checkedMath wraps an upstream float function: bools become ints and a NaN or infinite result
// from ordinary arguments becomes Python's ValueError or OverflowError message.
func checkedMath(name string, fn *starlark.Builtin) *starlark.Builtin {
	return starlark.NewBuiltin(name, func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		args = boolsToInts(args)
		for _, a := range args {
			if _, ok, _ := toFloat(a); !ok {
				return nil, fmt.Errorf("%s: must be real number, not %s", name, pyType(a))
			}
		}
		v, err := fn.CallInternal(thread, args, kwargs)
		if err != nil {
			return nil, err
		}
		f, ok := v.(starlark.Float)
		if !ok {
			return v, nil
		}
		return mathResult(name, float64(f), args)
	})
}

func unaryMath(name string, fn func(float64) float64) *starlark.Builtin {
	return starlark.NewBuiltin(name, func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var x starlark.Value
		if err := starlark.UnpackPositionalArgs(name, args, kwargs, 1, &x); err != nil {
			return nil, err
		}
		f, err := mathFloat(name, x)
		if err != nil {
			return nil, err
		}
		return mathResult(name, fn(f), args)
	})
}

// mathResult turns a NaN or infinite result of ordinary arguments into Python's errors.
func mathResult(name string, f float64, args starlark.Tuple) (starlark.Value, error) {
	if !math.IsNaN(f) && !math.IsInf(f, 0) {
		return starlark.Float(f), nil
	}
	special, zeroBase := false, false
	for i, a := range args {
		if x, ok := a.(starlark.Float); ok && (math.IsNaN(float64(x)) || math.IsInf(float64(x), 0)) {
			special = true
		}
		if i == 0 {
			if x, ok, _ := toFloat(a); ok && x == 0 {
				zeroBase = true
			}
		}
	}
	switch {
	case special:
		return starlark.Float(f), nil
	case math.IsNaN(f), poleFuncs[name], name == "pow" && zeroBase, name == "gamma" && zeroBase:
		return nil, fmt.Errorf("%s: math domain error", name)
	}
	return nil, fmt.Errorf("%s: math range error", name)
}

func boolsToInts(args starlark.Tuple) starlark.Tuple {
	for i, a := range args {
		if _, ok := a.(starlark.Bool); ok {
			out := append(starlark.Tuple(nil), args...)
			for j := i; j < len(out); j++ {
				if bi, ok := asInt(out[j]); ok {
					out[j] = bi
				}
			}
			return out
		}
	}
	return args
}

// mathFloat converts a math argument to float64 with Python's messages.
func mathFloat(name string, x starlark.Value) (float64, error) {
	f, ok, err := toFloat(x)
	if !ok {
		return 0, fmt.Errorf("%s: must be real number, not %s", name, pyType(x))
	}
	if err != nil {
		return 0, fmt.Errorf("%s: %v", name, err)
	}
	return f, nil
}

func oneFloat(b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (float64, error) {
	var x starlark.Value
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &x); err != nil {
		return 0, err
	}
	return mathFloat(b.Name(), x)
}

func mathIsNaN(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	f, err := oneFloat(b, args, kwargs)
	return starlark.Bool(math.IsNaN(f)), err
}

func mathIsInf(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	f, err := oneFloat(b, args, kwargs)
	return starlark.Bool(math.IsInf(f, 0)), err
}

func mathIsFinite(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	f, err := oneFloat(b, args, kwargs)
	return starlark.Bool(!math.IsInf(f, 0) && !math.IsNaN(f)), err
}

func mathTrunc(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var x starlark.Value
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &x); err != nil {
		return nil, err
	}
	if i, ok := asInt(x); ok {
		return i, nil
	}
	f, err := mathFloat(b.Name(), x)
	if err != nil {
		return nil, err
	}
	v, err := floatToInt(math.Trunc(f))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", b.Name(), err)
	}
	return v, nil
}

func mathModf(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	f, err := oneFloat(b, args, kwargs)
	if err != nil {
		return nil, err
	}
	ip, frac := math.Modf(f)
	if math.IsInf(f, 0) {
		frac = math.Copysign(0, f)
	}
	return starlark.Tuple{starlark.Float(frac), starlark.Float(ip)}, nil
}

func mathFrexp(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	f, err := oneFloat(b, args, kwargs)
	if err != nil {
		return nil, err
	}
	m, e := math.Frexp(f)
	return starlark.Tuple{starlark.Float(m), starlark.MakeInt(e)}, nil
}

func mathLdexp(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var x, i starlark.Value
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 2, &x, &i); err != nil {
		return nil, err
	}
	f, err := mathFloat(b.Name(), x)
	if err != nil {
		return nil, err
	}
	e, ok := asInt(i)
	if !ok {
		return nil, fmt.Errorf("%s: Expected an int as second argument to ldexp.", b.Name())
	}
	n := clipInt(e)
	n = max(min(n, 1<<20), -(1 << 20))
	r := math.Ldexp(f, int(n))
	if math.IsInf(r, 0) && !math.IsInf(f, 0) {
		return nil, fmt.Errorf("%s: math range error", b.Name())
	}
	return starlark.Float(r), nil
}

func mathIsClose(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var x, y starlark.Value
	var relTol, absTol starlark.Value = starlark.Float(1e-9), starlark.Float(0)
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "a", &x, "b", &y, "rel_tol?", &relTol, "abs_tol?", &absTol); err != nil {
		return nil, err
	}
	var fs [4]float64
	for i, v := range []starlark.Value{x, y, relTol, absTol} {
		f, err := mathFloat(b.Name(), v)
		if err != nil {
			return nil, err
		}
		fs[i] = f
	}
	a, c, rel, abs := fs[0], fs[1], fs[2], fs[3]
	if rel < 0 || abs < 0 {
		return nil, fmt.Errorf("%s: tolerances must be non-negative", b.Name())
	}
	if a == c {
		return starlark.True, nil
	}
	if math.IsInf(a, 0) || math.IsInf(c, 0) {
		return starlark.False, nil
	}
	diff := math.Abs(c - a)
	return starlark.Bool(diff <= math.Abs(rel*c) || diff <= math.Abs(rel*a) || diff <= abs), nil
}

// mathFsum is CPython's math.fsum: Shewchuk's exact partial sums, correctly rounded.
func mathFsum(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var iterable starlark.Iterable
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &iterable); err != nil {
		return nil, err
	}
	var p []float64
	specialSum, infSum := 0.0, 0.0
	iter := iterable.Iterate()
	defer iter.Done()
	pc := pacer{thread: thread}
	var item starlark.Value
	for iter.Next(&item) {
		if err := pc.step(); err != nil {
			return nil, err
		}
		x, err := mathFloat(b.Name(), item)
		if err != nil {
			return nil, err
		}
		xsave := x
		i := 0
		for _, y := range p {
			if math.Abs(x) < math.Abs(y) {
				x, y = y, x
			}
			hi := x + y
			lo := y - (hi - x)
			if lo != 0 {
				p[i] = lo
				i++
			}
			x = hi
		}
		p = p[:i]
		if x != 0 {
			if math.IsInf(x, 0) || math.IsNaN(x) {
				if !math.IsInf(xsave, 0) && !math.IsNaN(xsave) {
					return nil, fmt.Errorf("%s: intermediate overflow in fsum", b.Name())
				}
				if math.IsInf(xsave, 0) {
					infSum += xsave
				}
				specialSum += xsave
				p = p[:0]
			} else {
				p = append(p, x)
			}
		}
	}
	if specialSum != 0 || math.IsNaN(specialSum) {
		if math.IsNaN(infSum) {
			return nil, fmt.Errorf("%s: -inf + inf in fsum", b.Name())
		}
		return starlark.Float(specialSum), nil
	}
	hi, lo := 0.0, 0.0
	n := len(p)
	if n > 0 {
		n--
		hi = p[n]
		for n > 0 {
			x := hi
			n--
			y := p[n]
			hi = x + y
			lo = y - (hi - x)
			if lo != 0 {
				break
			}
		}
		if n > 0 && ((lo < 0 && p[n-1] < 0) || (lo > 0 && p[n-1] > 0)) {
			y := lo * 2
			x := hi + y
			if y == x-hi {
				hi = x
			}
		}
	}
	return starlark.Float(hi), nil
}

// chargeIntBits refuses an int result of more than MaxIntResultBytes and charges its memory;
// the work of computing it is charged by the caller (ChargeWork).
func chargeIntBits(thread *starlark.Thread, op string, bits float64) error {
	bytes := bits / 8
	if bytes > MaxIntResultBytes || math.IsNaN(bytes) {
		n := int64(math.MaxInt64)
		if bytes < math.MaxInt64 {
			n = int64(bytes)
		}
		return &MemoryError{Op: op, Bytes: n, Limit: MaxIntResultBytes, Rule: intCapRule}
	}
	if bytes < 4096 {
		return nil
	}
	return Charge(thread, op, int64(bytes))
}

func mathProd(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var iterable starlark.Iterable
	var start starlark.Value = starlark.MakeInt(1)
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "iterable", &iterable, "start?", &start); err != nil {
		return nil, err
	}
	acc := start
	if i, ok := asInt(acc); ok {
		acc = i
	}
	iter := iterable.Iterate()
	defer iter.Done()
	pc := pacer{thread: thread}
	var x starlark.Value
	for iter.Next(&x) {
		if err := pc.step(); err != nil {
			return nil, err
		}
		if i, ok := asInt(x); ok {
			x = i
		}
		ai, aInt := acc.(starlark.Int)
		xi, xInt := x.(starlark.Int)
		if aInt && xInt {
			if err := chargeIntBits(thread, "math.prod", float64(ai.BigInt().BitLen()+xi.BigInt().BitLen())); err != nil {
				return nil, err
			}
			if bitLen(ai) > 0 || bitLen(xi) > 0 {
				if err := ChargeWork(thread, "math.prod", workSteps(mulNanos(ai.BigInt().BitLen(), xi.BigInt().BitLen()))); err != nil {
					return nil, err
				}
			}
			acc = ai.Mul(xi)
			continue
		}
		_, aNum, _ := toFloat(acc)
		_, xNum, _ := toFloat(x)
		if !aNum || !xNum {
			return nil, fmt.Errorf("%s: unsupported operand type(s) for *: '%s' and '%s'", b.Name(), pyType(acc), pyType(x))
		}
		v, err := starlark.Binary(syntax.STAR, acc, x)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", b.Name(), err)
		}
		acc = v
	}
	return acc, nil
}

// intValue returns an int argument (bools count, as in Python), or Python's error naming the
// type it got.
func intValue(b *starlark.Builtin, v starlark.Value) (starlark.Int, error) {
	i, ok := asInt(v)
	if !ok {
		return starlark.Int{}, fmt.Errorf("%s: '%s' object cannot be interpreted as an integer", b.Name(), pyType(v))
	}
	return i, nil
}

// intArg returns a non-negative int argument of a combinatorial function.
func intArg(b *starlark.Builtin, what string, v starlark.Value) (*big.Int, error) {
	i, err := intValue(b, v)
	if err != nil {
		return nil, err
	}
	if i.Sign() < 0 {
		return nil, fmt.Errorf("%s: %s must be a non-negative integer", b.Name(), what)
	}
	return i.BigInt(), nil
}

// log2Factorial estimates log2(n!) for the size check.
func log2Factorial(n float64) float64 {
	lg, _ := math.Lgamma(n + 1)
	return lg / math.Ln2
}

func mathFactorial(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var x starlark.Value
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &x); err != nil {
		return nil, err
	}
	i, err := intValue(b, x)
	if err != nil {
		return nil, err
	}
	if i.Sign() < 0 {
		return nil, fmt.Errorf("%s: factorial() not defined for negative values", b.Name())
	}
	n, ok := i.Int64()
	bits := log2Factorial(float64(i.Float()))
	if err := chargeIntBits(thread, "math.factorial", bits); err != nil || !ok {
		if err == nil {
			err = &MemoryError{Op: "math.factorial", Bytes: math.MaxInt64, Limit: MaxIntResultBytes, Rule: intCapRule}
		}
		return nil, err
	}
	if n < 2 {
		return starlark.MakeInt(1), nil
	}
	if bits > 64 {
		if err := ChargeWork(thread, "math.factorial", workSteps(productNanos(int(bits), float64(n)))); err != nil {
			return nil, err
		}
	}
	return starlark.MakeBigInt(new(big.Int).MulRange(1, n)), nil
}

func mathComb(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var nv, kv starlark.Value
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 2, &nv, &kv); err != nil {
		return nil, err
	}
	n, err := intArg(b, "n", nv)
	if err != nil {
		return nil, err
	}
	k, err := intArg(b, "k", kv)
	if err != nil {
		return nil, err
	}
	if k.Cmp(n) > 0 {
		return starlark.MakeInt(0), nil
	}
	if nk := new(big.Int).Sub(n, k); nk.Cmp(k) < 0 {
		k = nk
	}
	nf, _ := new(big.Float).SetInt(n).Float64()
	kf, _ := new(big.Float).SetInt(k).Float64()
	bits := log2Factorial(nf) - log2Factorial(kf) - log2Factorial(nf-kf)
	if math.IsNaN(bits) || math.IsInf(nf, 0) {
		bits = math.Inf(1)
	}
	if k.Sign() == 0 {
		return starlark.MakeInt(1), nil
	}
	if err := chargeIntBits(thread, "math.comb", bits); err != nil {
		return nil, err
	}
	if bits > 64 {
		// k steps, each a product and a quotient of the partial result by a small integer.
		kf, _ := new(big.Float).SetInt(k).Float64()
		if err := ChargeWork(thread, "math.comb", workSteps(kf*(4+2*words(int(bits))))); err != nil {
			return nil, err
		}
	}
	// C(n, k) = prod_{i=1..k} (n-k+i)/i, exact at every step.
	r := big.NewInt(1)
	nk := new(big.Int).Sub(n, k)
	pc := pacer{thread: thread}
	for i := int64(1); big.NewInt(i).Cmp(k) <= 0; i++ {
		if err := pc.step(); err != nil {
			return nil, err
		}
		r.Mul(r, new(big.Int).Add(nk, big.NewInt(i)))
		r.Quo(r, big.NewInt(i))
	}
	return starlark.MakeBigInt(r), nil
}

func mathPerm(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var nv starlark.Value
	var kv starlark.Value = starlark.None
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &nv, &kv); err != nil {
		return nil, err
	}
	n, err := intArg(b, "n", nv)
	if err != nil {
		return nil, err
	}
	k := n
	if kv != starlark.None {
		if k, err = intArg(b, "k", kv); err != nil {
			return nil, err
		}
	}
	if k.Cmp(n) > 0 {
		return starlark.MakeInt(0), nil
	}
	nf, _ := new(big.Float).SetInt(n).Float64()
	kf, _ := new(big.Float).SetInt(k).Float64()
	bits := log2Factorial(nf) - log2Factorial(nf-kf)
	if math.IsNaN(bits) || math.IsInf(nf, 0) {
		bits = math.Inf(1)
	}
	if k.Sign() == 0 {
		return starlark.MakeInt(1), nil
	}
	if err := chargeIntBits(thread, "math.perm", bits); err != nil {
		return nil, err
	}
	if !n.IsInt64() {
		return nil, &MemoryError{Op: "math.perm", Bytes: math.MaxInt64, Limit: MaxIntResultBytes, Rule: intCapRule}
	}
	if bits > 64 {
		if err := ChargeWork(thread, "math.perm", workSteps(productNanos(int(bits), kf))); err != nil {
			return nil, err
		}
	}
	return starlark.MakeBigInt(new(big.Int).MulRange(n.Int64()-k.Int64()+1, n.Int64())), nil
}

func mathGCD(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(kwargs) > 0 {
		return nil, fmt.Errorf("%s: unexpected keyword arguments", b.Name())
	}
	g := new(big.Int)
	for _, a := range args {
		i, err := intValue(b, a)
		if err != nil {
			return nil, err
		}
		if bitLen(i) > 0 {
			// Quadratic: two 1 MB integers took 76 s.
			if err := ChargeWork(thread, "math.gcd", workSteps(gcdNanos(g.BitLen(), i.BigInt().BitLen()))); err != nil {
				return nil, err
			}
		}
		g.GCD(nil, nil, g, new(big.Int).Abs(i.BigInt()))
	}
	return starlark.MakeBigInt(g), nil
}

func mathLCM(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(kwargs) > 0 {
		return nil, fmt.Errorf("%s: unexpected keyword arguments", b.Name())
	}
	l := big.NewInt(1)
	for _, a := range args {
		i, err := intValue(b, a)
		if err != nil {
			return nil, err
		}
		x := new(big.Int).Abs(i.BigInt())
		if x.Sign() == 0 || l.Sign() == 0 {
			l.SetInt64(0)
			continue
		}
		if err := chargeIntBits(thread, "math.lcm", float64(l.BitLen()+x.BitLen())); err != nil {
			return nil, err
		}
		if l.BitLen() > 64 || x.BitLen() > 64 {
			ns := gcdNanos(l.BitLen(), x.BitLen()) + divNanos(x.BitLen(), 64) + mulNanos(l.BitLen(), x.BitLen())
			if err := ChargeWork(thread, "math.lcm", workSteps(ns)); err != nil {
				return nil, err
			}
		}
		g := new(big.Int).GCD(nil, nil, l, x)
		l.Mul(l, x.Quo(x, g))
	}
	return starlark.MakeBigInt(l), nil
}

func mathIsqrt(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var x starlark.Value
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &x); err != nil {
		return nil, err
	}
	i, err := intValue(b, x)
	if err != nil {
		return nil, err
	}
	if i.Sign() < 0 {
		return nil, fmt.Errorf("%s: isqrt() argument must be nonnegative", b.Name())
	}
	if bits := bitLen(i); bits > 0 {
		if err := ChargeWork(thread, "math.isqrt", workSteps(sqrtNanos(bits))); err != nil {
			return nil, err
		}
	}
	return starlark.MakeBigInt(new(big.Int).Sqrt(i.BigInt())), nil
}

// --- json -------------------------------------------------------------------------------------

// maxJSONDepth is the deepest nesting json encodes or decodes, like Python's recursion limit:
// deeper input would only grow the Go stack.
const maxJSONDepth = 1000

// maxJSONIntDigits is the longest integer literal json decodes, as Python's
// sys.int_max_str_digits: longer ones take quadratic time to convert.
const maxJSONIntDigits = 4300

// newJSONModule returns the json module: Python's dumps and loads, and go.starlark.net/lib/json's
// encode, decode, encode_indent and indent, each bounded in nesting depth and charged for the
// size of its result.
func newJSONModule() *starlarkstruct.Module {
	up := sjson.Module.Members
	encode := up["encode"].(*starlark.Builtin)
	decode := up["decode"].(*starlark.Builtin)
	indent := up["indent"].(*starlark.Builtin)
	m := &starlarkstruct.Module{Name: "json", Members: starlark.StringDict{
		"dumps": starlark.NewBuiltin("json.dumps", jsonDumps),
		"loads": starlark.NewBuiltin("json.loads", func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var s string
			if err := starlark.UnpackArgs(b.Name(), args, kwargs, "s", &s); err != nil {
				return nil, err
			}
			return jsonDecode(thread, b.Name(), decode, s, starlark.Tuple{starlark.String(s)}, nil)
		}),
		"decode": starlark.NewBuiltin("json.decode", func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var s string
			if len(args) > 0 {
				s, _ = starlark.AsString(args[0])
			}
			return jsonDecode(thread, b.Name(), decode, s, args, kwargs)
		}),
		"encode": starlark.NewBuiltin("json.encode", func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			if len(args) == 1 {
				if err := jsonWalk(thread, b.Name(), args[0]); err != nil {
					return nil, err
				}
			}
			return jsonEncode(thread, encode, args, kwargs)
		}),
		"indent": starlark.NewBuiltin("json.indent", func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			if err := chargeIndent(thread, b.Name(), args, kwargs); err != nil {
				return nil, err
			}
			return indent.CallInternal(thread, args, kwargs)
		}),
		"encode_indent": starlark.NewBuiltin("json.encode_indent", func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var x starlark.Value
			prefix, ind := "", "\t"
			if err := starlark.UnpackArgs(b.Name(), args, kwargs, "x", &x, "prefix?", &prefix, "indent?", &ind); err != nil {
				return nil, err
			}
			if err := jsonWalk(thread, b.Name(), x); err != nil {
				return nil, err
			}
			s, err := jsonEncode(thread, encode, starlark.Tuple{x}, nil)
			if err != nil {
				return nil, err
			}
			kw := []starlark.Tuple{{starlark.String("prefix"), starlark.String(prefix)}, {starlark.String("indent"), starlark.String(ind)}}
			if err := chargeIndent(thread, b.Name(), starlark.Tuple{s}, kw); err != nil {
				return nil, err
			}
			return indent.CallInternal(thread, starlark.Tuple{s}, kw)
		}),
	}}
	return m
}

// jsonEncode calls the upstream encoder and writes its floats as json.dumps does, in Python's
// text (see jsonFloatsAsPython).
func jsonEncode(thread *starlark.Thread, encode *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	v, err := encode.CallInternal(thread, args, kwargs)
	if err != nil {
		return nil, err
	}
	if s, ok := v.(starlark.String); ok {
		return starlark.String(jsonFloatsAsPython(string(s))), nil
	}
	return v, nil
}

// jsonDecode checks s (nesting depth, integer length), charges the values it will create, then
// calls the upstream decoder; errors name the calling builtin.
func jsonDecode(thread *starlark.Thread, name string, decode *starlark.Builtin, s string, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	est, err := scanJSON(s)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	if err := Charge(thread, name, est); err != nil {
		return nil, err
	}
	v, err := decode.CallInternal(thread, args, kwargs)
	if err != nil {
		return nil, errors.New(strings.Replace(err.Error(), "json.decode", name, 1))
	}
	return v, nil
}

// The memory of the values json.decode makes, in bytes, measured on go.starlark.net: every
// value takes a slot in its list or dict (with the slack of the slice growing), and an object
// is a whole hash table: "{}" costs about 300 times its 2 bytes of text, so a size charged by
// the text's length let ten million of them reach 3.4 GB.
const (
	jsonSlotBytes   = 32  // each value's slot in its container, growth included
	jsonObjectBytes = 576 // a *starlark.Dict and its first hash-table bucket
	jsonArrayBytes  = 48  // a *starlark.List
	jsonStringBytes = 16  // a string's header, beyond its bytes
	jsonNumberBytes = 16  // a boxed int or float
)

// scanJSON checks, in one linear pass, the nesting depth and the length of integer literals of
// a JSON text, so that the recursive decoder never meets input that would exhaust the stack or
// take quadratic time; and it estimates the memory of the values the decoder will make.
func scanJSON(s string) (int64, error) {
	depth, digits := 0, 0
	var est int64
	inNumber, inWord := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		numeric := c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
		if numeric && (inNumber || c >= '0' && c <= '9' || c == '-') && !inWord {
			if !inNumber {
				inNumber = true
				est += jsonSlotBytes + jsonNumberBytes
			}
			if c >= '0' && c <= '9' {
				digits++
				if digits > maxJSONIntDigits {
					return 0, fmt.Errorf("a number has more than %d digits (Python's limit for integer string conversion)", maxJSONIntDigits)
				}
			} else {
				digits = 0
			}
			continue
		}
		inNumber, digits = false, 0
		if c >= 'a' && c <= 'z' {
			if !inWord {
				inWord = true
				est += jsonSlotBytes // true, false and null are shared values
			}
			continue
		}
		inWord = false
		switch c {
		case '"':
			end := jsonStringEnd(s, i)
			est += jsonSlotBytes + jsonStringBytes + int64(end-i)
			i = end
		case '[', '{':
			depth++
			if depth > maxJSONDepth {
				return 0, fmt.Errorf("nesting deeper than %d levels (maximum recursion depth exceeded)", maxJSONDepth)
			}
			if c == '{' {
				est += jsonSlotBytes + jsonObjectBytes
			} else {
				est += jsonSlotBytes + jsonArrayBytes
			}
		case ']', '}':
			depth--
		}
	}
	return est, nil
}

// jsonStringEnd returns the index of the quote that closes the JSON string opening at s[i], or
// len(s) when the string is not closed. An escaped character, \" included, never closes it.
func jsonStringEnd(s string, i int) int {
	for i++; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return len(s)
}

// chargeIndent charges an upper bound of the size json.indent will produce.
func chargeIndent(thread *starlark.Thread, name string, args starlark.Tuple, kwargs []starlark.Tuple) error {
	var s, prefix, ind string
	ind = "\t"
	if err := starlark.UnpackArgs(name, args, kwargs, "str", &s, "prefix?", &prefix, "indent?", &ind); err != nil {
		return err
	}
	depth, size := int64(0), int64(len(s))
	line := func() int64 { return 1 + int64(len(prefix)) + depth*int64(len(ind)) }
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			i = jsonStringEnd(s, i)
		case '[', '{':
			depth++
			size += line()
		case ',':
			size += line()
		case ':':
			size++
		case ']', '}':
			depth--
			size += line()
		}
		if size > 1<<40 {
			break
		}
	}
	return newMeter(thread, name).settle(size)
}

// jsonWalk bounds the work of encoding v before the upstream encoder runs: nesting deeper than
// maxJSONDepth (which includes every cycle) is refused, and the output size, estimated from the
// values visited (shared values count each time they are reached, as the encoder writes them
// each time), is metered.
func jsonWalk(thread *starlark.Thread, name string, v starlark.Value) error {
	type item struct {
		v     starlark.Value
		depth int
	}
	stack := []item{{v, 1}}
	m := newMeter(thread, name)
	pc := pacer{thread: thread}
	var size int64
	var work float64 // of converting big integers to decimal, each time the text shows one
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if it.depth > maxJSONDepth {
			return fmt.Errorf("%s: nesting deeper than %d levels (or a cycle)", name, maxJSONDepth)
		}
		size += 2
		switch x := it.v.(type) {
		case starlark.String:
			size += int64(len(x))
		case starlark.Int:
			bits := bitLen(x)
			size += int64(bits/3 + 1)
			if bits > 0 {
				work += textNanos(bits)
			}
		case starlark.Float:
			size += 24
		case starlark.IterableMapping:
			for _, kv := range x.Items() {
				stack = append(stack, item{kv[0], it.depth + 1}, item{kv[1], it.depth + 1})
			}
		case starlark.Iterable:
			iter := x.Iterate()
			var e starlark.Value
			for iter.Next(&e) {
				stack = append(stack, item{e, it.depth + 1})
			}
			iter.Done()
		case starlark.HasAttrs:
			for _, name := range x.AttrNames() {
				if a, err := x.Attr(name); err == nil && a != nil {
					stack = append(stack, item{a, it.depth + 1})
				}
			}
		default:
			size += 8
		}
		if err := m.grow(size); err != nil {
			return err
		}
		if err := pc.step(); err != nil {
			return err
		}
	}
	if err := m.settle(size); err != nil {
		return err
	}
	if work > 0 {
		return ChargeWork(thread, name+" of big integers", workSteps(work))
	}
	return nil
}

// jsonDumps is Python's json.dumps(obj, *, indent=None, sort_keys=False, separators=None,
// ensure_ascii=True, allow_nan=True, default=None).
func jsonDumps(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var obj starlark.Value
	var indent, separators, deflt starlark.Value = starlark.None, starlark.None, starlark.None
	sortKeys, ensureASCII, allowNaN := false, true, true
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "obj", &obj, "indent?", &indent, "sort_keys?", &sortKeys,
		"separators?", &separators, "ensure_ascii?", &ensureASCII, "allow_nan?", &allowNaN, "default?", &deflt); err != nil {
		return nil, err
	}
	e := &jsonEncoder{thread: thread, sortKeys: sortKeys, ascii: ensureASCII, allowNaN: allowNaN,
		itemSep: ", ", keySep: ": ", meter: newMeter(thread, b.Name()), pacer: pacer{thread: thread},
		work: callWork{op: b.Name() + " of big integers"}}
	switch ind := indent.(type) {
	case starlark.NoneType:
	case starlark.Int:
		n := clipInt(ind)
		if n > 64 {
			return nil, fmt.Errorf("%s: indent %d is too large (at most 64)", b.Name(), n)
		}
		e.indent, e.hasIndent, e.itemSep = strings.Repeat(" ", int(max(n, 0))), true, ","
	case starlark.String:
		if len(ind) > 64 {
			return nil, fmt.Errorf("%s: indent string is too long (at most 64 bytes)", b.Name())
		}
		e.indent, e.hasIndent, e.itemSep = string(ind), true, ","
	default:
		return nil, fmt.Errorf("%s: indent must be None, an int or a str, not %s", b.Name(), pyType(indent))
	}
	if separators != starlark.None {
		t, ok := separators.(starlark.Tuple)
		var a, c starlark.String
		if ok && len(t) == 2 {
			a, ok = t[0].(starlark.String)
			if ok {
				c, ok = t[1].(starlark.String)
			}
		}
		if !ok || len(a) > 64 || len(c) > 64 {
			return nil, fmt.Errorf("%s: separators must be a pair of short strings, such as (\",\", \":\")", b.Name())
		}
		e.itemSep, e.keySep = string(a), string(c)
	}
	if deflt != starlark.None {
		fn, ok := deflt.(starlark.Callable)
		if !ok {
			return nil, fmt.Errorf("%s: default must be callable, not %s", b.Name(), pyType(deflt))
		}
		e.deflt = fn
	}
	if err := e.encode(obj, 0); err != nil {
		var me *MemoryError
		if errors.As(err, &me) {
			return nil, err
		}
		return nil, fmt.Errorf("%s: %v", b.Name(), err)
	}
	if err := e.meter.settle(int64(e.buf.Len())); err != nil {
		return nil, err
	}
	return starlark.String(e.buf.String()), nil
}

type jsonEncoder struct {
	thread          *starlark.Thread
	work            callWork
	buf             strings.Builder
	sortKeys, ascii bool
	allowNaN        bool
	indent          string
	hasIndent       bool
	itemSep, keySep string
	deflt           starlark.Callable
	meter           *meter
	pacer           pacer
	active          []starlark.Value // containers being encoded, for Python's cycle check
}

func (e *jsonEncoder) newline(depth int) {
	if !e.hasIndent {
		return
	}
	e.buf.WriteByte('\n')
	for range depth {
		e.buf.WriteString(e.indent)
	}
}

func (e *jsonEncoder) enter(v starlark.Value, depth int) error {
	if depth >= maxJSONDepth {
		return errors.New("maximum recursion depth exceeded while encoding a JSON object")
	}
	for _, a := range e.active {
		if a == v {
			return errors.New("Circular reference detected")
		}
	}
	e.active = append(e.active, v)
	return nil
}

func (e *jsonEncoder) leave() { e.active = e.active[:len(e.active)-1] }

func (e *jsonEncoder) encode(v starlark.Value, depth int) error {
	if err := e.meter.grow(int64(e.buf.Len())); err != nil {
		return err
	}
	if err := e.pacer.step(); err != nil {
		return err
	}
	switch x := v.(type) {
	case starlark.NoneType:
		e.buf.WriteString("null")
	case starlark.Bool:
		if x {
			e.buf.WriteString("true")
		} else {
			e.buf.WriteString("false")
		}
	case starlark.Int:
		if err := e.work.intText(e.thread, x); err != nil {
			return err
		}
		e.buf.WriteString(x.String())
	case starlark.Float:
		s, err := e.float(float64(x))
		if err != nil {
			return err
		}
		e.buf.WriteString(s)
	case starlark.String:
		e.str(string(x))
	case starlark.IterableMapping:
		return e.object(x, depth)
	case *starlark.List, starlark.Tuple:
		return e.array(x.(starlark.Iterable), depth)
	default:
		if it, ok := v.(starlark.Iterable); ok && (v.Type() == "list" || v.Type() == "tuple") {
			return e.array(it, depth)
		}
		if gv, ok := v.(GoValuer); ok {
			return e.encode(FromGo(gv.GoValue()), depth)
		}
		if e.deflt != nil {
			if err := e.enter(v, depth); err != nil {
				return err
			}
			r, err := starlark.Call(e.thread, e.deflt, starlark.Tuple{v}, nil)
			if err != nil {
				return err
			}
			err = e.encode(r, depth+1)
			e.leave()
			return err
		}
		return fmt.Errorf("Object of type %s is not JSON serializable", pyType(v))
	}
	return nil
}

func (e *jsonEncoder) float(f float64) (string, error) {
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		if !e.allowNaN {
			return "", errors.New("Out of range float values are not JSON compliant")
		}
		switch {
		case math.IsNaN(f):
			return "NaN", nil
		case f > 0:
			return "Infinity", nil
		}
		return "-Infinity", nil
	}
	return FloatRepr(f), nil
}

func (e *jsonEncoder) array(it starlark.Iterable, depth int) error {
	if err := e.enter(it, depth); err != nil {
		return err
	}
	defer e.leave()
	var elems []starlark.Value
	if s, ok := it.(starlark.Indexable); ok {
		elems = make([]starlark.Value, s.Len())
		for i := range elems {
			elems[i] = s.Index(i)
		}
	} else {
		iter := it.Iterate()
		var x starlark.Value
		for iter.Next(&x) {
			elems = append(elems, x)
		}
		iter.Done()
	}
	if len(elems) == 0 {
		e.buf.WriteString("[]")
		return nil
	}
	e.buf.WriteByte('[')
	for i, x := range elems {
		if i > 0 {
			e.buf.WriteString(e.itemSep)
		}
		e.newline(depth + 1)
		if err := e.encode(x, depth+1); err != nil {
			return err
		}
	}
	e.newline(depth)
	e.buf.WriteByte(']')
	return nil
}

func (e *jsonEncoder) object(m starlark.IterableMapping, depth int) error {
	if err := e.enter(m, depth); err != nil {
		return err
	}
	defer e.leave()
	items := m.Items()
	if e.sortKeys {
		var err error
		sort.SliceStable(items, func(i, j int) bool {
			lt, cerr := starlark.Compare(syntax.LT, items[i][0], items[j][0])
			if cerr != nil && err == nil {
				err = fmt.Errorf("'<' not supported between instances of '%s' and '%s'", pyType(items[i][0]), pyType(items[j][0]))
			}
			return lt
		})
		if err != nil {
			return err
		}
	}
	if len(items) == 0 {
		e.buf.WriteString("{}")
		return nil
	}
	e.buf.WriteByte('{')
	for i, kv := range items {
		var key string
		switch k := kv[0].(type) {
		case starlark.String:
			key = string(k)
		case starlark.Int:
			if err := e.work.intText(e.thread, k); err != nil {
				return err
			}
			key = k.String()
		case starlark.Float:
			s, err := e.float(float64(k))
			if err != nil {
				return err
			}
			key = s
		case starlark.Bool:
			key = "false"
			if k {
				key = "true"
			}
		case starlark.NoneType:
			key = "null"
		default:
			return fmt.Errorf("keys must be str, int, float, bool or None, not %s", pyType(kv[0]))
		}
		if i > 0 {
			e.buf.WriteString(e.itemSep)
		}
		e.newline(depth + 1)
		e.str(key)
		e.buf.WriteString(e.keySep)
		if err := e.encode(kv[1], depth+1); err != nil {
			return err
		}
	}
	e.newline(depth)
	e.buf.WriteByte('}')
	return nil
}

// str writes s as Python's json module does: \" \\ \n \r \t \b \f, other control characters as
// \u00XX, and with ensure_ascii every non-ASCII character as \uXXXX (surrogate pairs above
// U+FFFF).
func (e *jsonEncoder) str(s string) {
	const hex = "0123456789abcdef"
	u4 := func(r rune) {
		e.buf.WriteString(`\u`)
		for shift := 12; shift >= 0; shift -= 4 {
			e.buf.WriteByte(hex[(r>>shift)&0xf])
		}
	}
	e.buf.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			e.buf.WriteString(`\"`)
		case r == '\\':
			e.buf.WriteString(`\\`)
		case r == '\n':
			e.buf.WriteString(`\n`)
		case r == '\r':
			e.buf.WriteString(`\r`)
		case r == '\t':
			e.buf.WriteString(`\t`)
		case r == '\b':
			e.buf.WriteString(`\b`)
		case r == '\f':
			e.buf.WriteString(`\f`)
		case r < 0x20:
			u4(r)
		case r < utf8.RuneSelf || !e.ascii:
			e.buf.WriteRune(r)
		case r > 0xffff:
			r -= 0x10000
			u4(0xd800 + (r>>10)&0x3ff)
			u4(0xdc00 + r&0x3ff)
		default:
			u4(r)
		}
	}
	e.buf.WriteByte('"')
}
