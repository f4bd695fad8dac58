package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
)

// anyValue are the types of a value a Go field of type any may hold in a tool's JSON: every
// JSON type but null (a null member is left out of a tool's output, see dropNulls).
var anyValue = []string{"string", "number", "boolean", "object", "array"}

// toolSchema is the JSON Schema of a tool's input or output of Go type t, made portable
// (portable). override, when set, derives the schema instead of jsonschema.ForType.
func toolSchema(t reflect.Type, override func() (*jsonschema.Schema, error)) (*jsonschema.Schema, error) {
	var (
		sc  *jsonschema.Schema
		err error
	)
	if override != nil {
		sc, err = override()
	} else {
		sc, err = jsonschema.ForType(t, &jsonschema.ForOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("the JSON Schema of %v: %w", t, err)
	}
	sc = sc.CloneSchemas() // a cached schema (describe's) stays as it was
	portable(sc)
	return sc, nil
}

// portable rewrites a schema derived from Go types into the subset that strict MCP hosts take
// (the MCP inspector's --strict lint; hosts that map tool schemas to a single-type dialect):
//
//   - a nullable property (["null", "array"], Go's nil slices, maps and pointers) gets its one
//     other type and becomes optional: a tool's output leaves its null members out (dropNulls);
//   - a property of any type (the bare `true` schema, or one with only a description) becomes
//     an anyOf of single-typed branches, keeping its description;
//
// so every property has exactly one type, or an anyOf of branches that each have one.
// additionalProperties keeps its boolean form, which every dialect reads.
func portable(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if len(s.Types) > 0 {
		types := slices.DeleteFunc(slices.Clone(s.Types), func(t string) bool { return t == "null" })
		s.Types = nil
		if len(types) == 1 {
			s.Type = types[0]
		} else {
			for _, t := range types {
				s.AnyOf = append(s.AnyOf, &jsonschema.Schema{Type: t})
			}
		}
	}
	for name, p := range s.Properties {
		if p == nil {
			continue
		}
		if slices.Contains(p.Types, "null") {
			s.Required = slices.DeleteFunc(slices.Clone(s.Required), func(r string) bool { return r == name })
		}
		if untyped(p) {
			for _, t := range anyValue {
				p.AnyOf = append(p.AnyOf, &jsonschema.Schema{Type: t})
			}
		}
		portable(p)
	}
	if s.Items != nil && untyped(s.Items) {
		for _, t := range anyValue {
			s.Items.AnyOf = append(s.Items.AnyOf, &jsonschema.Schema{Type: t})
		}
	}
	portable(s.Items)
	for _, sub := range s.AnyOf {
		portable(sub)
	}
	for _, sub := range s.Defs {
		portable(sub)
	}
	if ap := s.AdditionalProperties; ap != nil && !untyped(ap) && ap.Not == nil {
		portable(ap)
	}
}

// untyped reports whether a schema constrains nothing (it marshals as `true`, or carries only
// annotations such as a description).
func untyped(s *jsonschema.Schema) bool {
	return s.Type == "" && len(s.Types) == 0 && s.Ref == "" && len(s.AnyOf) == 0 && len(s.OneOf) == 0 &&
		len(s.AllOf) == 0 && s.Not == nil && len(s.Enum) == 0 && s.Const == nil && s.Properties == nil && s.Items == nil
}

// dropNulls returns v as JSON without the object members whose value is null, at every depth,
// keeping the others' order and their numbers' digits: the portable output schemas declare such
// members optional, not nullable. Null items of a list stay (no Go type of a tool's output holds
// one). (The SDK then validates the output through a map, so the wire has the keys sorted, as
// before.)
func dropNulls(v any) (json.RawMessage, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers keep their digits
	var out bytes.Buffer
	if err := copyValue(dec, &out); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// copyValue copies the next JSON value of dec to out, leaving out null members of objects.
func copyValue(dec *json.Decoder, out *bytes.Buffer) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			out.WriteByte('{')
			first := true
			for dec.More() {
				key, err := dec.Token()
				if err != nil {
					return err
				}
				var member bytes.Buffer
				if err := copyValue(dec, &member); err != nil {
					return err
				}
				if member.String() == "null" {
					continue
				}
				if !first {
					out.WriteByte(',')
				}
				first = false
				writeScalar(out, key)
				out.WriteByte(':')
				out.Write(member.Bytes())
			}
			out.WriteByte('}')
		case '[':
			out.WriteByte('[')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					out.WriteByte(',')
				}
				if err := copyValue(dec, out); err != nil {
					return err
				}
			}
			out.WriteByte(']')
		}
		if t == '{' || t == '[' {
			_, err := dec.Token() // the closing delimiter
			return err
		}
		return nil
	default:
		writeScalar(out, tok)
		return nil
	}
}

// writeScalar writes a string, number, boolean or null token as JSON, HTML characters as they
// are (as writeJSON sends them).
func writeScalar(out *bytes.Buffer, tok json.Token) {
	switch t := tok.(type) {
	case nil:
		out.WriteString("null")
	case json.Number:
		out.WriteString(t.String())
	default:
		enc := json.NewEncoder(out)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(t)           // a string or a bool: cannot fail
		out.Truncate(out.Len() - 1) // Encode's newline
	}
}
