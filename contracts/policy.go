package contracts

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/starplan/starplan/table"
)

func buildOnlyTables(ps *params) checkFunc {
	tables := ps.strs("tables", true)
	allowed := set(tables)
	list := strings.Join(tables, ", ")
	return func(p *pass) error {
		for _, name := range p.tables() {
			if !allowed[name] {
				p.reportf(CodeTableNotAllowed, fmt.Sprintf("write only to %s; leave %s unchanged", list, name),
					"the plan changes table %s; only %s may change", name, list)
			}
		}
		return nil
	}
}

func buildNoDeletes(ps *params) checkFunc {
	only := set(ps.strs("tables", false))
	return func(p *pass) error {
		for _, name := range p.tables() {
			t := p.changes(name)
			if !inSet(only, name) {
				continue
			}
			for _, r := range t.Deleted {
				p.reportf(CodeDeleteNotAllowed, "leave the row in place: record the change with an update or a new row, as the other rules allow",
					"the plan removes %s row %s; rows are never removed", name, rowKey(t, r))
			}
		}
		return nil
	}
}

// tableList reads the tables a rule is about: "table" (one name) or "tables" (a list), one of
// the two.
func tableList(ps *params) []string {
	_, one := ps.m["table"]
	_, many := ps.m["tables"]
	switch {
	case one && many:
		ps.fail(`give "table" or "tables", not both`)
		return nil
	case many:
		return ps.strs("tables", true)
	case one:
		return []string{ps.str("table")}
	}
	ps.fail(`missing parameter "table" (or "tables", a list)`)
	return nil
}

func buildNoInserts(ps *params) checkFunc {
	tbls := tableList(ps)
	return func(p *pass) error {
		for _, tbl := range tbls {
			t := p.changes(tbl)
			if t == nil {
				continue
			}
			for _, r := range t.Inserted {
				p.reportf(CodeInsertNotAllowed, fmt.Sprintf("update an existing %s row instead of inserting one", tbl),
					"the plan inserts %s row %s; no rows may be added to %s", tbl, rowKey(t, r), tbl)
			}
		}
		return nil
	}
}

func buildAppendOnly(ps *params) checkFunc {
	tbls := tableList(ps)
	return func(p *pass) error {
		for _, tbl := range tbls {
			appendOnly(p, tbl)
		}
		return nil
	}
}

func appendOnly(p *pass, tbl string) {
	{
		t := p.changes(tbl)
		if t == nil {
			return
		}
		for _, u := range t.Updated {
			p.reportf(CodeAppendOnly, fmt.Sprintf("leave existing %s rows as they are; insert a new row to record a change", tbl),
				"the plan changes %s of existing %s row %s; %s is append-only", strings.Join(u.Fields, ", "), tbl, table.FormatValue(u.Key), tbl)
		}
		for _, r := range t.Deleted {
			p.reportf(CodeAppendOnly, fmt.Sprintf("leave existing %s rows in place; insert a new row to record a correction", tbl),
				"the plan removes existing %s row %s; %s is append-only", tbl, rowKey(t, r), tbl)
		}
	}
}

func buildKeyImmutable(ps *params) checkFunc {
	only := set(ps.strs("tables", false))
	return func(p *pass) error {
		for _, name := range p.tables() {
			t := p.changes(name)
			if !inSet(only, name) || t.Key == "" {
				continue
			}
			for _, u := range t.Updated {
				before, after := u.Before[t.Key], u.After[t.Key]
				if sameValue(before, after) && sameValue(u.Key, before) {
					continue
				}
				p.reportf(CodeKeyChanged, fmt.Sprintf("keep %s = %s; insert a new row if a new key is needed", t.Key, table.FormatValue(before)),
					"the plan changes the key %s of %s row %s to %s; key fields never change",
					t.Key, name, table.FormatValue(before), table.FormatValue(after))
			}
		}
		return nil
	}
}

