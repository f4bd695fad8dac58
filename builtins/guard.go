package builtins

import (
	"fmt"
	"math"
	"strings"
	"unicode"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// GuardPrefix starts the name of every guard that GuardTree's rewrite of a program calls. Plans
// cannot name them: the checker rejects every identifier that starts with it.
const GuardPrefix = "_sp_"

// The names of the guards.
const (
	nameMul      = GuardPrefix + "mul"      // a * b
	nameAdd      = GuardPrefix + "add"      // a + b
	nameIAdd     = GuardPrefix + "iadd"     // a += b (extends a list in place, as Starlark does)
	nameIMul     = GuardPrefix + "imul"     // a *= b
	nameMod      = GuardPrefix + "mod"      // a % b (string formatting, or modulo)
	nameFloorDiv = GuardPrefix + "floordiv" // a // b (Python's floored quotient of floats)
	nameShl      = GuardPrefix + "shl"      // a << b
	nameMethod   = GuardPrefix + "method"   // x.name(...) for the methods in guardedMethods
	nameAttr     = GuardPrefix + "attr"     // x.name anywhere else, for the same methods
	nameAugIndex = GuardPrefix + "augindex" // a[k] += y, a[k] *= y with a or k not a plain name
)

// guardedMethods are the methods of strings and lists that are only ever called through a
// guard: each can make a result much larger than its receiver and arguments in one step.
var guardedMethods = map[string]bool{
	"join": true, "replace": true, "format": true,
	"split": true, "rsplit": true, "splitlines": true, "extend": true,
	"elems": true, "codepoints": true, "elem_ords": true, "codepoint_ords": true,
}

// elemBytes estimates the memory of one element of a list or tuple: an interface value.
const elemBytes = 16

// Guards returns the hidden guard builtins that GuardTree's rewrite calls, and guarded versions
// of the universal builtins that materialise an iterable (list, tuple, sorted, set, enumerate,
// zip, reversed), render text (str, repr, print, fail), parse integers (int) or look up methods
// (getattr). Each estimates the size of its result and its work, asks the run's budget (Charge,
// ChargeWork), then does exactly what the unguarded operation does, errors included.
func Guards() Registry {
	hidden := func(name string, fn func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error)) Helper {
		return Helper{Name: name, Group: GroupLanguage, Hidden: true, Value: starlark.NewBuiltin(name, fn)}
	}
	return Registry{
		hidden(nameMul, guardMul),
		hidden(nameAdd, guardAdd),
		hidden(nameIAdd, guardIAdd),
		hidden(nameIMul, guardMul),
		hidden(nameMod, guardMod),
		hidden(nameFloorDiv, guardFloorDiv),
		hidden(nameMethod, guardMethod),
		hidden(nameAugIndex, guardAugIndex),
		hidden(nameShl, guardShl),
		hidden(nameAttr, guardAttr),
		intConverter(),
		attrGetter(),
		materialiser("list", 1),
		materialiser("tuple", 1),
		materialiser("sorted", 2), // sorted copies, then sorts a second slice of the same size
		materialiser("set", 4),    // a hash table entry is several words
		materialiser("reversed", 1),
		materialiser("enumerate", 5), // a 2-tuple per element
		materialiser("zip", 0),       // sized from its arguments below
		stringifier("str"),
		stringifier("repr"),
		stringifier("print"),
		stringifier("fail"),
	}
}

