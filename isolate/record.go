package isolate

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"

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
// A record is encoded from, and decoded into, an addressable value (a pointer's element).

// notSent names the fields of a record that do not cross, each with its reason.
var notSent = map[reflect.Type]map[string]string{
	reflect.TypeFor[sandbox.Request](): {
		"View":    "the pool serves every table call from it; the worker gets a remote view of it",
		"Helpers": "it travels with the schemas (runMsg.Schemas), once per worker",
	},
}

// codec writes and reads values of one type.
type codec struct {
	enc func(e *encoder, v reflect.Value) error
	dec func(d *decoder, v reflect.Value) // v is settable
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

func kindCodec(t reflect.Type, path string) codec {
	switch {
	case t == timeType:
		return codec{
			// Through the field's address: a time.Time boxed in an interface is an allocation.
			enc: func(e *encoder, v reflect.Value) error {
				tm := *v.Addr().Interface().(*time.Time)
				e.varint(tm.Unix())
				e.varint(int64(tm.Nanosecond()))
				name, offset := tm.Zone()
				e.string(name)
				e.varint(int64(offset))
				return nil
			},
			min: 4,
			dec: func(d *decoder, v reflect.Value) {
				sec, nsec := d.varint(), d.varint()
				zone, offset := d.string(), d.varint()
				*v.Addr().Interface().(*time.Time) = time.Unix(sec, nsec).In(time.FixedZone(zone, int(offset)))
			},
		}
	case t == anyType:
		return codec{
			enc: func(e *encoder, v reflect.Value) error { return e.value(v.Interface()) },
			dec: func(d *decoder, v reflect.Value) {
				if x := d.value(); x != nil {
					v.Set(reflect.ValueOf(x))
				}
			},
		}
	case t == mapType:
		return codec{
			enc: func(e *encoder, v reflect.Value) error {
				if v.IsNil() {
					e.byte(tagNil)
					return nil
				}
				return e.row(v.Interface().(map[string]any))
			},
			dec: func(d *decoder, v reflect.Value) {
				if m, ok := d.value().(map[string]any); ok {
					v.Set(reflect.ValueOf(m))
				}
			},
		}
	}
	switch t.Kind() {
	case reflect.Bool:
		return codec{
			enc: func(e *encoder, v reflect.Value) error { e.bool(v.Bool()); return nil },
			dec: func(d *decoder, v reflect.Value) { v.SetBool(d.bool()) },
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return codec{
			enc: func(e *encoder, v reflect.Value) error { e.varint(v.Int()); return nil },
			dec: func(d *decoder, v reflect.Value) { v.SetInt(d.varint()) },
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return codec{
			enc: func(e *encoder, v reflect.Value) error { e.uvarint(v.Uint()); return nil },
			dec: func(d *decoder, v reflect.Value) { v.SetUint(d.uvarint()) },
		}
	case reflect.Float32, reflect.Float64:
		return codec{
			enc: func(e *encoder, v reflect.Value) error {
				e.buf = binary.LittleEndian.AppendUint64(e.buf, math.Float64bits(v.Float()))
				return nil
			},
			dec: func(d *decoder, v reflect.Value) { v.SetFloat(math.Float64frombits(d.fixed64())) },
			min: 8,
		}
	case reflect.String:
		return codec{
			enc: func(e *encoder, v reflect.Value) error { e.string(v.String()); return nil },
			dec: func(d *decoder, v reflect.Value) { v.SetString(d.string()) },
		}
	case reflect.Slice:
		elem := codecOf(t.Elem(), path+"[]")
		return codec{
			enc: func(e *encoder, v reflect.Value) error {
				if v.IsNil() {
					e.uvarint(0)
					return nil
				}
				e.uvarint(uint64(v.Len()) + 1)
				for i := range v.Len() {
					if err := elem.enc(e, v.Index(i)); err != nil {
						return err
					}
				}
				return nil
			},
			dec: func(d *decoder, v reflect.Value) {
				n := d.length(elem.min)
				if n < 0 {
					return
				}
				if n == 0 {
					v.Set(reflect.MakeSlice(t, 0, 0)) // empty, not nil
					return
				}
				v.Grow(n)
				v.SetLen(n)
				for i := range n {
					elem.dec(d, v.Index(i))
				}
			},
		}
	case reflect.Map:
		// A string-keyed map: its length plus one (0 for nil), then each key and value, keys
		// sorted so that one map always encodes alike.
		if t.Key().Kind() != reflect.String {
			break
		}
		key, elem := codecOf(t.Key(), path+"{key}"), codecOf(t.Elem(), path+"{}")
		return codec{
			enc: func(e *encoder, v reflect.Value) error {
				if v.IsNil() {
					e.uvarint(0)
					return nil
				}
				e.uvarint(uint64(v.Len()) + 1)
				keys := v.MapKeys()
				slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
				for _, k := range keys {
					if err := key.enc(e, k); err != nil {
						return err
					}
					if err := elem.enc(e, v.MapIndex(k)); err != nil {
						return err
					}
				}
				return nil
			},
			dec: func(d *decoder, v reflect.Value) {
				n := d.length(key.min + elem.min)
				if n < 0 {
					return
				}
				m := reflect.MakeMapWithSize(t, n)
				for range n {
					k, x := reflect.New(t.Key()).Elem(), reflect.New(t.Elem()).Elem()
					key.dec(d, k)
					elem.dec(d, x)
					m.SetMapIndex(k, x)
				}
				v.Set(m)
			},
		}
	case reflect.Pointer:
		elem := codecOf(t.Elem(), path)
		return codec{
			enc: func(e *encoder, v reflect.Value) error {
				e.bool(!v.IsNil())
				if v.IsNil() {
					return nil
				}
				return elem.enc(e, v.Elem())
			},
			dec: func(d *decoder, v reflect.Value) {
				if !d.bool() {
					return
				}
				p := reflect.New(t.Elem())
				elem.dec(d, p.Elem())
				v.Set(p)
			},
		}
	case reflect.Struct:
		type field struct {
			index int
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
			fields = append(fields, field{i, codecOf(f.Type, path+"."+f.Name)})
		}
		size := 0
		for _, f := range fields {
			size += f.min
		}
		return codec{
			min: size,
			enc: func(e *encoder, v reflect.Value) error {
				for _, f := range fields {
					if err := f.enc(e, v.Field(f.index)); err != nil {
						return err
					}
				}
				return nil
			},
			dec: func(d *decoder, v reflect.Value) {
				for _, f := range fields {
					f.dec(d, v.Field(f.index))
				}
			},
		}
	}
	panic(fmt.Sprintf("isolate: %s of type %s cannot cross to the worker: give its kind a wire form in record.go, or list the field in notSent", path, t))
}

// length reads a slice's length as the record encoder writes it: -1 for a nil slice. A length
// of more elements of min bytes than the frame has left fails, so a hostile one never makes the
// reader allocate more than the frame could describe.
func (d *decoder) length(min int) int {
	u := d.uvarint()
	if u == 0 {
		return -1
	}
	if u-1 > uint64(len(d.s)-d.i)/uint64(min) {
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
