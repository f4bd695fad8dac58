package sandbox

import (
	"slices"
	"strings"

	"go.starlark.net/syntax"

	"github.com/starplan/starplan/table"
)

// HelperWriters reads which of a domain's helpers (the source of its helpers.star) write which
// table: a public function that calls <table>_tbl.insert, .update or .remove, itself or through
// the file's other functions. It is what the hint of a plan's own write to a table only helpers
// may write names (table.Schema.Writes); a file that does not parse writes nothing.
func HelperWriters(src string) map[string][]string {
	f, err := fileOptions.Parse(HelpersFile, src, 0)
	if err != nil {
		return nil
	}
	writes := map[string]map[string]bool{} // function → tables it writes itself
	calls := map[string]map[string]bool{}  // function → the file's functions it calls
	var defs []string
	for _, stmt := range f.Stmts {
		def, ok := stmt.(*syntax.DefStmt)
		if !ok {
			continue
		}
		name := def.Name.Name
		defs = append(defs, name)
		writes[name], calls[name] = map[string]bool{}, map[string]bool{}
		syntax.Walk(def, func(n syntax.Node) bool {
			call, ok := n.(*syntax.CallExpr)
			if !ok {
				return true
			}
			switch fn := call.Fn.(type) {
			case *syntax.DotExpr:
				if x, ok := fn.X.(*syntax.Ident); ok && strings.HasSuffix(x.Name, "_tbl") &&
					(fn.Name.Name == "insert" || fn.Name.Name == "update" || fn.Name.Name == "remove") {
					writes[name][strings.TrimSuffix(x.Name, "_tbl")] = true
				}
			case *syntax.Ident:
				calls[name][fn.Name] = true
			}
			return true
		})
	}
	out := map[string][]string{}
	for _, name := range defs {
		if strings.HasPrefix(name, "_") {
			continue
		}
		seen := map[string]bool{}
		var walk func(string)
		walk = func(fn string) {
			if seen[fn] || writes[fn] == nil {
				return
			}
			seen[fn] = true
			for tbl := range writes[fn] {
				if !slices.Contains(out[tbl], name) {
					out[tbl] = append(out[tbl], name)
				}
			}
			for c := range calls[fn] {
				walk(c)
			}
		}
		walk(name)
	}
	for tbl := range out {
		slices.Sort(out[tbl])
	}
	return out
}

// anyHelpersOnly reports whether a table of schemas may be written only by helpers.
func anyHelpersOnly(schemas []*table.Schema) bool {
	return slices.ContainsFunc(schemas, func(s *table.Schema) bool { return s.Writes == table.WritesHelpers })
}
