package contracts

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/starplan/starplan/internal/spell"
)

// checkFunc is a resolved rule: it reports violations on the pass and returns an error only for a
// failure of starplan itself.
type checkFunc func(p *pass) error

// kind is a generic, parameterised check that a domain's rules refer to by name.
type kind struct {
	name   string
	params string // the parameters, for KindDoc: "table, fields"
	doc    string
	build  func(p *params) checkFunc // reads its parameters; errors are collected on p
}

// KindDoc documents one check kind a domain file may use.
type KindDoc struct {
	Name   string `json:"name"`
	Params string `json:"params"` // the parameters; those in brackets are optional
	Doc    string `json:"doc"`
}

// kinds is the fixed list of check kinds, in documentation order. It is never modified.
var kinds = []kind{
	{"only_tables", "tables", "only the listed tables may change", buildOnlyTables},
	{"no_deletes", "[tables]", "no row is removed (from the listed tables; default every table)", buildNoDeletes},
	{"no_inserts", "[table], [tables]", "no row is added to the table, or to any of the listed tables (give one of the two)", buildNoInserts},
	{"append_only", "[table], [tables]", "rows may be added to the table, or the listed tables (give one of the two), never changed or removed", buildAppendOnly},
	{"key_immutable", "[tables]", "no updated row changes its key field (in the listed tables; default every table)", buildKeyImmutable},
	{"mutable_fields", "table, fields", "an update of the table changes only the listed fields", buildMutableFields},
	{"non_negative", "table, field", "the field of every added or changed row stays >= 0", buildNonNegative},
	{"ledger_per_item", "stock_table, stock_field, price_field, ledger_table, amount_field",
		"every stock row whose stock changes gets exactly one new ledger row with amount = price × (stock before − stock after)",
		buildLedgerPerItem},
	{"balance_chain", "ledger_table, amount_field, balance_field",
		"new ledger rows, in key order after the last committed one, each have balance = previous balance + amount",
		buildBalanceChain},
	{"non_negative_balance", "ledger_table, amount_field, balance_field",
		"the running balance (the last committed balance plus the new rows' amounts, in key order) never goes below 0",
		buildNonNegativeBalance},
	{"starlark", "function",
		"the domain's own rule: the named function of its invariants.star gets the change set and returns what is wrong",
		buildStarlark},
}

// Kinds documents every check kind a domain file may refer to.
func Kinds() []KindDoc {
	docs := make([]KindDoc, len(kinds))
	for i, k := range kinds {
		docs[i] = KindDoc{Name: k.name, Params: k.params, Doc: k.doc}
	}
	return docs
}

// KindNames lists the kind names in documentation order.
func KindNames() []string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.name
	}
	return names
}

func lookupKind(name string) (*kind, bool) {
	for i := range kinds {
		if kinds[i].name == name {
			return &kinds[i], true
		}
	}
	return nil, false
}

// params reads a rule's parameters, remembering the first problem and which keys were used, so
// that a misspelt parameter is an error instead of being ignored.
type params struct {
	m    map[string]any
	rule string // the rule's name
	used []string
	err  error
}

func (p *params) fail(format string, args ...any) {
	if p.err == nil {
		p.err = fmt.Errorf(format, args...)
	}
}

func (p *params) get(name string, required bool) (any, bool) {
	p.used = append(p.used, name)
	v, ok := p.m[name]
	if !ok && required {
		p.fail("missing parameter %q", name)
	}
	return v, ok
}

// str reads a required non-empty string parameter.
func (p *params) str(name string) string {
	v, ok := p.get(name, true)
	if !ok {
		return ""
	}
	s, isStr := v.(string)
	if !isStr || s == "" {
		p.fail("parameter %q must be a non-empty string", name)
	}
	return s
}

// strs reads a list-of-strings parameter; an absent optional one is nil.
func (p *params) strs(name string, required bool) []string {
	v, ok := p.get(name, required)
	if !ok {
		return nil
	}
	list, isList := v.([]any)
	if !isList || len(list) == 0 {
		p.fail("parameter %q must be a non-empty list of strings", name)
		return nil
	}
	out := make([]string, len(list))
	for i, e := range list {
		s, isStr := e.(string)
		if !isStr || s == "" {
			p.fail("parameter %q must be a non-empty list of strings", name)
			return nil
		}
		out[i] = s
	}
	return out
}