// mulBytes returns a*b, saturating at MaxInt64 (and 0 for negative factors).
func mulBytes(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

// seqBytes estimates the memory of a string, bytes, list or tuple of n elements.
func seqBytes(v starlark.Value, n int64) (int64, bool) {
	switch v.(type) {
	case starlark.String, starlark.Bytes:
		return n, true
	case *starlark.List, starlark.Tuple:
		return mulBytes(n, elemBytes), true
	}
	return 0, false
}

func guardMul(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	x, y := args[0], args[1]
	if a, ok := x.(starlark.Int); ok {
		if b, ok := y.(starlark.Int); ok {
			if err := chargeIntProduct(thread, a, b); err != nil {
				return nil, err
			}
			return starlark.Binary(syntax.STAR, x, y)
		}
	}
	seq, count := x, y
	if _, ok := y.(starlark.Int); !ok {
		seq, count = y, x
	}
	if n, ok := count.(starlark.Int); ok {
		if k, ok := n.Int64(); ok {
			if per, ok := seqBytes(seq, int64(starlark.Len(seq))); ok {
				if err := Charge(thread, typedOp("repeating a ", seq), mulBytes(per, k)); err != nil {
					return nil, err
				}
			}
			if err := chargeSharedText(thread, typedOp("repeating a ", seq), seq, k); err != nil {
				return nil, err
			}
		}
	}
	return starlark.Binary(syntax.STAR, x, y)
}

// chargeIntProduct charges the size of a*b when either is a big integer: repeated squaring
// doubles an integer's size every step.
func chargeIntProduct(thread *starlark.Thread, a, b starlark.Int) error {
	_, smallA := a.Int64()
	_, smallB := b.Int64()
	if smallA && smallB {
		return nil
	}
	bitsA, bitsB := a.BigInt().BitLen(), b.BigInt().BitLen()
	bits := int64(bitsA) + int64(bitsB)
	if bits/8 > MaxIntResultBytes {
		return &MemoryError{Op: "multiplying integers", Bytes: bits / 8, Limit: MaxIntResultBytes, Rule: intCapRule}
	}
	if err := ChargeWork(thread, "multiplying integers", workSteps(mulNanos(bitsA, bitsB))); err != nil {
		return err
	}
	return Charge(thread, "multiplying integers", bits/8)
}

// guardShl is a << b: Starlark shifts by at most 511 bits at a time, but a loop of shifts
// grows an integer past MaxIntResultBytes, the size every other operation keeps to.
func guardShl(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
	x, y := args[0], args[1]
	if a, ok := x.(starlark.Int); ok {
		if n, ok := y.(starlark.Int); ok {
			if k, ok := n.Int64(); ok && k > 0 && k < 512 {
				bytes := (int64(bitLen(a)) + k) / 8
				if bytes > MaxIntResultBytes {
					return nil, &MemoryError{Op: "shifting an integer", Bytes: bytes, Limit: MaxIntResultBytes, Rule: intCapRule}
				}
				if err := Charge(thread, "shifting an integer", bytes); err != nil {
					return nil, err
				}
			}
		}
	}
	return starlark.Binary(syntax.LTLT, x, y)
}

// guardMod charges string formatting with %: the text can be as long as the format plus every
// argument's text (a format computed as "%s" * n can repeat one large argument n times).
func guardMod(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
	x, y := args[0], args[1]
	switch x := x.(type) {
	case starlark.String:
		floats, err := chargeFormat(thread, "% formatting", x, y)
		if err != nil {
			return nil, err
		}
		if floats {
			return interpolate(string(x), y)
		}
	case starlark.Float:
		if z, ok, err := floatBinary(syntax.PERCENT, x, y); ok {
			return z, err
		}
	case starlark.Int:
		if z, ok, err := floatBinary(syntax.PERCENT, x, y); ok {
			return z, err
		}
		if d, ok := y.(starlark.Int); ok && (bitLen(x) > 0 || bitLen(d) > 0) {
			if err := ChargeWork(thread, "integer %", workSteps(divNanos(x.BigInt().BitLen(), d.BigInt().BitLen()))); err != nil {
				return nil, err
			}
		}
	}
	return starlark.Binary(syntax.PERCENT, x, y)
}

// chargeFormat estimates the text of format with its replacement fields filled from values: at
// most every field holds the largest value's text. It reports whether a value holds a float
// (see measureText), for the caller to format it as Python would.
func chargeFormat(thread *starlark.Thread, op string, format starlark.String, values starlark.Value) (bool, error) {
	var largest int64
	var slowest float64
	var floats bool
	measure := func(v starlark.Value) error {
		n, work, fl, ok := measureText(v)
		if !ok {
			return fmt.Errorf("%s: value nested more than %d levels deep", op, MaxTextDepth)
		}
		largest, slowest = max(largest, n), max(slowest, work)
		floats = floats || fl
		return nil
	}
	if t, ok := values.(starlark.Tuple); ok {
		for _, v := range t {
			if err := measure(v); err != nil {
				return false, err
			}
		}
	} else if err := measure(values); err != nil {
		return false, err
	}
	fields := int64(strings.Count(string(format), "%") + strings.Count(string(format), "{"))
	if slowest > 0 {
		if err := ChargeWork(thread, op+" of a big integer", workSteps(float64(fields)*slowest)); err != nil {
			return false, err
		}
	}
	return floats, Charge(thread, op, appended(int64(len(format))+mulBytes(fields, largest)))
}

func guardAdd(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
	x, y := args[0], args[1]
	if err := chargeConcat(thread, x, y); err != nil {
		return nil, err
	}
	return starlark.Binary(syntax.PLUS, x, y)
}

func chargeConcat(thread *starlark.Thread, x, y starlark.Value) error {
	nx, okx := seqBytes(x, int64(starlark.Len(x)))
	ny, oky := seqBytes(y, int64(starlark.Len(y)))
	if !okx || !oky {
		return nil
	}
	if err := Charge(thread, typedOp("concatenating a ", x), nx+ny); err != nil {
		return err
	}
	if starlark.Len(x)+starlark.Len(y) < sharedTextMinLen {
		return nil
	}
	if err := chargeSharedText(thread, typedOp("concatenating a ", x), x, 1); err != nil {
		return err
	}
	return chargeSharedText(thread, typedOp("concatenating a ", y), y, 1)
}

// typedOp is verb ("repeating a ", "concatenating a ") followed by v's type. A guard names its
// operation on every call (an error would quote it); for the sequence types the name is a
// constant, so the common call allocates nothing.
func typedOp(verb string, v starlark.Value) string {
	repeat := verb == "repeating a "
	switch v.(type) {
	case starlark.String:
		if repeat {
			return "repeating a string"
		}
		return "concatenating a string"
	case *starlark.List:
		if repeat {
			return "repeating a list"
		}
		return "concatenating a list"
	case starlark.Tuple:
		if repeat {
			return "repeating a tuple"
		}
		return "concatenating a tuple"
	}
	return verb + v.Type()
}

// sharedTextMinLen is the length from which concatenated lists and tuples are also charged
// for their text: below it, the walk would cost more than it can prevent.
const sharedTextMinLen = 1024

// chargeSharedText charges k copies of the text of a list or tuple. Its memory is only k
// pointers per element, but every element may point to the same large value, and printing,
// hashing or an error message that quotes the result renders each copy: a list of 400
// references to a 1 MB string is 400 MB of text in one call that no limit interrupts. Plans
// never need such values, so they are refused where they are made.
func chargeSharedText(thread *starlark.Thread, op string, seq starlark.Value, k int64) error {
	switch seq.(type) {
	case *starlark.List, starlark.Tuple:
	default:
		return nil
	}
	n, work, ok := textSize(seq)
	if !ok {
		return fmt.Errorf("%s: value nested more than %d levels deep", op, MaxTextDepth)
	}
	if work > 0 {
		// Rendering each copy converts its big integers again.
		if err := ChargeWork(thread, op+" of big integers (as text)", workSteps(float64(k)*work)); err != nil {
			return err
		}
	}
	return Charge(thread, op+" (as text)", mulBytes(n, k))
}

func guardIAdd(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
	x, y := args[0], args[1]
	if list, ok := x.(*starlark.List); ok {
		if iter, ok := y.(starlark.Iterable); ok {
			if n := starlark.Len(y); n > 0 {
				if err := Charge(thread, "extending a list", mulBytes(int64(list.Len()+n), elemBytes)); err != nil {
					return nil, err
				}
			}
			extend, err := list.Attr("extend")
			if err != nil {
				return nil, err
			}
			if _, err := starlark.Call(thread, extend, starlark.Tuple{iter}, nil); err != nil {
				return nil, err
			}
			return list, nil
		}
	}
	if err := chargeConcat(thread, x, y); err != nil {
		return nil, err
	}
	return starlark.Binary(syntax.PLUS, x, y)
}

func getAttr(recv starlark.Value, name string) (starlark.Value, error) {
	if h, ok := recv.(starlark.HasAttrs); ok {
		v, err := h.Attr(name)
		if err != nil || v != nil {
			return v, err
		}
	}
	return nil, starlark.NoSuchAttrError(recv.Type() + " has no ." + name + " field or method")
}

// guardMethod calls recv.name(args..., kwargs...) for the methods in guardedMethods, after
// chargeMethod.
func guardMethod(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	recv, name, rest := args[0], string(args[1].(starlark.String)), args[2:]
	floats, err := chargeMethod(thread, recv, name, rest, kwargs)
	if err != nil {
		return nil, err
	}
	if floats {
		rest, kwargs = formatArgs(rest, kwargs)
	}
	m, err := getAttr(recv, name)
	if err != nil {
		return nil, err
	}
	if b, ok := m.(*starlark.Builtin); ok && isTextOrList(recv) {
		// The interpreter's own string and list methods need no frame of their own: an error
		// is reported at this call, as the method's would be.
		return b.CallInternal(thread, rest, kwargs)
	}
	return starlark.Call(thread, m, rest, kwargs)
}

// isTextOrList reports whether v is a string or a list, whose methods guardedMethods names.
func isTextOrList(v starlark.Value) bool {
	switch v.(type) {
	case starlark.String, *starlark.List:
		return true
	}
	return false
}

// guardAttr is recv.name where it is not called at once, for the names in guardedMethods: a
// string's or list's method comes back guarded (see guardBound).
func guardAttr(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
	v, err := getAttr(args[0], string(args[1].(starlark.String)))
	if err != nil {
		return nil, err
	}
	return guardBound(v), nil
}

// attrGetter wraps the universal getattr so that getattr(s, "replace") returns the guarded
// method, as s.replace does.
func attrGetter() Helper {
	orig := starlark.Universe["getattr"].(*starlark.Builtin)
	fn := func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		v, err := orig.CallInternal(thread, args, kwargs)
		if err != nil {
			return nil, err
		}
		return guardBound(v), nil
	}
	return Helper{Name: "getattr", Group: GroupLanguage, Hidden: true, Value: starlark.NewBuiltin("getattr", fn)}
}

