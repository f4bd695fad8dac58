package sandbox

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.starlark.net/starlark"

	"github.com/starplan/starplan/builtins"
	"github.com/starplan/starplan/sandbox/pycompat"
)

func BenchmarkTmpPhases(b *testing.B) {
	env, st := inventoryEnv(&testing.T{})
	src0, _ := os.ReadFile("../testdata/examples/03_two_item_order.star")
	n := 0
	text := func() string {
		n++
		return strings.Replace(string(src0), `"Walk-in customer"`, `"Walk-in customer `+strconv.Itoa(n)+`"`, 1)
	}
	opts := pycompat.Options{Modules: env.modules}
	b.Run("extract", func(b *testing.B) {
		s := text()
		for b.Loop() {
			Extract(s)
		}
	})
	b.Run("checkText", func(b *testing.B) {
		s := text()
		for b.Loop() {
			checkText(s)
		}
	})
	b.Run("translate", func(b *testing.B) {
		s := text()
		b.ReportAllocs()
		for b.Loop() {
			pycompat.Translate(s, opts)
		}
	})
	rw := pycompat.Translate(text(), opts).Source
	b.Run("fastParse", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			fastParse(planFile, rw)
		}
	})
	b.Run("checkTree", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			f, _, _ := fastParse(planFile, rw)
			b.StartTimer()
			env.checkTree(f, new(builtins.NumericNames))
		}
	})
	b.Run("checkTree+guard", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			f, _, _ := fastParse(planFile, rw)
			b.StartTimer()
			seen := new(builtins.NumericNames)
			env.checkTree(f, seen)
			guardTree(f, seen)
		}
	})
	b.Run("fileProgram", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			f, _, _ := fastParse(planFile, rw)
			seen := new(builtins.NumericNames)
			env.checkTree(f, seen)
			guardTree(f, seen)
			b.StartTimer()
			starlark.FileProgram(f, env.isPredeclared)
		}
	})
	b.Run("check-all", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			s := text()
			b.StartTimer()
			env.checkProgram(s, Limits{}.Effective(Limits{}), &Phases{})
		}
	})
	c := env.CheckProgram(text(), Limits{})
	b.Run("exec", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			stage := st.Stage()
			req := Request{Inputs: map[string]any{"user_request": "x", InputSubject: ""}, View: stage, Now: time.Now(), Globals: []string{"STATUS", "answer_text"}}
			b.StartTimer()
			res := &Result{}
			env.exec(context.Background(), c.Program, req, Limits{}.Effective(Limits{}), res)
			if res.Outcome != OutcomeOK {
				b.Fatal(res.Diagnostics)
			}
		}
	})
}
