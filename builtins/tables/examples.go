package tables

import (
	"fmt"
	"strings"

	"github.com/starplan/starplan/table"
)

// The examples of the table methods are written from the schema of the table they show, so the
// reference never names a field the domain does not have.

// textField is the first field besides the key that holds free text, or nil.
func textField(s *table.Schema) *table.Field {
	for i := range s.Fields {
		f := &s.Fields[i]
		if f.Name != s.Key && f.Type == table.TypeString && f.Pattern == "" && len(f.Enum) == 0 {
			return f
		}
	}
	return nil
}

// numberField is the first field besides the key that holds a number, or nil.
func numberField(s *table.Schema) *table.Field {
	for i := range s.Fields {
		f := &s.Fields[i]
		if f.Name != s.Key && (f.Type == table.TypeInt || f.Type == table.TypeFloat) {
			return f
		}
	}
	return nil
}

// keySample is a key of the table as a plan writes it: the first generated one when keys are
// generated, else a placeholder of the key's type.
func keySample(s *table.Schema) string {
	switch {
	case s.KeyPrefix != "":
		return fmt.Sprintf("%q", formatID(s.KeyPrefix, max(s.KeyDigits, 1), 1))
	case s.Field(s.Key) != nil && s.Field(s.Key).Type == table.TypeInt:
		return "1"
	}
	return `"..."`
}

// sample is a value of f for an example, as Starlark text.
func sample(f *table.Field) string {
	switch f.Type {
	case table.TypeInt:
		return "1"
	case table.TypeFloat:
		return "1.0"
	case table.TypeBool:
		return "True"
	case table.TypeTimestamp:
		return "now()"
	}
	if len(f.Enum) > 0 {
		return fmt.Sprintf("%q", f.Enum[0])
	}
	return `"..."`
}

// methodExample is the example of method m on tv.
func methodExample(m string, tv *TableValue) string {
	s, name := tv.schema, tv.name
	text, num := textField(s), numberField(s)
	keyOf := func(row string) string { return fmt.Sprintf("{%q: %s[%q]}", s.Key, row, s.Key) }
	switch m {
	case "all":
		if text != nil {
			return fmt.Sprintf("names = [row[%q] for row in %s.all()]", text.Name, name)
		}
	case "search":
		if num != nil {
			return fmt.Sprintf(`rows = %s.search({%q: {"$lt": 100}})`, name, num.Name)
		}
		if text != nil {
			return fmt.Sprintf(`rows = %s.search({%q: {"$icontains": "..."}})`, name, text.Name)
		}
	case "get":
		if text != nil {
			return fmt.Sprintf(`row = %s.get({%q: {"$ieq": "..."}})`, name, text.Name)
		}
		return fmt.Sprintf("row = %s.get(None)", name)
	case "last":
		return fmt.Sprintf("row = %s.last()", name)
	case "get_by_key":
		return fmt.Sprintf("row = %s.get_by_key(%s)", name, keySample(s))
	case "count":
		if num != nil {
			return fmt.Sprintf("n = %s.count({%q: 0})", name, num.Name)
		}
		return fmt.Sprintf("n = %s.count()", name)
	case "insert":
		var fields []string
		for i := range s.Fields {
			f := &s.Fields[i]
			if f.Name == s.Key && s.KeyPrefix != "" || !f.Required && f.Name != s.Key {
				continue
			}
			v := sample(f)
			if f.Name == s.Key {
				v = keySample(s)
			}
			fields = append(fields, fmt.Sprintf("%q: %s", f.Name, v))
		}
		return fmt.Sprintf("key = %s.insert({%s})", name, strings.Join(fields, ", "))
	case "update":
		if num != nil {
			return fmt.Sprintf("%s.update({%q: row[%q] + 1}, %s)", name, num.Name, num.Name, keyOf("row"))
		}
		if text != nil {
			return fmt.Sprintf(`%s.update({%q: "..."}, %s)`, name, text.Name, keyOf("row"))
		}
	case "remove":
		return fmt.Sprintf("%s.remove({%q: %s})", name, s.Key, keySample(s))
	}
	return fmt.Sprintf("rows = %s.all()", name)
}
