package planjson

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var tools = []string{
	"inventory_tbl.get", "inventory_tbl.update", "inventory_tbl.search",
	"transactions_tbl.insert", "get_current_balance", "next_transaction_id", "now",
}

func codes(t *testing.T, src string) []string {
	t.Helper()
	prog, ds := Compile([]byte(src), tools)
	require.NotEmpty(t, ds, "want diagnostics, got the program:\n%s", prog)
	assert.Empty(t, prog)
	var out []string
	for _, d := range ds {
		out = append(out, d.Code)
		assert.Equal(t, "check", string(d.Stage))
		assert.NotEmpty(t, d.Message)
	}
	return out
}

func TestCompileInDependencyOrder(t *testing.T) {
	src := `{"steps": [
	  {"id": "done", "tool": "respond", "depends_on": ["sold"],
	   "args": {"status": "success", "answer_text": {"$expr": "f\"Sold 3 {item['name']}.\""}}},
	  {"id": "item", "tool": "inventory_tbl.get", "args": [{"name": {"$ieq": "wayfarer"}}]},
	  {"id": "sold", "tool": "inventory_tbl.update",
	   "args": [{"quantity_in_stock": {"$expr": "item['quantity_in_stock'] - 3"}}, {"$ref": "item"}]},
	  {"id": "sale", "tool": "transactions_tbl.insert", "depends_on": ["sold"], "args": [{
	     "transaction_id": {"$expr": "next_transaction_id(transactions_tbl)"},
	     "customer_name": "Alice \"A\" <x>", "transaction_summary": "3 x Wayfarer",
	     "transaction_amount": {"$expr": "item['price'] * 3"}, "flag": true, "none": null, "n": 1.5e2,
	     "tags": ["a", 2]}]}
	]}`
	prog, ds := Compile([]byte(src), tools)
	require.Empty(t, ds)
	assert.Equal(t, `item = inventory_tbl.get({"name": {"$ieq": "wayfarer"}})
sold = inventory_tbl.update({"quantity_in_stock": (item['quantity_in_stock'] - 3)}, item)
STATUS = "success"
answer_text = (f"Sold 3 {item['name']}.")
sale = transactions_tbl.insert({"customer_name": "Alice \"A\" \u003cx\u003e", "flag": True, "n": 1.5e2, "none": None, "tags": ["a", 2], "transaction_amount": (item['price'] * 3), "transaction_id": (next_transaction_id(transactions_tbl)), "transaction_summary": "3 x Wayfarer"})
`, prog)
}

func TestCompileRefsAndKeywords(t *testing.T) {
	prog, ds := Compile([]byte(`{"steps": [
	  {"id": "b", "tool": "get_current_balance", "args": {"tbl": {"$ref": "t"}}},
	  {"id": "t", "tool": "inventory_tbl.search", "args": [{"$ref": "x.item.name"}]},
	  {"id": "x", "tool": "now"}
	]}`), tools)
	require.Empty(t, ds)
	assert.Equal(t, "x = now()\nt = inventory_tbl.search(x[\"item\"][\"name\"])\nb = get_current_balance(tbl=t)\n", prog)
}

func TestCompileReportsEveryProblem(t *testing.T) {
	got := codes(t, `{"steps": [
	  {"id": "a", "tool": "inventory_tbl.gett", "args": []},
	  {"id": "a", "tool": "now"},
	  {"id": "Bad-Id", "tool": "now"},
	  {"id": "inventory_tbl", "tool": "now"},
	  {"id": "c", "tool": "now", "depends_on": ["nowhere"]},
	  {"id": "d", "tool": "now", "args": [{"$ref": "ghost.field"}]},
	  {"id": "e", "tool": "now", "args": 7},
	  {"id": "for", "tool": "now"},
	  {"tool": "now"}
	]}`)
	assert.Equal(t, []string{CodeStepID, CodeStepID, CodeStepID, CodeStepID, CodeStepID,
		CodeUnknownTool, CodeUnknownStep, CodeUnknownStep, CodeArgument}, got)

	_, ds := Compile([]byte(`{"steps": [{"id": "a", "tool": "inventory_tbl.gett"}]}`), tools)
	require.Len(t, ds, 1)
	assert.Equal(t, "did you mean inventory_tbl.get?", ds[0].Hint)
	assert.Contains(t, ds[0].Message, `step 1 ("a")`)
}

func TestCompileCycle(t *testing.T) {
	got := codes(t, `{"steps": [
	  {"id": "a", "tool": "now", "depends_on": ["c"]},
	  {"id": "b", "tool": "now", "args": [{"$ref": "a"}]},
	  {"id": "c", "tool": "now", "args": [{"$expr": "b + 1"}]},
	  {"id": "d", "tool": "now"}
	]}`)
	assert.Equal(t, []string{CodeCycle, CodeCycle, CodeCycle}, got)
	_, ds := Compile([]byte(`{"steps": [{"id": "a", "tool": "now", "depends_on": ["a"]}]}`), tools)
	require.Len(t, ds, 1)
	assert.Contains(t, ds[0].Message, "depends on itself")
}

