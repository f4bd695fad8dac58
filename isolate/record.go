package isolate

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/starplan/starplan/sandbox"
)

// The records of the protocol (ready, runMsg with its sandbox.Request, done with its
// sandbox.Result) are written by one encoder: their fields in declared order, each by its Go
// kind, so a field added to any of them (or to a diagnostic, a rewrite, the limits) crosses to
// the worker and back without an edit here, and a field of a kind that cannot cross stops every
// program that imports this package at its start (recordCodec panics), never silently drops.
// The table calls and their answers, whose shape depends on the operation and which carry rows,
// keep their own writers (protocol.go).
//
//	bool                1 byte
//	signed integers     zigzag varint (time.Duration too)
//	unsigned integers   uvarint
//	floats              8 bytes, IEEE 754, little-endian
//	strings             uvarint length, bytes
//	slices              uvarint length+1 (0: nil), elements
//	pointers            1 byte (0: nil), the value
//	string-keyed maps   uvarint length+1 (0: nil), key and value pairs in key order
//	time.Time           varint Unix seconds, varint nanoseconds, zone name, varint offset
//	any, map[string]any a tagged value (see value)
//	structs             their fields, less those notSent names
//
// A record is encoded from, and decoded into, the memory of a value of its type (its address):
// decoding fills a zero value.

// notSent names the fields of a record that do not cross, each with its reason.
var notSent = map[reflect.Type]map[string]string{
	reflect.TypeFor[sandbox.Request](): {
		"View":    "the pool serves every table call from it; the worker gets a remote view of it",
		"Helpers": "it travels with the schemas (runMsg.Schemas), once per worker",
	},
}

// codec writes and reads values of one type, at their address: the codecs of a record are
// built once, from its type, and then work on its memory (field offsets, element sizes) without
// reflect.Value, whose every step cost more than the byte it writes.
type codec struct {
	enc func(e *encoder, p unsafe.Pointer) error
	dec func(d *decoder, p unsafe.Pointer) // *p is the zero value of its type
	// min is the fewest bytes a value takes on the wire (at least 1), which bounds how many
	// elements a slice's length may claim in what is left of a frame.
	min int
}

// recordCodec returns the codec of T. It panics when a field of T cannot cross.
func recordCodec[T any]() codec { return codecOf(reflect.TypeFor[T](), reflect.TypeFor[T]().String()) }

var (
	timeType = reflect.TypeFor[time.Time]()
	anyType  = reflect.TypeFor[any]()
	mapType  = reflect.TypeFor[map[string]any]()
)

func codecOf(t reflect.Type, path string) codec {
	c := kindCodec(t, path)
	c.min = max(c.min, 1) // a bool, a varint, a length, a tag, a presence byte
	return c
}

// zeroArray is what an empty slice decoded points at (as reflect.MakeSlice's do, at the
// runtime's own zero base).
var zeroArray [0]byte

// sliceHeader is the memory of a slice.
type sliceHeader struct {
	data     unsafe.Pointer
	len, cap int
}