// guardBound returns v, a value just looked up as an attribute, with the guard on it when it is
// one of guardedMethods bound to a string or a list: calling it charges the result (the
// unguarded j = sep.join; j(parts) reached 4.9 GB) and then calls the method itself, so its
// results and errors are the method's.
func guardBound(v starlark.Value) starlark.Value {
	m, ok := v.(*starlark.Builtin)
	if !ok || !guardedMethods[m.Name()] {
		return v
	}
	recv := m.Receiver()
	if !isTextOrList(recv) {
		return v
	}
	name := m.Name()
	return starlark.NewBuiltin(name, func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		floats, err := chargeMethod(thread, recv, name, args, kwargs)
		if err != nil {
			return nil, err
		}
		if floats {
			args, kwargs = formatArgs(args, kwargs)
		}
		return m.CallInternal(thread, args, kwargs)
	}).BindReceiver(recv)
}

// chargeMethod charges the estimated size of what recv.name(args..., kwargs...) returns, for
// the methods in guardedMethods. Receivers of other types (a module's or a table's methods that
// merely share a name) are not charged. For str.format it reports whether an argument holds a
// float, which formatArgs then makes render as in Python.
func chargeMethod(thread *starlark.Thread, recv starlark.Value, name string, args starlark.Tuple, kwargs []starlark.Tuple) (bool, error) {
	var est int64
	switch recv := recv.(type) {
	case starlark.String:
		est = stringMethodBytes(recv, name, args, kwargs)
	case *starlark.List:
		if name == "extend" && len(args) == 1 {
			if n := starlark.Len(args[0]); n > 0 {
				est = mulBytes(int64(recv.Len()+n), elemBytes)
			}
		}
	}
	if est >= CheckThreshold { // naming the operation costs a lookup; most calls are small
		if err := Charge(thread, methodOp(recv, name), est); err != nil {
			return false, err
		}
	}
	if format, ok := recv.(starlark.String); ok && name == "format" {
		values := args
		if len(kwargs) > 0 {
			values = append(starlark.Tuple{}, args...)
			for _, kv := range kwargs {
				values = append(values, kv[1])
			}
		}
		return chargeFormat(thread, "str.format", format, values)
	}
	return false, nil
}

