package diffview

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/starplan/starplan/internal/termsafe"
	"github.com/starplan/starplan/table"
)

// JSON writes cs for programs as one JSON document, indented by two spaces and ending in a
// newline. Its shape is stable:
//
//	{
//	  "<table>": {
//	    "key": "<key field>",
//	    "inserted": [<row>, ...],
//	    "updated": [{"key": <key>, "before": <row>, "after": <row>, "fields": ["<field>", ...],
//	                 "paths": ["<field>", "<field.key>", "<field>[<i>]", ...]}, ...],
//	    "deleted": [<row>, ...]
//	  },
//	  ...
//	}
//
// Only tables with changes appear, in name order; the three lists are always present (possibly
// empty) and keep the change set's order (key order). A row is an object with its fields in name
// order; "fields" lists the changed fields, sorted. An update that changed a list or object
// also has "paths": the changed fields with each nested one replaced by the paths inside it that
// changed ("address.city", "lines[1].qty"), in the order the views show them; an update of
// scalar fields only has none, so its shape is as it always was. A float keeps a decimal point (80.0, not 80),
// so a Python or Starlark reader gets a float back. The characters encoding/json leaves raw
// that a terminal would act on or not show (C1 controls, U+200B, U+202E, …; termsafe.JSON) are
// written as \u escapes. An empty change set is {}.
//
// It fails, writing nothing, if a value has no JSON form (NaN or an infinite float), and
// otherwise only with the writer's error.
func JSON(w io.Writer, cs table.ChangeSet) error {
	type update struct {
		Key    any      `json:"key"`
		Before any      `json:"before"`
		After  any      `json:"after"`
		Fields []string `json:"fields"`
		Paths  []string `json:"paths,omitempty"`
	}
	type changes struct {
		Key      string   `json:"key"`
		Inserted []any    `json:"inserted"`
		Updated  []update `json:"updated"`
		Deleted  []any    `json:"deleted"`
		// Via is table.TableChanges.Via: row key → the helper through which the row was written.
		Via map[string]string `json:"via,omitempty"`
	}
	doc := map[string]changes{}
	for _, s := range sections(cs) {
		c := changes{
			Key:      s.tc.Key,
			Via:      s.tc.Via,
			Inserted: make([]any, 0, len(s.tc.Inserted)),
			Updated:  make([]update, 0, len(s.tc.Updated)),
			Deleted:  make([]any, 0, len(s.tc.Deleted)),
		}
		for _, r := range s.tc.Inserted {
			v, err := jsonValue(r)
			if err != nil {
				return fmt.Errorf("diffview: %s: %w", s.name, err)
			}
			c.Inserted = append(c.Inserted, v)
		}
		for _, u := range s.tc.Updated {
			k, err := jsonValue(u.Key)
			if err != nil {
				return fmt.Errorf("diffview: %s: %w", s.name, err)
			}
			before, err := jsonValue(u.Before)
			if err != nil {
				return fmt.Errorf("diffview: %s row %v: %w", s.name, u.Key, err)
			}
			after, err := jsonValue(u.After)
			if err != nil {
				return fmt.Errorf("diffview: %s row %v: %w", s.name, u.Key, err)
			}
			fields := u.Fields
			if fields == nil {
				fields = []string{}
			}
			c.Updated = append(c.Updated, update{Key: k, Before: before, After: after, Fields: fields, Paths: jsonPaths(u)})
		}
		for _, r := range s.tc.Deleted {
			v, err := jsonValue(r)
			if err != nil {
				return fmt.Errorf("diffview: %s: %w", s.name, err)
			}
			c.Deleted = append(c.Deleted, v)
		}
		doc[s.name] = c
	}
	var sb strings.Builder
	enc := json.NewEncoder(&sb)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("diffview: %w", err)
	}
	return writeAll(w, termsafe.JSON(sb.String()))
}

// jsonPaths is an update's changed paths (table.UpdatePaths), nil when no nested value changed.
func jsonPaths(u table.Update) []string {
	if u.Paths != nil {
		return u.Paths
	}
	return table.UpdatePaths(u.Before, u.After, u.Fields)
}

// jsonValue copies v with every float replaced by a json.Number in Python's repr, so that 80.0
// stays 80.0. Maps are encoded with sorted keys by encoding/json.
func jsonValue(v any) (any, error) {
	switch v := v.(type) {
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("value %s has no JSON form", pyFloat(v))
		}
		return json.Number(pyFloat(v)), nil
	case float32:
		return jsonValue(float64(v))
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			var err error
			if out[i], err = jsonValue(e); err != nil {
				return nil, err
			}
		}
		return out, nil
	case map[string]any:
		if v == nil {
			return nil, nil
		}
		out := make(map[string]any, len(v))
		for k, e := range v {
			var err error
			if out[k], err = jsonValue(e); err != nil {
				return nil, fmt.Errorf("field %q: %w", k, err)
			}
		}
		return out, nil
	}
	return v, nil
}