func buildMutableFields(ps *params) checkFunc {
	tbl := ps.str("table")
	fields := ps.strs("fields", true)
	mutable := set(fields)
	list := strings.Join(fields, ", ")
	return func(p *pass) error {
		t := p.changes(tbl)
		if t == nil {
			return nil
		}
		for _, u := range t.Updated {
			var bad []string
			for _, f := range u.Fields {
				if !mutable[f] && f != t.Key { // the key is key_immutable's concern
					bad = append(bad, f)
				}
			}
			if len(bad) == 0 {
				continue
			}
			p.reportf(CodeFieldImmutable, fmt.Sprintf("update only %s; leave %s as stored", list, strings.Join(bad, ", ")),
				"the plan changes %s of %s row %s; only %s may change", strings.Join(bad, ", "), tbl, table.FormatValue(u.Key), list)
		}
		return nil
	}
}

func buildNonNegative(ps *params) checkFunc {
	tbl := ps.str("table")
	field := ps.str("field")
	return func(p *pass) error {
		t := p.changes(tbl)
		if t == nil {
			return nil
		}
		// The key is rendered for the message only (a run writes many rows that pass).
		check := func(key func() string, v any) {
			if x, ok := toFloat(v); ok && x < 0 {
				p.reportf(CodeNegativeValue, fmt.Sprintf("check %s before writing: if there is not enough, write nothing and set STATUS accordingly", field),
					"the plan sets %s of %s row %s to %s; it must stay >= 0", field, tbl, key(), formatExact(v))
			}
		}
		for _, r := range t.Inserted {
			check(func() string { return rowKey(t, r) }, r[field])
		}
		for _, u := range t.Updated {
			if containsString(u.Fields, field) {
				check(func() string { return table.FormatValue(u.Key) }, u.After[field])
			}
		}
		return nil
	}
}

// rowKey renders the key of a row of t for messages.
func rowKey(t *table.TableChanges, r table.Row) string {
	if t.Key == "" {
		return "(no key)"
	}
	return table.FormatValue(r[t.Key])
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// sameValue compares two key values: integers exactly, other numbers by value, everything else
// by equality.
func sameValue(a, b any) bool {
	if x, ok := toInt(a); ok {
		if y, ok := toInt(b); ok {
			return x == y
		}
	}
	if x, ok := toFloat(a); ok {
		y, ok := toFloat(b)
		return ok && x == y
	}
	switch a.(type) {
	case nil, bool, string:
		return a == b
	}
	return table.CompareKeys(a, b) == 0
}

// toFloat returns a number field value as float64.
func toFloat(v any) (float64, bool) {
	switch v := v.(type) {
	case float64:
		return v, true
	case int64:
		return float64(v), true
	case int:
		return float64(v), true
	case int32:
		return float64(v), true
	case float32:
		return float64(v), true
	}
	return 0, false
}

// toInt returns an integer field value as int64.
func toInt(v any) (int64, bool) {
	switch v := v.(type) {
	case int64:
		return v, true
	case int:
		return int64(v), true
	case int32:
		return int64(v), true
	}
	return 0, false
}

// formatExact renders a number as stored: integers exactly, floats as formatNumber does.
func formatExact(v any) string {
	if i, ok := toInt(v); ok {
		return fmt.Sprint(i)
	}
	if f, ok := toFloat(v); ok {
		return formatNumber(f)
	}
	return table.FormatValue(v)
}

// formatNumber renders a count: integers without a fraction, others with up to 6 digits.
func formatNumber(x float64) string {
	if x == float64(int64(x)) {
		return fmt.Sprintf("%d", int64(x))
	}
	return fmt.Sprintf("%g", x)
}

// money renders an amount with two decimals.
func money(x float64) string {
	if _, whole := cents(x); !whole {
		return strconv.FormatFloat(x, 'f', -1, 64) // every digit: 785.001 must not read 785.00
	}
	return fmt.Sprintf("%.2f", x)
}