// formatArgs returns the arguments of a str.format call with those that hold floats standing in
// as pyText: Starlark's str.format renders every non-string value by its String method.
func formatArgs(args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Tuple, []starlark.Tuple) {
	args = pyTexts(args)
	if len(kwargs) > 0 {
		kw := make([]starlark.Tuple, len(kwargs))
		for i, kv := range kwargs {
			kw[i] = starlark.Tuple{kv[0], asPyText(kv[1])}
		}
		kwargs = kw
	}
	return args, kwargs
}

// methodOps name the guarded methods of strings and lists as a MemoryError reports them
// ("string.join"), made once: every guarded call names its operation.
var methodOps = func() map[string]string {
	m := make(map[string]string, 2*len(guardedMethods))
	for name := range guardedMethods {
		m["string."+name] = "string." + name
		m["list."+name] = "list." + name
	}
	return m
}()

func methodOp(recv starlark.Value, name string) string {
	switch recv.(type) {
	case starlark.String:
		if op, ok := methodOps["string."+name]; ok { // the lookup's concatenation does not allocate
			return op
		}
	case *starlark.List:
		if op, ok := methodOps["list."+name]; ok {
			return op
		}
	}
	return recv.Type() + "." + name
}

// stringMethodBytes estimates the size of what a string method returns.
func stringMethodBytes(s starlark.String, name string, args starlark.Tuple, kwargs []starlark.Tuple) int64 {
	switch name {
	case "join":
		if len(args) != 1 {
			return 0
		}
		return appended(joinBytes(s, args[0]))
	case "replace":
		if len(args) < 2 {
			return 0
		}
		old, ok1 := args[0].(starlark.String)
		repl, ok2 := args[1].(starlark.String)
		if !ok1 || !ok2 || len(repl) <= len(old) {
			return 0
		}
		var occ int64
		if old == "" {
			occ = int64(len(s)) + 1
		} else {
			occ = int64(len(s) / len(old))
		}
		if est := int64(len(s)) + mulBytes(occ, int64(len(repl)-len(old))); est < CheckThreshold {
			return est
		}
		if old != "" {
			occ = int64(strings.Count(string(s), string(old)))
		}
		if len(args) == 3 {
			if c, ok := args[2].(starlark.Int); ok {
				if k, ok := c.Int64(); ok && k >= 0 && k < occ {
					occ = k
				}
			}
		}
		return int64(len(s)) + mulBytes(occ, int64(len(repl)-len(old)))
	case "elems", "codepoints":
		// A lazy view, but whatever materialises it makes a string per element, and the view
		// has no length for list() to size it by.
		return mulBytes(int64(len(s)), 3*elemBytes)
	case "elem_ords", "codepoint_ords":
		return mulBytes(int64(len(s)), elemBytes)
	case "split", "rsplit", "splitlines":
		// Each part costs a list slot and a string header on top of its bytes: splitting a
		// string of separators multiplies its size many times.
		const perPart = 48
		if int64(len(s))*perPart < CheckThreshold {
			return 0
		}
		parts := int64(strings.Count(string(s), "\n")) + 1
		if name != "splitlines" {
			sep := starlark.Value(starlark.None)
			if len(args) > 0 {
				sep = args[0]
			}
			for _, kv := range kwargs {
				if kv[0] == starlark.String("sep") {
					sep = kv[1]
				}
			}
			if str, ok := sep.(starlark.String); ok && str != "" {
				parts = int64(strings.Count(string(s), string(str))) + 1
			} else {
				parts = countFields(string(s)) + 1
			}
		}
		return int64(len(s)) + mulBytes(parts, perPart)
	}
	return 0
}