func TestCompileRejectsWhatIsNotAPlan(t *testing.T) {
	for _, src := range []string{
		``, `[]`, `{"steps": []}`, `{"steps": [{"id": "a", "tool": "now"}]} {}`,
		`{"steps": [{"id": "a", "tool": "now", "extra": 1}]}`, `{"plan": []}`,
		`{"steps": [{"id": "a", "tool": "respond", "args": ["success"]}]}`,
		`{"steps": [{"id": "a", "tool": "respond", "args": {"status": "x", "mood": "y"}}]}`,
		`{"steps": [{"id": "a", "tool": "now", "args": [{"$expr": "1 +\n 2"}]}]}`,
		`{"steps": [{"id": "a", "tool": "now", "args": {"Bad Key": 1}}]}`,
	} {
		_, ds := Compile([]byte(src), tools)
		assert.NotEmpty(t, ds, "%s", src)
	}
	deep := `{"steps": [{"id": "a", "tool": "now", "args": [` + strings.Repeat("[", MaxDepth+2) + strings.Repeat("]", MaxDepth+2) + `]}]}`
	assert.Equal(t, []string{CodeArgument}, codes(t, deep))
	var many strings.Builder
	many.WriteString(`{"steps": [`)
	for i := range MaxSteps + 1 {
		if i > 0 {
			many.WriteString(",")
		}
		many.WriteString(`{"id": "s` + strings.Repeat("x", i%5) + `", "tool": "now"}`)
	}
	many.WriteString(`]}`)
	assert.Equal(t, []string{CodeInvalid}, codes(t, many.String()))
}

// FuzzCompile: any input compiles to a program or to diagnostics, never both, never a panic,
// and a compiled program has one line per step (respond: one or two).
func FuzzCompile(f *testing.F) {
	f.Add([]byte(`{"steps": [{"id": "a", "tool": "now"}, {"id": "b", "tool": "respond", "args": {"status": "success", "answer_text": {"$ref": "a"}}}]}`))
	f.Add([]byte(`{"steps": [{"id": "a", "tool": "inventory_tbl.get", "args": [{"name": {"$expr": "x"}}], "depends_on": ["a"]}]}`))
	f.Add([]byte(`{"steps": [{"id": "a", "tool": "now", "args": [[[[{"$ref": "a.b"}]]]]}]}`))
	f.Fuzz(func(t *testing.T, src []byte) {
		prog, ds := Compile(src, tools)
		if (prog == "") == (len(ds) == 0) {
			t.Fatalf("want a program or diagnostics: %q, %v", prog, ds)
		}
	})
}

// An $expr is one expression: it cannot add statements no step declares, or hide the rest of a
// line in a comment (found in review: "0); inventory_tbl.update(...); (0" updated rows the plan
// never listed, and "0 # <execute_python>..." cut the program).
func TestExprIsOneExpression(t *testing.T) {
	for _, e := range []string{
		`'x'); inventory_tbl.update({'price': 0}, lambda r: True); ('y'`,
		`0 # <execute_python>x = 1`,
		`1; 2`,
		`x = 1`,
		`lambda: 1)(`,
	} {
		src := `{"steps": [{"id": "a", "tool": "now", "args": [{"$expr": ` + quote(e) + `}]}]}`
		assert.Equal(t, []string{CodeArgument}, codes(t, src), e)
	}
	for _, e := range []string{`"# not a comment"`, `f"{x['a']} # {y}"`, `[r for r in rows if r['n'] > 1]`, `lambda r: r['price'] < 100`} {
		src := `{"steps": [{"id": "a", "tool": "now", "args": [{"$expr": ` + quote(e) + `}]}]}`
		_, ds := Compile([]byte(src), tools)
		assert.Empty(t, ds, e)
	}
}

// A hostile plan costs the compiler little: a step naming an unknown step 250,000 times is one
// diagnostic, and the compiler stops after MaxDiagnostics problems (found in review: 37 s of CPU
// and 2.1 GB for one 1 MiB plan).
func TestCompileIsBoundedOnHostilePlans(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"steps": [{"id": "a", "tool": "now", "depends_on": [`)
	for i := range 250_000 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"z"`)
	}
	b.WriteString(`]}]}`)
	_, ds := Compile([]byte(b.String()), tools)
	require.Len(t, ds, 1)
	assert.Contains(t, ds[0].Message, "depends_on names 250000 steps")

	b.Reset()
	b.WriteString(`{"steps": [`)
	for i := range MaxSteps {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"id": "s` + strings.Repeat("x", i%40) + `_` + string(rune('a'+i%26)) + `", "tool": "` + strings.Repeat("q", 1000) + `", "depends_on": ["nope1", "nope2"]}`)
	}
	b.WriteString(`]}`)
	_, ds = Compile([]byte(b.String()), tools)
	assert.Len(t, ds, MaxDiagnostics+1, "at most MaxDiagnostics, then one saying the compiler stopped")
	assert.Contains(t, ds[len(ds)-1].Message, "stopped after")
}
