package engine

import (
	"fmt"
	"maps"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/starplan/starplan/contracts"
)

// schemaDocs describe every property of the domain files' schemas, by file and path ("a.b" a
// nested property, "a[]" a list's element, "a.*" a map's value, "$field" a definition), where
// the Go type's own jsonschema tag says nothing. An editor shows them as the author types;
// TestDomainFileSchemas fails on a property with none.
var schemaDocs = map[string]map[string]string{
	"domain.json": {
		"name":                   "the domain's name: a letter, then letters, digits or _; a store holds one domain and is opened as that domain",
		"doc":                    "one line on what the domain is, for the prompt and describe",
		"tables":                 "the domain's tables (at least one)",
		"tables[].name":          "the table's name: a letter, then letters, digits or _; plans call it NAME_tbl",
		"tables[].key":           "the field that is the table's key: unique, a string or an int, never None",
		"tables[].doc":           "one line on what a row is",
		"tables[].fields":        "the table's fields, the key's among them",
		"tables[].key_prefix":    "lets insert generate a missing key: this prefix and the next number (TXN002)",
		"tables[].key_digits":    "the digits a generated key's number is zero-padded to",
		"tables[].key_max":       "the highest number of a generated key (default 999999999); a key beyond it is refused",
		"tables[].indexes":       "fields besides the key that reads look rows up by: an equality or $ieq on one is answered from an index",
		"tables[].writes":        "helpers: only the domain's helpers (helpers.star) may write the table; a plan's own insert, update or remove on it is refused",
		"tables[].sql":           "PostgreSQL store only, and not usable yet: the table's rows are to live in an existing SQL table (checked against the catalog at db init); until that check exists the PostgreSQL store refuses a domain that sets it, naming the table, and the bbolt store ignores it",
		"tables[].sql.table":     "the existing table, as schema.table (public.orders)",
		"tables[].sql.columns":   "field → column, for each field whose column is not named as the field; a field not listed is the column of its name",
		"tables[].sql.columns.*": "the column that holds the field",
		"$field.name":            "the field's name (an object's key); unused for a list's items",
		"$field.type":            "string, int, float, bool, timestamp, list, object or map",
		"$field.required":        "the value must be present and not None",
		"$field.doc":             "one line on what the value is, for the prompt and describe",
		"$field.min":             "for numbers: the inclusive lower bound",
		"$field.max":             "for numbers: the inclusive upper bound",
		"$field.min_len":         "for strings: at least this many characters",
		"$field.max_len":         "for strings: at most this many characters (default 1000)",
		"$field.enum":            "for strings: the values it may take",
		"$field.pattern":         "for strings: an RE2 expression the whole value must match",
		"$field.read_only":       "may be set on insert, never changed by update",
		"$field.items":           "for a list: what each element is (a field without a name); none accepts any value",
		"$field.fields":          "for an object: its known keys, each a field of its own",
		"$field.additional":      "for an object: keys beyond fields are accepted, with any value (default: refused)",
		"$field.max_bytes":       "for a list, object or map: the most bytes its encoded value may take (default 65536)",
		"$field.values":          "for a map: what each value is (a field without a name); required for a map",
		"$field.keys":            "for a map: what its keys may be",
		"$field.keys.pattern":    "an RE2 expression every key must match",
		"$field.keys.max_len":    "the most characters a key may have",
		"$value.name":            "unused for a list's items",
		"$value.type":            "string, int, float, bool, timestamp, list, object or map",
		"$value.required":        "the element must not be None",
		"$value.doc":             "one line on what the element is",
		"$value.min":             "for numbers: the inclusive lower bound",
		"$value.max":             "for numbers: the inclusive upper bound",
		"$value.min_len":         "for strings: at least this many characters",
		"$value.max_len":         "for strings: at most this many characters (default 1000)",
		"$value.enum":            "for strings: the values it may take",
		"$value.pattern":         "for strings: an RE2 expression the whole value must match",
		"$value.read_only":       "unused for a list's items",
		"$value.items":           "for a list: what each element is; none accepts any value",
		"$value.fields":          "for an object: its known keys, each a field of its own",
		"$value.additional":      "for an object: keys beyond fields are accepted, with any value (default: refused)",
		"$value.max_bytes":       "unused for a list's items: only a table's own fields bound their size",
		"$value.values":          "for a map: what each value is; required for a map",
		"$value.keys":            "for a map: what its keys may be",
		"$value.keys.pattern":    "an RE2 expression every key must match",
		"$value.keys.max_len":    "the most characters a key may have",
	},
	"policy.json": {
		"name":                          "the domain's name, as in domain.json",
		"doc":                           "one line on what the domain is",
		"contract":                      "the output contract: what STATUS and answer_text must be",
		"contract.statuses":             "the values STATUS may take, in the order the prompt shows them",
		"contract.write_status":         "the one STATUS under which a plan may change data; empty or absent: none may (a read-only domain)",
		"contract.answer_max_sentences": "the most sentences answer_text may hold (> 0)",
		"contract.answer_max_chars":     "the most characters answer_text may hold (> 0)",
		"contract.requires_change":      "by STATUS: true, a plan that sets it must have changed data; false, it must have changed none",
		"limits":                        "what one run may make the store do; an absent limit takes its default",
		"limits.helper_calls":           "the most table calls of a run (default 100000)",
		"limits.rows_read":              "the most rows handed to a run (default 10000000)",
		"limits.rows_written":           "the most rows a run may change (default 10000)",
		"limits.rows_written_per_table": "the most rows a run may change, by table",
		"rules":                         "the mutation policy: every run's changes are checked against each rule, at the dry run and again at apply",
		"rules[].name":                  "the rule's name, which its findings carry as their code",
		"rules[].doc":                   "one line saying the rule, for the prompt and describe",
		"rules[].kind":                  "what the rule checks (starplan domain --help lists each kind with its parameters)",
		"rules[].params":                "the kind's parameters",
		"subject":                       "what the domain asks of the subject a run acts for (--subject, a token pinned to one)",
		"subject.required_for_writes":   "true: a run that changes data must name its subject (subject-required)",
		"approval":                      "who must approve a run's changes, and what goes through without a person",
		"approval.required_approvals":   "how many distinct approvers a run needs (default 1, at most 10)",
		"approval.four_eyes":            "default: admins and the local user may approve their own runs; always: nobody may",
		"approval.pending_ttl":          "how long a run waits for approval (24h, 90m, 7d); absent: for ever",
		"approval.auto":                 "rules that let a run through without a person, checked in order at apply",
		"approval.auto[].name":          "the auto rule's name, which the run's approval names",
		"approval.auto[].doc":           "one line saying the auto rule",
		"approval.auto[].kind":          "auto_apply or needs_person",
		"approval.auto[].params":        "the kind's parameters",
	},
}

