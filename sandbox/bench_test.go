package sandbox

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"go.starlark.net/starlark"

	"github.com/starplan/starplan/builtins"
)

// benchRows is 100 plain-dict rows in the lab's inventory shape, frozen once, as CPython's exec
// would see a list of dicts that is already in memory.
func benchRows() starlark.Value {
	rows := make([]any, 100)
	shapes := []string{"round", "wraparound", "cat-eye", "rectangular"}
	for i := range rows {
		rows[i] = map[string]any{
			"item_id":           fmt.Sprintf("SG%03d", i+1),
			"name":              fmt.Sprintf("Style %d", i+1),
			"description":       fmt.Sprintf("A %s frame with polarised lenses, model %d.", shapes[i%len(shapes)], i),
			"quantity_in_stock": int64(i % 13),
			"price":             float64(40 + (i*7)%120),
		}
	}
	v := builtins.FromGo(rows)
	v.Freeze()
	return v
}

func benchEnv(guarded bool) *Env {
	env := NewEnv(builtins.Registry{
		{Name: "user_request", Group: builtins.GroupInput},
		{Name: "rows", Group: builtins.GroupDomain, Value: benchRows()},
	})
	env.unguarded = !guarded
	return env
}

func benchRun(b *testing.B, env *Env, src string) {
	req := Request{
		Reply:   src,
		Inputs:  map[string]any{"user_request": "Do you have any round sunglasses in stock that are under $100?"},
		Globals: []string{"answer_text", "STATUS"}, // as the engine asks
	}
	res := env.Run(context.Background(), req)
	require.Equal(b, OutcomeOK, res.Outcome, res.Diagnostics.String())
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		env.Run(context.Background(), req)
	}
}

// BenchmarkTrivialPlan: extract + pycompat + check + run of the smallest valid plan.
// Target: ≤ 30 µs.
func BenchmarkTrivialPlan(b *testing.B) {
	benchRun(b, benchEnv(true), "<execute_python>\nanswer_text = \"hi\"\nSTATUS = \"success\"\n</execute_python>")
}

// BenchmarkLabPlan: a 40-line plan in the lab's style over 100 plain-dict rows, with
// f-strings, comprehensions and sums. Target: ≤ 150 µs; guarded within 10% of unguarded.
func BenchmarkLabPlan(b *testing.B) {
	src, err := os.ReadFile("../testdata/bench/lab_plan.star")
	require.NoError(b, err)
	b.Run("guarded", func(b *testing.B) { benchRun(b, benchEnv(true), string(src)) })
	b.Run("unguarded", func(b *testing.B) { benchRun(b, benchEnv(false), string(src)) })
}
