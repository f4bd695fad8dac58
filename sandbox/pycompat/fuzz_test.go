package pycompat

import (
	"reflect"
	"strings"
	"testing"
)

var fuzzSeeds = []string{
	plainPlan,
	`x = f"{row['name']}: {price:.2f} {n:>5} {total:,.2f}" if a is not None else f'{b!r:>{w}}'`,
	"s = f'''a\n{b:>3}\nc''' + \"%5.1f|%-3s\" % (x,\n y) + '{0:>5}{0}'.format(v)",
	"import math as m, json\nfrom math import (floor,\n ceil)\nok = 0 < m.pi < 4 and sum(x for x in y)",
	"def f():\n    import re\n    return [a for a in b if 1 < a <= 9]\n",
	"x = (a <\n b < \\\n c) # f\"{x}\"\n'''\nimport re\n'''",
	`s = "%(a)5d %(b)s" % d; t = "{x:>3}{x}".format(x=v); u = "{:{w}}".format(1, w=2)`,
	`s = f"{f'{f"{x}"}'}" + f"{x=}" + f"{'{'}" + f"\N{BULLET}"`,
	"x = a is \\\n not None\nfrom . import y\nfrom os import *",
	"\"\"\"unterminated\nf'{\n(((\n",
}

// FuzzTranslate checks that Translate never panics (a recovered panic shows as CodeInternal),
// keeps the line count, changes nothing when it reports no rewrite, leaves nothing for a second
// pass when its output parses, and keeps a program that already parses as Starlark parseable.
func FuzzTranslate(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	for _, c := range translateCases {
		f.Add(c.in)
	}
	f.Fuzz(func(t *testing.T, src string) {
		r := Translate(src, testOpts)
		for _, d := range r.Diagnostics {
			if d.Code == CodeInternal {
				t.Fatalf("internal error: %s\ninput: %q", d, src)
			}
			if d.Line < 1 || d.Line > lineEnds(src)+1 || d.Hint == "" {
				t.Fatalf("bad diagnostic %s\ninput: %q", d, src)
			}
		}
		if got, want := lineEnds(r.Source), lineEnds(src); got != want {
			t.Fatalf("line count %d, want %d\ninput: %q\noutput: %q", got, want, src, r.Source)
		}
		if len(r.Rewrites) == 0 && r.Source != src {
			t.Fatalf("output changed without a rewrite\ninput: %q\noutput: %q", src, r.Source)
		}
		if full := translate(src, testOpts, false); !reflect.DeepEqual(r, full) {
			t.Fatalf("rendering the flagged lines differs from rendering every token\ninput: %q\nlines: %#v\nfull: %#v", src, r, full)
		}
		if !hasLoneCR(src) && !mayNeedRewrite(src) && len(r.Rewrites)+len(r.Diagnostics) > 0 {
			t.Fatalf("the pre-scan missed a rewrite\ninput: %q", src)
		}
		// A translation that yields a valid program is complete: a second pass finds nothing.
		// (Otherwise, say around an implicit string concatenation, which is not Starlark, a
		// rewrite can change how the invalid neighbourhood reads; the checker rejects it anyway.)
		if _, err := dialect.Parse("out.star", r.Source, 0); err == nil {
			if again := Translate(r.Source, testOpts); len(again.Rewrites) > 0 {
				t.Fatalf("a second pass rewrote again (%s)\ninput: %q\nfirst: %q\nsecond: %q", again.Rewrites[0].Rule, src, r.Source, again.Source)
			}
		}
		if _, err := dialect.Parse("in.star", src, 0); err == nil {
			if _, err := dialect.Parse("out.star", r.Source, 0); err != nil {
				t.Fatalf("valid Starlark became invalid: %v\ninput: %q\noutput: %q", err, src, r.Source)
			}
		}
	})
}

// lineEnds counts line ends as Starlark does: LF, CR LF and a lone CR.
func lineEnds(s string) int {
	return strings.Count(strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(s), "\n")
}

// BenchmarkTranslate measures a 40-line plan with nothing to rewrite (the fast path) and the
// same size of plan full of rewrites.
func BenchmarkTranslate(b *testing.B) {
	rewrites := strings.Repeat(`import math
from math import floor
total = sum(r["price"] for r in rows if r["price"] is not None)
line = f"{r['name']:<12} {r['price']:>8.2f} {r['qty']:>5}"
ok = [r for r in rows if 70 <= r["price"] <= 100]
s = "%-10s %6.2f" % (name, price) + "{:>5}".format(n)
`, 7)[:]
	b.Run("no-rewrite", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Translate(plainPlan, testOpts)
		}
	})
	b.Run("rewrites", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Translate(rewrites, testOpts)
		}
	})
	b.Run("lab-style", func(b *testing.B) {
		// The 40-line plan: a few f-strings, a comprehension and a sum.
		src := labPlan
		b.ReportAllocs()
		for b.Loop() {
			Translate(src, testOpts)
		}
	})
	b.Run("no-rewrite-full-path", func(b *testing.B) {
		// A plan whose triggers turn out to need nothing (comprehensions, % on strings).
		src := plainPlan + `x = "%s" % y` + "\n"
		b.ReportAllocs()
		for b.Loop() {
			Translate(src, testOpts)
		}
	})
}

// labPlan is a 40-line plan in the lab's style.
const labPlan = `rows = inventory_tbl.all()
threshold = 10
low = [r for r in rows if r["quantity_in_stock"] < r["reorder_level"]]
total_value = sum(r["price"] * r["quantity_in_stock"] for r in rows)
by_cat = {}
for r in rows:
    cat = r["category"]
    if cat not in by_cat:
        by_cat[cat] = 0
    by_cat[cat] = by_cat[cat] + 1
lines = []
for r in low:
    need = r["reorder_level"] - r["quantity_in_stock"]
    lines.append(f"- {r['name']}: {r['quantity_in_stock']} left, order {need}")
cats = []
for cat in sorted(by_cat.keys()):
    cats.append(cat + " (" + str(by_cat[cat]) + ")")
expensive = [r["name"] for r in rows if r["price"] > 100]
cheap = [r["name"] for r in rows if r["price"] <= 5]
avg = total_value / len(rows) if rows else 0
summary = {
    "low": len(low),
    "total": total_value,
    "categories": cats,
}
if len(low) == 0:
    answer_text = "All items are above their reorder level."
    STATUS = "success"
else:
    header = f"{len(low)} items need reordering (stock value {total_value:,.2f}):"
    answer_text = header + "\n" + "\n".join(lines)
    STATUS = "success"
if expensive:
    answer_text = answer_text + "\nExpensive: " + ", ".join(expensive)
if cheap:
    answer_text = answer_text + "\nCheap: " + ", ".join(cheap)
answer_text = answer_text + f"\nAverage value per item: {avg:.2f}"
print(answer_text)
print(summary)
`