// countFields is len(strings.Fields(s)) without making the fields: the guard of split must not
// allocate what it guards (a string of 8 M words made a 128 MiB slice before the refusal).
func countFields(s string) int64 {
	var n int64
	in := false
	for _, r := range s {
		if unicode.IsSpace(r) {
			in = false
		} else if !in {
			in = true
			n++
		}
	}
	return n
}

// joinBytes estimates sep.join(xs): every element's length plus a separator between each.
func joinBytes(sep starlark.String, xs starlark.Value) int64 {
	n := starlark.Len(xs)
	if n <= 0 {
		return 0
	}
	total := mulBytes(int64(n), int64(len(sep)))
	iter := starlark.Iterate(xs)
	if iter == nil {
		return total
	}
	defer iter.Done()
	var x starlark.Value
	for iter.Next(&x) && total < math.MaxInt64/2 {
		if s, ok := x.(starlark.String); ok {
			total += int64(len(s))
		}
	}
	return total
}

// guardAugIndex does a[k] op= y (op "+", "*", "%" or "//") for targets whose parts are not plain names,
// evaluating a and k once, as the statement does, and guarding the operation.
func guardAugIndex(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
	container, key, op, y := args[0], args[1], string(args[2].(starlark.String)), args[3]
	cur, err := getIndex(container, key)
	if err != nil {
		return nil, err
	}
	var z starlark.Value
	switch op {
	case "+":
		z, err = guardIAdd(thread, nil, starlark.Tuple{cur, y}, nil)
	case "*":
		z, err = guardMul(thread, nil, starlark.Tuple{cur, y}, nil)
	case "%":
		z, err = guardMod(thread, nil, starlark.Tuple{cur, y}, nil)
	default: // "//"
		z, err = guardFloorDiv(thread, nil, starlark.Tuple{cur, y}, nil)
	}
	if err != nil {
		return nil, err
	}
	return starlark.None, setIndex(container, key, z)
}

