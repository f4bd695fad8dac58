package builtins

import (
	"errors"
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarktest"
	"go.starlark.net/syntax"
)

// scriptOptions is the sandbox's dialect.
var scriptOptions = &syntax.FileOptions{Set: true, While: true, TopLevelControl: true, GlobalReassign: true}

// TestScripts runs every testdata/builtins/*.star with the language builtins, the guards and
// the assert module predeclared, under a 16 MiB budget.
func TestScripts(t *testing.T) {
	files, err := filepath.Glob("../testdata/builtins/*.star")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	assertModule, err := starlarktest.LoadAssertModule()
	require.NoError(t, err)
	predeclared := starlark.StringDict{}
	for k, v := range append(Language(), Guards()...).Predeclared() {
		predeclared[k] = v
	}
	for k, v := range assertModule {
		predeclared[k] = v
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			thread := &starlark.Thread{Name: file}
			starlarktest.SetReporter(thread, t)
			SetBudget(thread, NewBudget(16<<20))
			_, err := starlark.ExecFileOptions(scriptOptions, thread, file, nil, predeclared)
			if err != nil {
				var evalErr *starlark.EvalError
				if errors.As(err, &evalErr) {
					t.Fatal(evalErr.Backtrace())
				}
				t.Fatal(err)
			}
		})
	}
}

func TestLanguageRegistry(t *testing.T) {
	reg := Language()
	seen := map[string]bool{}
	for _, h := range reg {
		assert.False(t, seen[h.Name], "duplicate %s", h.Name)
		seen[h.Name] = true
		assert.Contains(t, []Group{GroupLanguage, GroupModule}, h.Group, h.Name)
		assert.NotNil(t, h.Value, h.Name)
		assert.NotEmpty(t, h.Signature, h.Name)
		assert.NotEmpty(t, h.Doc, h.Name)
		assert.NotContains(t, h.Doc, "\n", h.Name)
		if assert.NotEmpty(t, h.Example, h.Name) {
			_, err := scriptOptions.Parse(h.Name+".example", h.Example, 0)
			assert.NoError(t, err, "example of %s", h.Name)
		}
		if h.Group == GroupModule {
			assert.Equal(t, "module", h.Value.Type(), h.Name)
		}
	}
	for _, name := range []string{"sum", "round", "pow", "isinstance", "format", "math", "json", "re"} {
		assert.True(t, seen[name], name)
	}
	// The guards own these names; the language registry must not shadow them.
	for _, name := range []string{"list", "tuple", "sorted", "set", "enumerate", "zip", "reversed", "dict", "min", "max", "print"} {
		assert.False(t, seen[name], name)
	}
}

// call calls builtin fn with args on a fresh thread.
func call(t *testing.T, fn func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error), name string, args ...starlark.Value) (starlark.Value, error) {
	t.Helper()
	return starlark.Call(new(starlark.Thread), starlark.NewBuiltin(name, fn), starlark.Tuple(args), nil)
}

// show renders a result with its type, floats as Python's repr.
func show(v starlark.Value) string {
	if f, ok := v.(starlark.Float); ok {
		return "float " + FloatRepr(float64(f))
	}
	return v.Type() + " " + v.String()
}

func slist(vs ...starlark.Value) *starlark.List { return starlark.NewList(vs) }

func ints(xs ...int64) []starlark.Value {
	out := make([]starlark.Value, len(xs))
	for i, x := range xs {
		out[i] = starlark.MakeInt64(x)
	}
	return out
}

func floats(xs ...float64) []starlark.Value {
	out := make([]starlark.Value, len(xs))
	for i, x := range xs {
		out[i] = starlark.Float(x)
	}
	return out
}

func TestSum(t *testing.T) {
	tenth := floats(0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1)
	for _, c := range []struct {
		args []starlark.Value
		want string // the result's repr, with its type
	}{
		{[]starlark.Value{slist(ints(1, 2, 3)...)}, "int 6"},
		{[]starlark.Value{slist(starlark.MakeInt(1), starlark.Float(2.5))}, "float 3.5"},
		{[]starlark.Value{slist(tenth...)}, "float 1.0"}, // Python 3.12 (3.11 gives 0.9999999999999999)
		{[]starlark.Value{slist(floats(1e100, 1, -1e100)...)}, "float 1.0"},
		{[]starlark.Value{slist(floats(negZero)...)}, "float 0.0"}, // 0 + -0.0
		{[]starlark.Value{slist(floats(negZero)...), starlark.Float(negZero)}, "float -0.0"},
		{[]starlark.Value{slist(floats(math.Inf(1), 1)...)}, "float inf"},
		{[]starlark.Value{slist(starlark.True, starlark.True)}, "int 2"},
		{[]starlark.Value{slist(), starlark.Float(1.5)}, "float 1.5"},
		{[]starlark.Value{slist(slist(ints(1)...), slist(ints(2)...)), slist()}, "list [1, 2]"},
	} {
		v, err := call(t, sum, "sum", c.args...)
		if assert.NoError(t, err, "sum%v", c.args) {
			assert.Equal(t, c.want, show(v), "sum%v", c.args)
		}
	}
	_, err := call(t, sum, "sum", slist(starlark.String("a")))
	assert.EqualError(t, err, "sum: sum() can't sum strings [use ''.join(seq) instead]")
}

