package tables

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.starlark.net/syntax"

	"github.com/starplan/starplan/builtins"
	"github.com/starplan/starplan/diag"
)

// staticCheck runs the registry's call checks over every call of a helper in src, as the
// sandbox's checker does (it also skips names a function binds, which these programs do not).
func staticCheck(t *testing.T, reg builtins.Registry, src string) diag.List {
	t.Helper()
	f, err := fileOptions.Parse("plan.star", src, 0)
	require.NoError(t, err)
	var ds diag.List
	syntax.Walk(f, func(n syntax.Node) bool {
		call, ok := n.(*syntax.CallExpr)
		if !ok {
			return true
		}
		name, method := "", ""
		switch fn := call.Fn.(type) {
		case *syntax.Ident:
			name = fn.Name
		case *syntax.DotExpr:
			if x, ok := fn.X.(*syntax.Ident); ok {
				name, method = x.Name, fn.Name.Name
			}
		}
		if h, ok := reg.Lookup(name); ok && h.Check != nil {
			ds = append(ds, h.Check(method, call)...)
		}
		return true
	})
	return ds
}

// Each rule of the static check, with where it points and what it suggests. Every flagged
// program also fails at run time (the check never refuses what could run), and every program
// marked valid runs.
func TestCheckCalls(t *testing.T) {
	type want struct {
		code string
		line int
		at   string // the diagnostic points at the last occurrence of this text on its line
		hint string // "": not compared
	}
	tests := []struct {
		name  string
		src   string
		want  []want
		valid bool // the program runs without error
	}{
		// unknown-field: rows to insert, fields to update, where-filters at every depth.
		{"insert field", `inventory_tbl.insert({"item_id": "SG007", "name": "Cat Eye", "quantity": 5, "price": 75.0})`,
			[]want{{builtins.CodeUnknownField, 1, `"quantity"`, "did you mean quantity_in_stock?"}}, false},
		{"insert two fields", `inventory_tbl.insert({"item_id": "SG007", "nam": "x", "prise": 1.0})`,
			[]want{{builtins.CodeUnknownField, 1, `"nam"`, "did you mean name?"}, {builtins.CodeUnknownField, 1, `"prise"`, "did you mean price?"}}, false},
		{"update fields", `inventory_tbl.update({"qty": 1}, {"item_id": "SG001"})`,
			[]want{{builtins.CodeUnknownField, 1, `"qty"`, "did you mean quantity_in_stock?"}}, false},
		{"update where", `inventory_tbl.update({"price": 1.0}, {"itemid": "SG001"})`,
			[]want{{builtins.CodeUnknownField, 1, `"itemid"`, "did you mean item_id?"}}, false},
		{"update keywords", `inventory_tbl.update(where={"itemid": "SG001"}, fields={"prce": 1.0})`,
			[]want{{builtins.CodeUnknownField, 1, `"itemid"`, "did you mean item_id?"}, {builtins.CodeUnknownField, 1, `"prce"`, "did you mean price?"}}, false},
		{"search where", `rows = inventory_tbl.search({"nmae": "Aviator"})`,
			[]want{{builtins.CodeUnknownField, 1, `"nmae"`, "did you mean name?"}}, false},
		{"where in parentheses", `rows = inventory_tbl.search(({("nmae"): "Aviator"}))`,
			[]want{{builtins.CodeUnknownField, 1, `"nmae"`, "did you mean name?"}}, false},
		{"get where", "x = 1\nrow = transactions_tbl.get({\"customer\": \"Alice\"})",
			[]want{{builtins.CodeUnknownField, 2, `"customer"`, "did you mean customer_name?"}}, false},
		{"count $or element", `n = inventory_tbl.count({"$or": [{"name": "Aviator"}, {"prise": 1}]})`,
			[]want{{builtins.CodeUnknownField, 1, `"prise"`, "did you mean price?"}}, false},
		{"remove nested $and in $or", `inventory_tbl.remove({"$or": [{"$and": ({"name": "A"}, {"qty": 0})}]})`,
			[]want{{builtins.CodeUnknownField, 1, `"qty"`, "did you mean quantity_in_stock?"}}, false},
		// unknown-operator: the where compiler's own words and suggestions.
		{"alias operator", `row = inventory_tbl.get({"price": {"$le": 100}})`,
			[]want{{builtins.CodeUnknownOperator, 1, `"$le"`, "did you mean $lte?"}}, false},
		{"misspelt operator in $and", `inventory_tbl.remove({"$and": [{"name": {"$startwith": "A"}}]})`,
			[]want{{builtins.CodeUnknownOperator, 1, `"$startwith"`, "did you mean $startswith?"}}, false},
		{"operator without $", `rows = inventory_tbl.search({"price": {"lt": 100}})`,
			[]want{{builtins.CodeUnknownOperator, 1, `"lt"`, "did you mean $lt?"}}, false},
		{"field operator at the top", `rows = inventory_tbl.search({"$lt": 100})`,
			[]want{{builtins.CodeUnknownOperator, 1, `"$lt"`, ""}}, false},
		{"logical operator in a field", `rows = inventory_tbl.search({"price": {"$or": [1]}})`,
			[]want{{builtins.CodeUnknownOperator, 1, `"$or"`, ""}}, false},
		{"unknown logical operator", `rows = inventory_tbl.search({"$ro": [{"name": "A"}]})`,
			[]want{{builtins.CodeUnknownOperator, 1, `"$ro"`, "did you mean $or?"}}, false},
		// wrong-arguments: the signature's parameters, declared once.
		{"missing where", `rows = inventory_tbl.search()`,
			[]want{{builtins.CodeWrongArguments, 1, ")", "call it as inventory_tbl.search(where) -> list of rows"}}, false},
		{"update without where", `inventory_tbl.update({"price": 1.0})`,
			[]want{{builtins.CodeWrongArguments, 1, ")", "call it as inventory_tbl.update(fields, where) -> int"}}, false},
		{"too many", `row = inventory_tbl.get({"name": "A"}, 1)`,
			[]want{{builtins.CodeWrongArguments, 1, "1", ""}}, false},
		{"all takes none", `rows = inventory_tbl.all(None)`,
			[]want{{builtins.CodeWrongArguments, 1, "None", ""}}, false},
		{"unknown keyword", `n = inventory_tbl.count(wher={"name": "A"})`,
			[]want{{builtins.CodeWrongArguments, 1, "wher", "did you mean where? call it as inventory_tbl.count(where=None) -> int"}}, false},
		{"keyword twice", `row = inventory_tbl.get_by_key("SG001", key="SG002")`,
			[]want{{builtins.CodeWrongArguments, 1, "key=", ""}}, false},
		{"now takes none", `t = now(1)`,
			[]want{{builtins.CodeWrongArguments, 1, "1", ""}}, false},

		// Never flagged: what is valid, and what the check cannot be sure of.
		{"valid filters", `rows = inventory_tbl.search({"name": {"$ieq": "aviator"}, "price": {"$gte": 50, "$lt": 100}, "$or": [{"item_id": "SG001"}, {"quantity_in_stock": {"$in": [1, 23]}}]})`, nil, true},
		{"valid writes", "inventory_tbl.update(fields={\"price\": 81.0}, where={\"item_id\": \"SG001\"})\nk = inventory_tbl.insert({\"item_id\": \"SG009\", \"name\": \"Cat Eye\", \"quantity_in_stock\": 5, \"price\": 75.0})", nil, true},
		{"optional arguments", "n = inventory_tbl.count()\nm = inventory_tbl.count(where=None)\nt = now()", nil, true},
		{"where function and rows", "rows = inventory_tbl.search(lambda row: row[\"price\"] < 100)\nrow = inventory_tbl.get_by_key(\"SG001\")\ninventory_tbl.update(row, row)", nil, true},
		{"computed key", "k = \"nmae\"\nrows = inventory_tbl.search({k: \"Aviator\"})", nil, false},
		{"computed dict", "w = {\"nmae\": 1}\nrows = inventory_tbl.search(w)", nil, false},
		{"dict built by a call", "rows = inventory_tbl.search(dict(nmae=1))", nil, false},
		{"computed operator dict", "ops = {\"$le\": 1}\nrows = inventory_tbl.search({\"price\": ops})", nil, false},
		{"*args", "args = [{\"nmae\": 1}]\nrows = inventory_tbl.search(*args)", nil, false},
		{"**kwargs", "kw = {\"where\": {\"nmae\": 1}}\nrows = inventory_tbl.search(**kw)", nil, false},
		{"unknown method", `rows = inventory_tbl.find({"nmae": 1})`, nil, false},
	}
	reg := Registry(testSchemas())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := staticCheck(t, reg, tt.src)
			require.Len(t, ds, len(tt.want), ds.String())
			for i, w := range tt.want {
				d := ds[i]
				assert.Equal(t, diag.StageCheck, d.Stage)
				assert.Equal(t, w.code, d.Code, d.String())
				assert.Equal(t, w.line, d.Line, "line: %s", d)
				line := strings.Split(tt.src, "\n")[w.line-1]
				assert.Equal(t, strings.LastIndex(line, w.at)+1, d.Col, "col: %s", d)
				assert.NotEmpty(t, d.Message)
				assert.NotEmpty(t, d.Hint)
				if w.hint != "" {
					assert.Equal(t, w.hint, d.Hint)
				}
			}
			_, err := newEnv(t).exec(t, tt.src, nil)
			switch {
			case len(tt.want) > 0:
				assert.Error(t, err, "a flagged call must fail at run time too")
			case tt.valid:
				assert.NoError(t, err)
			}
		})
	}
}