// getIndex is x[y] with go.starlark.net's semantics and messages (its own is unexported).
func getIndex(x, y starlark.Value) (starlark.Value, error) {
	switch x := x.(type) {
	case starlark.Mapping:
		z, found, err := x.Get(y)
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, fmt.Errorf("key %v not in %s", y, x.Type())
		}
		return z, nil
	case starlark.Indexable:
		i, err := index(x, y)
		if err != nil {
			return nil, err
		}
		return x.Index(i), nil
	}
	return nil, fmt.Errorf("unhandled index operation %s[%s]", x.Type(), y.Type())
}

// setIndex is x[y] = z with go.starlark.net's semantics and messages.
func setIndex(x, y, z starlark.Value) error {
	switch x := x.(type) {
	case starlark.HasSetKey:
		return x.SetKey(y, z)
	case starlark.HasSetIndex:
		i, err := index(x, y)
		if err != nil {
			return err
		}
		return x.SetIndex(i, z)
	}
	return fmt.Errorf("%s value does not support item assignment", x.Type())
}

func index(x starlark.Indexable, y starlark.Value) (int, error) {
	n := x.Len()
	i, err := starlark.AsInt32(y)
	if err != nil {
		return 0, fmt.Errorf("%s index: %s", x.Type(), err)
	}
	orig := i
	if i < 0 {
		i += n
	}
	if i < 0 || i >= n {
		return 0, fmt.Errorf("index %d out of range [%d:%d]", orig, -n, n-1)
	}
	return i, nil
}

// materialiser wraps the universal builtin name, charging perElem interface slots for each
// element of its first argument (for zip: a tuple per shortest-argument element).
func materialiser(name string, perElem int64) Helper {
	orig := starlark.Universe[name].(*starlark.Builtin)
	fn := func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var est int64
		switch {
		case name == "zip" && len(args) > 0:
			shortest := int64(math.MaxInt64)
			for _, a := range args {
				if n := starlark.Len(a); n >= 0 && int64(n) < shortest {
					shortest = int64(n)
				}
			}
			if shortest != math.MaxInt64 {
				est = mulBytes(shortest, int64(len(args)+3)*elemBytes)
			}
		case len(args) > 0:
			if n := starlark.Len(args[0]); n > 0 {
				per := perElem * elemBytes
				if strings.HasPrefix(args[0].Type(), "string.") {
					per += 2 * elemBytes // elems() and codepoints() make a new string per element
				}
				est = mulBytes(int64(n), per)
			}
		}
		if err := Charge(thread, name+"()", est); err != nil {
			return nil, err
		}
		return orig.CallInternal(thread, args, kwargs)
	}
	return Helper{Name: name, Group: GroupLanguage, Hidden: true, Value: starlark.NewBuiltin(name, fn)}
}