// TestSumStopsWhenCancelled: work inside a builtin is not interpreter steps, so sum must poll
// the thread's cancellation itself, or sum(range(10**12)) would run for an hour. The thread is
// cancelled before the call, so the test does not race a clock: sum must notice at its first
// poll.
func TestSumStopsWhenCancelled(t *testing.T) {
	thread := new(starlark.Thread)
	huge, err := starlark.Call(thread, starlark.Universe["range"], starlark.Tuple{starlark.MakeInt64(1e12)}, nil)
	require.NoError(t, err)
	thread.Cancel("time limit")
	_, err = starlark.Call(thread, starlark.NewBuiltin("sum", sum), starlark.Tuple{huge}, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cancelled: time limit")
}

func TestSumChargesListConcatenation(t *testing.T) {
	thread := new(starlark.Thread)
	SetBudget(thread, NewBudget(1<<20))
	big := starlark.NewList(make([]starlark.Value, 100_000)) // 1.6 MB of slots per copy
	for i := range 100_000 {
		_ = big.SetIndex(i, starlark.None)
	}
	_, err := starlark.Call(thread, starlark.NewBuiltin("sum", sum), starlark.Tuple{slist(big, big, big), slist()}, nil)
	var me *MemoryError
	require.True(t, errors.As(err, &me), "got %v", err)
	assert.Equal(t, "sum", me.Op)
}

func TestRound(t *testing.T) {
	// Python 3.11's outputs.
	for _, c := range []struct {
		x, nd starlark.Value
		want  string
	}{
		{starlark.Float(2.5), nil, "int 2"},
		{starlark.Float(3.5), nil, "int 4"},
		{starlark.Float(-0.5), nil, "int 0"},
		{starlark.Float(1e300), nil, "int 1000000000000000052504760255204420248704468581108159154915854115511802457988908195786371375080447864043704443832883878176942523235360430575644792184786706982848387200926575803737830233794788090059368953234970799945081119038967640880074652742780142494579258788820056842838115669472196386865459400540160"},
		{starlark.Float(2.675), starlark.MakeInt(2), "float 2.67"},
		{starlark.Float(0.125), starlark.MakeInt(2), "float 0.12"},
		{starlark.Float(-0.001), starlark.MakeInt(2), "float -0.0"},
		{starlark.Float(1234.5), starlark.MakeInt(-2), "float 1200.0"},
		{starlark.Float(negZero), starlark.MakeInt(-1), "float -0.0"},
		{starlark.Float(1.23456789e10), starlark.MakeInt(-5), "float 12345700000.0"},
		{starlark.Float(5e-324), starlark.MakeInt(400), "float 5e-324"},
		{starlark.Float(123.0), starlark.MakeInt(-400), "float 0.0"},
		{starlark.MakeInt(1250), starlark.MakeInt(-2), "int 1200"},
		{starlark.MakeInt(1350), starlark.MakeInt(-2), "int 1400"},
		{starlark.MakeInt(-1250), starlark.MakeInt(-2), "int -1200"},
		{starlark.MakeInt(-1251), starlark.MakeInt(-2), "int -1300"},
		{starlark.MakeInt(7), starlark.MakeInt(2), "int 7"},
		{starlark.True, nil, "int 1"},
		{starlark.Float(math.Inf(-1)), starlark.MakeInt(2), "float -inf"},
	} {
		args := []starlark.Value{c.x}
		if c.nd != nil {
			args = append(args, c.nd)
		}
		v, err := call(t, round, "round", args...)
		if assert.NoError(t, err, "round%v", args) {
			assert.Equal(t, c.want, show(v), "round%v", args)
		}
	}
	_, err := call(t, round, "round", starlark.Float(math.Inf(1)))
	assert.EqualError(t, err, "round: cannot convert float infinity to integer")
	_, err = call(t, round, "round", starlark.Float(1.7976931348623157e308), starlark.MakeInt(-308))
	assert.EqualError(t, err, "round: rounded value too large to represent")
}

func TestPow(t *testing.T) {
	for _, c := range []struct {
		args []starlark.Value
		want string
	}{
		{ints(2, 10), "int 1024"},
		{ints(2, -2), "float 0.25"},
		{ints(-2, 3), "int -8"},
		{ints(3, -1, 7), "int 5"},
		{ints(2, 3, -5), "int -2"},
		{ints(5, 0, 1), "int 0"},
		{ints(-1, 1_000_000_000_000), "int 1"},
		{[]starlark.Value{starlark.Float(-8), starlark.Float(3)}, "float -512.0"},
		{[]starlark.Value{starlark.Float(math.Inf(-1)), starlark.MakeInt(3)}, "float -inf"},
		{[]starlark.Value{starlark.Float(math.NaN()), starlark.MakeInt(0)}, "float 1.0"},
		{[]starlark.Value{starlark.Float(1), starlark.Float(math.NaN())}, "float 1.0"},
		{[]starlark.Value{starlark.Float(0.5), starlark.Float(math.Inf(1))}, "float 0.0"},
	} {
		v, err := call(t, pow, "pow", c.args...)
		if assert.NoError(t, err, "pow%v", c.args) {
			assert.Equal(t, c.want, show(v), "pow%v", c.args)
		}
	}
}

// TestPowRefusesHugeResults: pow(10, 10**9) would be a 415 MB integer taking minutes to compute.
func TestPowRefusesHugeResults(t *testing.T) {
	_, err := call(t, pow, "pow", starlark.MakeInt(10), starlark.MakeInt(1_000_000_000))
	var me *MemoryError
	require.True(t, errors.As(err, &me), "got %v", err)
	assert.Equal(t, "pow", me.Op)
	assert.Equal(t, int64(MaxIntResultBytes), me.Limit)

	// Just over and just under the cap.
	_, err = call(t, pow, "pow", starlark.MakeInt(2), starlark.MakeInt(8*MaxIntResultBytes+64))
	assert.True(t, errors.As(err, &me), "got %v", err)
	v, err := call(t, pow, "pow", starlark.MakeInt(2), starlark.MakeInt(8*MaxIntResultBytes-64))
	require.NoError(t, err)
	assert.Equal(t, 8*MaxIntResultBytes-63, v.(starlark.Int).BigInt().BitLen())
}

func TestIsinstance(t *testing.T) {
	u := starlark.Universe
	guardedList := starlark.NewBuiltin("list", func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
		return starlark.None, nil
	})
	for _, c := range []struct {
		x, typ starlark.Value
		want   bool
	}{
		{starlark.String("a"), u["str"], true},
		{starlark.True, u["int"], true},
		{starlark.MakeInt(1), u["bool"], false},
		{starlark.MakeInt(1), u["float"], false},
		{slist(), guardedList, true}, // the guards replace list with a builtin of the same name
		{starlark.NewDict(0), starlark.Tuple{u["list"], u["dict"]}, true},
		{starlark.None, starlark.Tuple{u["str"]}, false},
		{dictLike{}, u["dict"], true},
	} {
		v, err := call(t, isinstance, "isinstance", c.x, c.typ)
		if assert.NoError(t, err) {
			assert.Equal(t, starlark.Bool(c.want), v, "isinstance(%s, %s)", c.x, c.typ)
		}
	}
}

