package sandbox

import (
	"reflect"
	"unsafe"

	"go.starlark.net/starlark"
)

// The reachable-size estimate: what a run's values hold, for the watchdog to tell a run that
// holds memory from its neighbours when the heap is shared (see watchdog). The costs are those
// of go.starlark.net's representations on a 64-bit platform, rounded up: an interface slot is
// 16 bytes, a string or a slice header 16 to 24, a hash table entry about 64 with its key and
// value slots. They are an estimate of what the values keep alive, not of what allocating them
// cost: garbage, the interpreter's operand stack and the Go memory behind values the walk cannot
// see into are not counted.
const (
	slotBytes     = 16  // one interface slot: a list, tuple or free-variable element
	headerBytes   = 32  // a string, bytes or slice header with its boxing
	containerCost = 64  // a list, dict, set or function object
	entryBytes    = 64  // one entry of a dict or set, besides its key and value
	opaqueBytes   = 64  // a value the walk does not look into
	smallString   = 256 // strings shorter than this are counted where they are met, not shared
	// maxWalkNodes bounds the work of one walk: a run that holds more values than this is
	// reported as holding at least what the walk counted so far.
	maxWalkNodes = 1 << 22
)

// reach walks values and adds up an estimate of the bytes they hold. It must run on the
// goroutine of the thread whose values it walks. Values reached twice (shared lists, dicts,
// large strings) are counted once; values in skip (the environment's frozen predeclared values)
// are not counted at all.
type reach struct {
	skip    map[any]struct{}
	seen    map[any]struct{}
	modules map[*starlark.Module]struct{}
	bytes   int64
	nodes   int
	stopAt  int64 // stop walking once bytes passes this; 0: never
	partial bool  // the walk stopped early: bytes is a lower bound
}

func newReach(skip map[any]struct{}, stopAt int64) *reach {
	return &reach{skip: skip, seen: map[any]struct{}{}, modules: map[*starlark.Module]struct{}{}, stopAt: stopAt}
}

// done reports whether the walk should stop.
func (r *reach) done() bool {
	if r.partial {
		return true
	}
	if r.nodes >= maxWalkNodes || (r.stopAt > 0 && r.bytes > r.stopAt) {
		r.partial = true
	}
	return r.partial
}

// first reports whether the reference key is met for the first time and is not shared with
// every run.
func (r *reach) first(key any) bool {
	if _, ok := r.skip[key]; ok {
		return false
	}
	if _, ok := r.seen[key]; ok {
		return false
	}
	r.seen[key] = struct{}{}
	return true
}

// thread walks every value reachable from the frames of thread: each frame's locals and, for
// Starlark functions, the globals of their module.
func (r *reach) thread(thread *starlark.Thread) {
	for depth := 0; depth < thread.CallStackDepth() && !r.done(); depth++ {
		fr := thread.DebugFrame(depth)
		fn, ok := fr.Callable().(*starlark.Function)
		if !ok {
			continue
		}
		r.function(fn)
		for i := 0; i < fr.NumLocals(); i++ {
			_, v := fr.Local(i)
			r.value(v)
		}
	}
}

// function counts a function's defaults, free variables and its module's globals.
func (r *reach) function(fn *starlark.Function) {
	if m := fn.Module(); m != nil {
		if _, ok := r.modules[m]; !ok {
			r.modules[m] = struct{}{}
			for _, v := range m.Globals() {
				r.value(v)
			}
		}
	}
	for i := 0; i < fn.NumParams(); i++ {
		r.value(fn.ParamDefault(i))
	}
	for i := 0; i < fn.NumFreeVars(); i++ {
		_, v := fn.FreeVar(i)
		r.value(v)
	}
}

// value adds the bytes v holds, with everything it refers to.
func (r *reach) value(v starlark.Value) {
	if v == nil || r.done() {
		return
	}
	r.nodes++
	switch v := v.(type) {
	case starlark.NoneType, starlark.Bool:
	case starlark.Int:
		if _, ok := v.Int64(); !ok { // a small int is held in its interface slot
			r.bytes += headerBytes + int64(v.BigInt().BitLen()+7)/8
		}
	case starlark.Float:
		r.bytes += 8
	case starlark.String:
		r.text(string(v))
	case starlark.Bytes:
		r.text(string(v))
	case *starlark.List:
		if !r.first(v) {
			return
		}
		r.bytes += containerCost + int64(v.Len())*slotBytes
		for e := range v.Elements() {
			if r.done() {
				return
			}
			r.value(e)
		}
	case starlark.Tuple:
		if len(v) == 0 || !r.first(&v[0]) {
			return
		}
		r.bytes += headerBytes + int64(len(v))*slotBytes
		for _, e := range v {
			r.value(e)
		}
	case *starlark.Dict:
		if !r.first(v) {
			return
		}
		r.bytes += containerCost + int64(v.Len())*entryBytes
		for k, e := range v.Entries() {
			if r.done() {
				return
			}
			r.value(k)
			r.value(e)
		}
	case *starlark.Set:
		if !r.first(v) {
			return
		}
		r.bytes += containerCost + int64(v.Len())*entryBytes
		for e := range v.Elements() {
			if r.done() {
				return
			}
			r.value(e)
		}
	case *starlark.Function:
		if !r.first(v) {
			return
		}
		r.bytes += containerCost
		r.function(v)
	default:
		if reflect.TypeOf(v).Kind() == reflect.Pointer && !r.first(v) {
			return
		}
		r.bytes += opaqueBytes
	}
}

// text counts a string's bytes; a long one once however many values share it.
func (r *reach) text(s string) {
	if len(s) >= smallString && !r.first(unsafe.StringData(s)) {
		r.bytes += headerBytes // another reference to text already counted
		return
	}
	r.bytes += headerBytes + int64(len(s))
}

// sharedValues returns the identities of every reference reachable from the environment's
// predeclared values: they are frozen, made once and shared by every run, so no run is charged
// for them.
func sharedValues(predeclared starlark.StringDict) map[any]struct{} {
	r := newReach(nil, 0)
	for _, v := range predeclared {
		r.value(v)
		if r.partial {
			break
		}
	}
	return r.seen
}