// stringifier wraps the universal builtin name (str, repr, print), charging the estimated length
// of the text it would build: str() of a list that repeats a large string many times is one
// step that can make gigabytes.
func stringifier(name string) Helper {
	orig := starlark.Universe[name].(*starlark.Builtin)
	fn := func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var est int64
		var work float64
		var texts starlark.Tuple // args, with those holding floats as pyText; nil if none does
		for i, a := range args {
			n, w, floats, ok := measureText(a)
			if !ok {
				return nil, fmt.Errorf("%s: value nested more than %d levels deep", name, MaxTextDepth)
			}
			est += n
			work += w
			if floats {
				if texts == nil {
					texts = append(starlark.Tuple(nil), args...)
				}
				texts[i] = pyText{a}
			}
		}
		for _, kv := range kwargs {
			if kv[0] == starlark.String("sep") && len(args) > 1 {
				n, _, _ := textSize(kv[1])
				est += mulBytes(n, int64(len(args)-1))
			}
		}
		if work > 0 {
			if err := ChargeWork(thread, name+"() of a big integer", workSteps(work)); err != nil {
				return nil, err
			}
		}
		if err := Charge(thread, name+"()", appended(est)); err != nil {
			return nil, err
		}
		if texts != nil {
			// Floats print as in Python (see Repr), whatever holds them.
			if (name == "str" || name == "repr") && len(args) == 1 && len(kwargs) == 0 {
				return starlark.String(Repr(args[0])), nil
			}
			args = texts
		}
		return orig.CallInternal(thread, args, kwargs)
	}
	return Helper{Name: name, Group: GroupLanguage, Hidden: true, Value: starlark.NewBuiltin(name, fn)}
}

// appended is the memory of building n bytes of text by appending to a strings.Builder whose
// final size is not known in advance, as go.starlark.net's str, repr, print, str.join and %
// formatting do: the buffer grows by copying, and the old and the new buffer are live together,
// about twice n at the peak (print of 190 MB of separators under a 256 MiB budget reached
// 772 MB of RSS when only n was charged).
func appended(n int64) int64 { return mulBytes(n, 2) }

// MaxTextDepth is the deepest nesting str, repr and print accept: Starlark renders nested values
// recursively in Go, and a value nested a million levels deep would exhaust the stack, which
// no recover can catch.
const MaxTextDepth = 1000

// textSize estimates the length of v's text form without building it, and the work, in
// nanoseconds, of converting the big integers in it to decimal (each time the text would show
// them); it reports false when v is nested deeper than MaxTextDepth. Containers are measured
// once each (a list holding the same sub-list twice costs one walk of it, however large the
// text would be), and a container met again while it is being measured is a cycle, which
// Starlark prints as "[...]".
func textSize(v starlark.Value) (int64, float64, bool) {
	n, work, _, ok := measureText(v)
	return n, work, ok
}