// finish reports the first problem, or an unknown parameter.
func (p *params) finish() error {
	if p.err != nil {
		return p.err
	}
	var unknown []string
	for k := range p.m {
		known := false
		for _, u := range p.used {
			if u == k {
				known = true
				break
			}
		}
		if !known {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		sort.Strings(p.used)
		return fmt.Errorf("unknown parameter %s (known: %s)", strings.Join(unknown, ", "), strings.Join(p.used, ", "))
	}
	return nil
}

// set makes a lookup set of names; a nil list gives a nil set, meaning "every name".
func set(names []string) map[string]bool {
	if names == nil {
		return nil
	}
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// inSet reports whether name is in s; a nil s holds every name.
func inSet(s map[string]bool, name string) bool {
	return s == nil || s[name]
}

// refs says, per kind, which parameters name tables ("") and which name fields of the table a
// parameter names (the field's table parameter), so CheckSchema can check them against a schema.
var refs = map[string]map[string]string{
	"only_tables":          {"tables": ""},
	"no_deletes":           {"tables": ""},
	"no_inserts":           {"table": "", "tables": ""},
	"append_only":          {"table": "", "tables": ""},
	"key_immutable":        {"tables": ""},
	"mutable_fields":       {"table": "", "fields": "table"},
	"non_negative":         {"table": "", "field": "table"},
	"ledger_per_item":      {"stock_table": "", "stock_field": "stock_table", "price_field": "stock_table", "ledger_table": "", "amount_field": "ledger_table"},
	"balance_chain":        {"ledger_table": "", "amount_field": "ledger_table", "balance_field": "ledger_table"},
	"non_negative_balance": {"ledger_table": "", "amount_field": "ledger_table", "balance_field": "ledger_table"},
	"starlark":             {"function": "-"}, // names a function, not a table or a field
}

// CheckSchema reports every table and field a rule names that the domain's tables lack (fields
// lists each table's fields), with a did-you-mean where one is near: a rule about a table that
// does not exist would never fire.
func (d *Domain) CheckSchema(fields map[string][]string) []error {
	tables := make([]string, 0, len(fields))
	for t := range fields {
		tables = append(tables, t)
	}
	sort.Strings(tables)
	var errs []error
	for _, r := range d.Rules {
		ref := refs[r.Kind]
		for _, p := range slices.Sorted(maps.Keys(ref)) {
			of := ref[p]
			if of == "-" {
				continue
			}
			for _, v := range stringsOf(r.Params[p]) {
				switch {
				case of == "":
					if _, ok := fields[v]; !ok {
						errs = append(errs, fmt.Errorf("rule %q: %s names table %q, which the domain does not have%s", r.Name, p, v, hintOf(v, tables)))
					}
				default:
					tbl, _ := r.Params[of].(string)
					fs, ok := fields[tbl]
					if ok && !slices.Contains(fs, v) {
						errs = append(errs, fmt.Errorf("rule %q: %s names field %q, which table %s does not have%s", r.Name, p, v, tbl, hintOf(v, fs)))
					}
				}
			}
		}
	}
	return append(errs, d.Approval.checkSchema(fields, tables)...)
}

// stringsOf is a parameter's value as a list of strings: one string, or each string of a list.
func stringsOf(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func hintOf(x string, candidates []string) string {
	if near := spell.Nearest(x, candidates); near != "" {
		return fmt.Sprintf(" (did you mean %q?)", near)
	}
	return ""
}

// KindTable is the rule kinds as a Markdown table (kind, parameters, what it checks), in
// documentation order: the README's table of them is this text (TestREADMEKindTable).
func KindTable() string {
	var b strings.Builder
	b.WriteString("| kind | parameters (`[optional]`) | what it checks |\n|---|---|---|\n")
	for _, k := range kinds {
		params := "none"
		if k.params != "" {
			params = "`" + k.params + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", k.name, params, strings.ReplaceAll(k.doc, "|", `\|`))
	}
	return b.String()
}

// KindText is the rule kinds for a terminal (starplan domain --help): one line each, the kind
// and its parameters, then what it checks.
func KindText() string {
	var b strings.Builder
	for _, k := range kinds {
		fmt.Fprintf(&b, "  %-22s %s\n  %-22s %s\n", k.name, "params: "+k.params, "", k.doc)
	}
	return b.String()
}