// document gives every property of sc (the schema of file) its description from schemaDocs,
// and returns the paths of those that have none.
func document(file string, sc *jsonschema.Schema) (missing []string) {
	docs := schemaDocs[file]
	var walk func(s *jsonschema.Schema, path string)
	walk = func(s *jsonschema.Schema, path string) {
		if s == nil {
			return
		}
		for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
			p := s.Properties[name]
			at := name
			if path != "" {
				at = path + "." + name
			}
			if p.Description == "" {
				p.Description = docs[at]
			}
			if p.Description == "" {
				missing = append(missing, file+": "+at)
			}
			walk(p, at)
		}
		walk(s.Items, path+"[]")
		walk(s.AdditionalProperties, path+".*")
	}
	walk(sc, "")
	for _, name := range slices.Sorted(maps.Keys(sc.Defs)) {
		walk(sc.Defs[name], "$"+name)
	}
	return missing
}

// withoutRequired removes names from s's required list.
func withoutRequired(s *jsonschema.Schema, names ...string) {
	var keep []string // a new slice: a cloned schema shares its list with the original
	for _, n := range s.Required {
		if !slices.Contains(names, n) {
			keep = append(keep, n)
		}
	}
	s.Required = keep
}

// policySchema is the schema of policy.json: the rule kinds as an enum, and required only what
// the tool requires (contracts.Parse).
func policySchema() (*jsonschema.Schema, error) {
	sc, err := jsonschema.For[contracts.Domain](nil)
	if err != nil {
		return nil, err
	}
	withoutRequired(sc, "limits", "rules")
	contract := sc.Properties["contract"]
	withoutRequired(contract, "write_status")
	rules := sc.Properties["rules"].Items
	for _, k := range contracts.KindNames() {
		rules.Properties["kind"].Enum = append(rules.Properties["kind"].Enum, k)
	}
	auto := sc.Properties["approval"].Properties["auto"].Items
	for _, k := range contracts.AutoKinds() {
		auto.Properties["kind"].Enum = append(auto.Properties["kind"].Enum, k.Name)
	}
	if len(rules.Properties["kind"].Enum) == 0 || len(auto.Properties["kind"].Enum) == 0 {
		return nil, fmt.Errorf("no kinds")
	}
	return sc, nil
}