// measureText is textSize, and also reports whether v holds a float (in a list, tuple, dict or
// set), which go.starlark.net would render differently from Python (see Repr).
func measureText(v starlark.Value) (int64, float64, bool, bool) {
	if _, ok := v.(starlark.Float); ok {
		return 24, 0, true, true
	}
	deep, floats := false, false
	type cost struct {
		n    int64
		work float64
	}
	var seen map[any]cost // made on the first container: str(5) allocates nothing
	var work float64      // of the value being measured, added to its container's
	var size func(v starlark.Value, depth int) int64
	size = func(v starlark.Value, depth int) int64 {
		if depth > MaxTextDepth {
			deep = true
			return 5
		}
		var key any
		var elems []starlark.Value
		switch v := v.(type) {
		case starlark.String:
			return int64(len(v)) + 2
		case starlark.Bytes:
			return int64(len(v))*4 + 3
		case starlark.Int:
			bits := bitLen(v)
			if bits == 0 {
				return 20
			}
			work += textNanos(bits)
			return int64(bits)/3 + 1
		case starlark.Float:
			floats = true
			return 24
		case starlark.Bool, starlark.NoneType:
			return 24
		case *starlark.List:
			key = v
			elems = make([]starlark.Value, v.Len())
			for i := range elems {
				elems[i] = v.Index(i)
			}
		case starlark.Tuple:
			if len(v) == 0 {
				return 2
			}
			key, elems = &v[0], v
		case *starlark.Dict:
			key = v
			for _, kv := range v.Items() {
				elems = append(elems, kv[0], kv[1])
			}
		case *starlark.Set:
			key = v
			iter := v.Iterate()
			var x starlark.Value
			for iter.Next(&x) {
				elems = append(elems, x)
			}
			iter.Done()
		default:
			if _, ok := v.(starlark.Mapping); ok {
				floats = true // a row: "%(price)s" % row may take a float from it
			}
			return 64
		}
		if seen == nil {
			seen = map[any]cost{}
		}
		if c, ok := seen[key]; ok {
			if c.n < 0 {
				return 5 // a cycle: "[...]"
			}
			work += c.work
			return c.n
		}
		seen[key] = cost{n: -1}
		outer := work
		work = 0
		total := int64(2)
		for _, e := range elems {
			total += size(e, depth+1) + 2
			if total > math.MaxInt64/4 {
				break
			}
		}
		seen[key] = cost{total, work}
		work += outer
		return total
	}
	n := size(v, 0)
	return n, work, floats, !deep
}

// intConverter wraps the universal int. Converting a string of digits in a base that is not a
// power of two takes time that grows with the square of its length (int("9" * 4_000_000) took
// 43 s in one step), so such a string may have at most MaxIntStrDigits digits, as in CPython;
// in a power-of-two base the conversion is linear and the result is held to MaxIntResultBytes.
// The conversion's work is charged (see ChargeWork).
func intConverter() Helper {
	orig := starlark.Universe["int"].(*starlark.Builtin)
	fn := func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		if len(args) > 0 {
			if s, ok := args[0].(starlark.String); ok {
				var base starlark.Value = starlark.MakeInt(10)
				if len(args) > 1 {
					base = args[1]
				}
				for _, kv := range kwargs {
					if kv[0] == starlark.String("base") {
						base = kv[1]
					}
				}
				if err := checkIntString(thread, string(s), base); err != nil {
					return nil, err
				}
			}
		}
		return orig.CallInternal(thread, args, kwargs)
	}
	return Helper{Name: "int", Group: GroupLanguage, Hidden: true, Value: starlark.NewBuiltin("int", fn)}
}

// checkIntString bounds int(s, base) before the conversion. A base that is not a small int is
// left to int's own error.
func checkIntString(thread *starlark.Thread, s string, baseValue starlark.Value) error {
	b, ok := baseValue.(starlark.Int)
	if !ok {
		return nil
	}
	base, ok := b.Int64()
	if !ok {
		return nil
	}
	s = strings.TrimLeft(s, "+-")
	if len(s) > 2 && s[0] == '0' {
		prefixBase := map[byte]int64{'x': 16, 'X': 16, 'o': 8, 'O': 8, 'b': 2, 'B': 2}[s[1]]
		if prefixBase != 0 && (base == 0 || base == prefixBase) {
			base, s = prefixBase, s[2:]
		}
	}
	if base == 0 {
		base = 10
	}
	if base < 2 || base > 36 {
		return nil
	}
	digits := 0
	for i := 0; i < len(s); i++ {
		if c := s[i] | 0x20; c >= '0' && c <= '9' || c >= 'a' && c <= 'z' {
			digits++
		}
	}
	bits := int(float64(digits)*math.Log2(float64(base))) + 1
	if base&(base-1) == 0 {
		if bytes := int64(bits / 8); bytes > MaxIntResultBytes {
			return &MemoryError{Op: "int()", Bytes: bytes, Limit: MaxIntResultBytes, Rule: intCapRule}
		}
		return nil
	}
	if digits > MaxIntStrDigits {
		return fmt.Errorf("int: the string has %d digits, more than the %d a base-%d conversion allows (as Python's int_max_str_digits): convert only the digits you need, for example int(s[:18])",
			digits, MaxIntStrDigits, base)
	}
	if bits <= 64 {
		return nil
	}
	return ChargeWork(thread, "int()", workSteps(parseNanos(bits)))
}
