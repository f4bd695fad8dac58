package contracts

import (
	"fmt"
	"sort"
	"strings"
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
	{"no_inserts", "table", "no row is added to the table", buildNoInserts},
	{"append_only", "table", "rows may be added to the table, never changed or removed", buildAppendOnly},
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