// dictLike stands for a lazy table row: any value whose Type is "dict".
type dictLike struct{}

func (dictLike) String() string        { return "row" }
func (dictLike) Type() string          { return "dict" }
func (dictLike) Freeze()               {}
func (dictLike) Truth() starlark.Bool  { return true }
func (dictLike) Hash() (uint32, error) { return 0, nil }

func TestConcurrentUse(t *testing.T) {
	predeclared := Language().Predeclared()
	const program = `
for i in range(50):
    p = re.compile(r"(\w+)-(%d)" % (i % 7))
    assert_eq(p.sub(r"\2", "a-%d b-1" % (i % 7)), "%d b-1" % (i % 7) if i % 7 != 1 else "1 1")
    assert_eq(format(i * 1000.5, ",.1f") != "", True)
    assert_eq(round(sum([0.1] * 10), 2), 1.0)
    assert_eq(json.loads(json.dumps({"i": i}))["i"], i)
`
	assertEq := starlark.NewBuiltin("assert_eq", func(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
		if ok, err := starlark.Equal(args[0], args[1]); err != nil || !ok {
			return nil, errors.New(args[0].String() + " != " + args[1].String())
		}
		return starlark.None, nil
	})
	env := starlark.StringDict{"assert_eq": assertEq}
	for k, v := range predeclared {
		env[k] = v
	}
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			_, err := starlark.ExecFileOptions(scriptOptions, new(starlark.Thread), "concurrent.star", program, env)
			errs <- err
		}()
	}
	for range 8 {
		assert.NoError(t, <-errs)
	}
}

func BenchmarkRound(b *testing.B) {
	fn := starlark.NewBuiltin("round", round)
	thread := new(starlark.Thread)
	args := starlark.Tuple{starlark.Float(1234.5678), starlark.MakeInt(2)}
	for b.Loop() {
		if _, err := starlark.Call(thread, fn, args, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRoundFloat(b *testing.B) {
	for b.Loop() {
		if f, _ := RoundFloat(2.675, 2); f != 2.67 {
			b.Fatal(f)
		}
	}
}