func kindCodec(t reflect.Type, path string) codec {
	switch {
	case t == timeType:
		return codec{
			enc: func(e *encoder, p unsafe.Pointer) error {
				tm := (*time.Time)(p)
				e.varint(tm.Unix())
				e.varint(int64(tm.Nanosecond()))
				name, offset := tm.Zone()
				e.string(name)
				e.varint(int64(offset))
				return nil
			},
			min: 4,
			dec: func(d *decoder, p unsafe.Pointer) {
				sec, nsec := d.varint(), d.varint()
				zone, offset := d.string(), d.varint()
				*(*time.Time)(p) = time.Unix(sec, nsec).In(fixedZone(zone, int(offset)))
			},
		}
	case t == anyType:
		return codec{
			enc: func(e *encoder, p unsafe.Pointer) error { return e.value(*(*any)(p)) },
			dec: func(d *decoder, p unsafe.Pointer) { *(*any)(p) = d.value() },
		}
	case t == mapType:
		return codec{
			enc: func(e *encoder, p unsafe.Pointer) error {
				m := *(*map[string]any)(p)
				if m == nil {
					e.byte(tagNil)
					return nil
				}
				return e.row(m)
			},
			dec: func(d *decoder, p unsafe.Pointer) {
				if m, ok := d.value().(map[string]any); ok {
					*(*map[string]any)(p) = m
				}
			},
		}
	}
	switch t.Kind() {
	case reflect.Bool:
		return codec{
			enc: func(e *encoder, p unsafe.Pointer) error { e.bool(*(*bool)(p)); return nil },
			dec: func(d *decoder, p unsafe.Pointer) { *(*bool)(p) = d.bool() },
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return intCodec(t.Size())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return uintCodec(t.Size())
	case reflect.Float32:
		return codec{
			enc: func(e *encoder, p unsafe.Pointer) error {
				e.buf = binary.LittleEndian.AppendUint64(e.buf, math.Float64bits(float64(*(*float32)(p))))
				return nil
			},
			dec: func(d *decoder, p unsafe.Pointer) { *(*float32)(p) = float32(math.Float64frombits(d.fixed64())) },
			min: 8,
		}
	case reflect.Float64:
		return codec{
			enc: func(e *encoder, p unsafe.Pointer) error {
				e.buf = binary.LittleEndian.AppendUint64(e.buf, math.Float64bits(*(*float64)(p)))
				return nil
			},
			dec: func(d *decoder, p unsafe.Pointer) { *(*float64)(p) = math.Float64frombits(d.fixed64()) },
			min: 8,
		}
	case reflect.String:
		return codec{
			enc: func(e *encoder, p unsafe.Pointer) error { e.string(*(*string)(p)); return nil },
			dec: func(d *decoder, p unsafe.Pointer) { *(*string)(p) = d.string() },
		}
	case reflect.Slice:
		elem, size := codecOf(t.Elem(), path+"[]"), t.Elem().Size()
		return codec{
			enc: func(e *encoder, p unsafe.Pointer) error {
				h := (*sliceHeader)(p)
				if h.data == nil {
					e.uvarint(0)
					return nil
				}
				e.uvarint(uint64(h.len) + 1)
				for i := range h.len {
					if err := elem.enc(e, unsafe.Add(h.data, uintptr(i)*size)); err != nil {
						return err
					}
				}
				return nil
			},
			dec: func(d *decoder, p unsafe.Pointer) {
				n := d.length(elem.min)
				if n < 0 {
					return
				}
				// A new array of the element type, so that the collector knows what it holds;
				// an empty slice is not nil.
				if n == 0 {
					*(*sliceHeader)(p) = sliceHeader{data: unsafe.Pointer(&zeroArray)}
					return
				}
				v := reflect.NewAt(t, p).Elem()
				v.Grow(n)
				v.SetLen(n)
				data := (*sliceHeader)(p).data
				for i := range n {
					elem.dec(d, unsafe.Add(data, uintptr(i)*size))
				}
			},
		}
	case reflect.Map:
		// A string-keyed map: its length plus one (0 for nil), then each key and value, keys
		// sorted so that one map always encodes alike. (Only rare fields have such maps: they
		// keep reflect.Value.)
		if t.Key().Kind() != reflect.String {
			break
		}
		key, elem := codecOf(t.Key(), path+"{key}"), codecOf(t.Elem(), path+"{}")
		return codec{
			enc: func(e *encoder, p unsafe.Pointer) error {
				v := reflect.NewAt(t, p).Elem()
				if v.IsNil() {
					e.uvarint(0)
					return nil
				}
				e.uvarint(uint64(v.Len()) + 1)
				keys := v.MapKeys()
				slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
				for _, k := range keys {
					x := reflect.New(t.Elem()).Elem()
					x.Set(v.MapIndex(k))
					kk := reflect.New(t.Key()).Elem()
					kk.Set(k)
					if err := key.enc(e, kk.Addr().UnsafePointer()); err != nil {
						return err
					}
					if err := elem.enc(e, x.Addr().UnsafePointer()); err != nil {
						return err
					}
				}
				return nil
			},
			dec: func(d *decoder, p unsafe.Pointer) {
				n := d.length(key.min + elem.min)
				if n < 0 {
					return
				}
				m := reflect.MakeMapWithSize(t, n)
				for range n {
					k, x := reflect.New(t.Key()), reflect.New(t.Elem())
					key.dec(d, k.UnsafePointer())
					elem.dec(d, x.UnsafePointer())
					m.SetMapIndex(k.Elem(), x.Elem())
				}
				reflect.NewAt(t, p).Elem().Set(m)
			},
		}
	case reflect.Pointer:
		elem := codecOf(t.Elem(), path)
		return codec{
			enc: func(e *encoder, p unsafe.Pointer) error {
				q := *(*unsafe.Pointer)(p)
				e.bool(q != nil)
				if q == nil {
					return nil
				}
				return elem.enc(e, q)
			},
			dec: func(d *decoder, p unsafe.Pointer) {
				if !d.bool() {
					return
				}
				q := reflect.New(t.Elem()).UnsafePointer()
				elem.dec(d, q)
				*(*unsafe.Pointer)(p) = q
			},
		}
	case reflect.Struct:
		type field struct {
			offset uintptr
			codec
		}
		var fields []field
		for i := range t.NumField() {
			f := t.Field(i)
			if _, skip := notSent[t][f.Name]; skip {
				continue
			}
			if !f.IsExported() {
				panic(fmt.Sprintf("isolate: %s.%s is unexported: a record's fields must all cross to the worker (or be listed in notSent)", path, f.Name))
			}
			fields = append(fields, field{f.Offset, codecOf(f.Type, path+"."+f.Name)})
		}
		size := 0
		for _, f := range fields {
			size += f.min
		}
		return codec{
			min: size,
			enc: func(e *encoder, p unsafe.Pointer) error {
				for _, f := range fields {
					if err := f.enc(e, unsafe.Add(p, f.offset)); err != nil {
						return err
					}
				}
				return nil
			},
			dec: func(d *decoder, p unsafe.Pointer) {
				for _, f := range fields {
					f.dec(d, unsafe.Add(p, f.offset))
				}
			},
		}
	}
	panic(fmt.Sprintf("isolate: %s of type %s cannot cross to the worker: give its kind a wire form in record.go, or list the field in notSent", path, t))
}

// intCodec is the codec of a signed integer of size bytes: a zigzag varint.
func intCodec(size uintptr) codec {
	var get func(unsafe.Pointer) int64
	var set func(unsafe.Pointer, int64)
	switch size {
	case 1:
		get, set = func(p unsafe.Pointer) int64 { return int64(*(*int8)(p)) }, func(p unsafe.Pointer, x int64) { *(*int8)(p) = int8(x) }
	case 2:
		get, set = func(p unsafe.Pointer) int64 { return int64(*(*int16)(p)) }, func(p unsafe.Pointer, x int64) { *(*int16)(p) = int16(x) }
	case 4:
		get, set = func(p unsafe.Pointer) int64 { return int64(*(*int32)(p)) }, func(p unsafe.Pointer, x int64) { *(*int32)(p) = int32(x) }
	default:
		return codec{
			enc: func(e *encoder, p unsafe.Pointer) error { e.varint(*(*int64)(p)); return nil },
			dec: func(d *decoder, p unsafe.Pointer) { *(*int64)(p) = d.varint() },
		}
	}
	return codec{
		enc: func(e *encoder, p unsafe.Pointer) error { e.varint(get(p)); return nil },
		dec: func(d *decoder, p unsafe.Pointer) { set(p, d.varint()) },
	}
}

// uintCodec is the codec of an unsigned integer of size bytes: a uvarint.
func uintCodec(size uintptr) codec {
	var get func(unsafe.Pointer) uint64
	var set func(unsafe.Pointer, uint64)
	switch size {
	case 1:
		get, set = func(p unsafe.Pointer) uint64 { return uint64(*(*uint8)(p)) }, func(p unsafe.Pointer, x uint64) { *(*uint8)(p) = uint8(x) }
	case 2:
		get, set = func(p unsafe.Pointer) uint64 { return uint64(*(*uint16)(p)) }, func(p unsafe.Pointer, x uint64) { *(*uint16)(p) = uint16(x) }
	case 4:
		get, set = func(p unsafe.Pointer) uint64 { return uint64(*(*uint32)(p)) }, func(p unsafe.Pointer, x uint64) { *(*uint32)(p) = uint32(x) }
	default:
		return codec{
			enc: func(e *encoder, p unsafe.Pointer) error { e.uvarint(*(*uint64)(p)); return nil },
			dec: func(d *decoder, p unsafe.Pointer) { *(*uint64)(p) = d.uvarint() },
		}
	}
	return codec{
		enc: func(e *encoder, p unsafe.Pointer) error { e.uvarint(get(p)); return nil },
		dec: func(d *decoder, p unsafe.Pointer) { set(p, d.uvarint()) },
	}
}

// lastZone is the zone fixedZone made last: runs are given times in one zone, mostly.
var lastZone atomic.Pointer[time.Location]

// fixedZone is the location of a time decoded with zone name and offset (seconds east of UTC):
// time.UTC for UTC (as a time made in UTC has), else a fixed zone, the last one made when it is
// the same.
func fixedZone(name string, offset int) *time.Location {
	if name == "UTC" && offset == 0 {
		return time.UTC
	}
	if loc := lastZone.Load(); loc != nil {
		if n, off := time.Unix(0, 0).In(loc).Zone(); n == name && off == offset {
			return loc
		}
	}
	loc := time.FixedZone(strings.Clone(name), offset) // not the frame's memory
	lastZone.Store(loc)
	return loc
}

// length reads a slice's length as the record encoder writes it: -1 for a nil slice. A length
// of more elements of min bytes than the frame has left fails, so a hostile one never makes the
// reader allocate more than the frame could describe.
func (d *decoder) length(min int) int {
	u, left := d.uvarint(), uint64(len(d.s)-d.i)
	if u == 0 {
		return -1
	}
	if u-1 > left || min > 1 && u-1 > left/uint64(min) {
		d.fail()
		return -1
	}
	return int(u - 1)
}

// fixed64 reads 8 little-endian bytes.
func (d *decoder) fixed64() uint64 {
	if d.i+8 > len(d.s) {
		d.fail()
		return 0
	}
	u := uint64(d.s[d.i]) | uint64(d.s[d.i+1])<<8 | uint64(d.s[d.i+2])<<16 | uint64(d.s[d.i+3])<<24 |
		uint64(d.s[d.i+4])<<32 | uint64(d.s[d.i+5])<<40 | uint64(d.s[d.i+6])<<48 | uint64(d.s[d.i+7])<<56
	d.i += 8
	return u
}