// The signatures in the reference are rendered from the parameters the check uses.
func TestSignaturesComeFromParams(t *testing.T) {
	reg := Registry(testSchemas())
	for name, want := range map[string]string{
		"tbl.update": "tbl.update(fields, where) -> int",
		"tbl.count":  "tbl.count(where=None) -> int",
		"tbl.all":    "tbl.all() -> list of rows",
		NameNow:      "now() -> str",
	} {
		h, ok := reg.Lookup(name)
		require.True(t, ok, name)
		assert.Equal(t, want, h.Signature)
	}
	for _, h := range reg {
		if h.Group == builtins.GroupTable && h.Value != nil || h.Group == builtins.GroupDomain {
			assert.NotNil(t, h.Check, "%s has no static check", h.Name)
		}
	}
}

// The run time and the check agree on every method's arity: a call the check says has the
// wrong arguments fails at run time for its arguments, and one it accepts is not refused for
// them.
func TestArityAgreesWithTheRun(t *testing.T) {
	reg := Registry(testSchemas())
	args := []string{`{"price": 80.0}`, `{"item_id": "SG001"}`, "3"}
	for _, m := range tableMethods {
		for n := range len(args) + 1 {
			list := slices.Clone(args[:n])
			if m.name == "get_by_key" && n > 0 {
				list[0] = `"SG001"`
			}
			args := strings.Join(list, ", ")
			src := "x = inventory_tbl." + m.name + "(" + args + ")"
			t.Run(src, func(t *testing.T) {
				flagged := staticCheck(t, reg, src).Has(builtins.CodeWrongArguments)
				_, err := newEnv(t).exec(t, src, nil)
				if flagged {
					assert.Error(t, err)
				} else if err != nil {
					assert.NotRegexp(t, `missing argument|got \d+ arguments|where is required|unexpected keyword`, err.Error())
				}
			})
		}
	}
}

// The same for the domain helpers, whose parameters are declared next to their registry entry.
func TestDomainHelperArityAgreesWithTheRun(t *testing.T) {
	reg := Registry(testSchemas())
	args := []string{"transactions_tbl", `"TXN"`, "3"}
	for _, h := range reg {
		if h.Group != builtins.GroupDomain {
			continue
		}
		for n := range len(args) + 1 {
			for _, kw := range []string{"", "tbl=transactions_tbl", "prefix=\"TXN\""} {
				list := slices.Clone(args[:n])
				if kw != "" {
					list = append(list, kw)
				}
				src := "x = " + h.Name + "(" + strings.Join(list, ", ") + ")"
				t.Run(src, func(t *testing.T) {
					flagged := staticCheck(t, reg, src).Has(builtins.CodeWrongArguments)
					_, err := newEnv(t).exec(t, src, nil)
					if flagged {
						assert.Error(t, err)
					} else {
						assert.NoError(t, err)
					}
				})
			}
		}
	}
}
