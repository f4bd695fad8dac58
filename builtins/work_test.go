package builtins

import (
	"errors"
	"math/big"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.starlark.net/starlark"

	"github.com/starplan/starplan/internal/testtier"
)

// Work is added to the thread's steps, and a charge that reaches the step limit stops the call
// before the work is done.
func TestChargeWorkCountsSteps(t *testing.T) {
	thread := new(starlark.Thread)
	thread.SetMaxExecutionSteps(5000)
	require.NoError(t, ChargeWork(thread, "op", 10))
	assert.Equal(t, uint64(10), thread.ExecutionSteps(), "a small charge is counted without a poll")
	require.NoError(t, ChargeWork(thread, "op", 3000))
	assert.GreaterOrEqual(t, thread.ExecutionSteps(), uint64(3010))
	err := ChargeWork(thread, "op", 3000)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cancelled")
}

// One call may not do more than MaxCallSteps of work, with or without a thread.
func TestChargeWorkRefusesOneHugeCall(t *testing.T) {
	for _, thread := range []*starlark.Thread{nil, new(starlark.Thread)} {
		err := ChargeWork(thread, "math.gcd", MaxCallSteps+1)
		var we *WorkError
		require.True(t, errors.As(err, &we), "got %v", err)
		assert.Equal(t, "step limit: math.gcd would take about 10.0 M steps of work, more than the 10.0 M one call may take: use smaller integers", we.Error())
	}
	require.NoError(t, ChargeWork(nil, "op", MaxCallSteps))
}

// The step limit stops big-integer work inside a builtin before it starts: math.gcd of two
// 150,000-bit integers is a few million steps of work, here it is refused at once by a small limit.
func TestBigIntWorkReachesTheStepLimit(t *testing.T) {
	thread := new(starlark.Thread)
	thread.SetMaxExecutionSteps(100_000)
	a := starlark.MakeBigInt(new(big.Int).Lsh(big.NewInt(3), 150_000))
	gcd := newMathModule().Members["gcd"]
	_, err := starlark.Call(thread, gcd, starlark.Tuple{a, a}, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cancelled: too many steps")
}

// a << b keeps to the cap on integer size that every other operation keeps to.
func TestShiftKeepsToTheIntegerCap(t *testing.T) {
	thread := new(starlark.Thread)
	shl := starlark.NewBuiltin(nameShl, guardShl)
	nearCap := starlark.MakeBigInt(new(big.Int).Lsh(big.NewInt(1), 8*MaxIntResultBytes-100))
	v, err := starlark.Call(thread, shl, starlark.Tuple{nearCap, starlark.MakeInt(50)}, nil)
	require.NoError(t, err)
	assert.Equal(t, 8*MaxIntResultBytes-49, v.(starlark.Int).BigInt().BitLen())
	_, err = starlark.Call(thread, shl, starlark.Tuple{nearCap, starlark.MakeInt(200)}, nil)
	var me *MemoryError
	require.True(t, errors.As(err, &me), "got %v", err)
	assert.Equal(t, intCapRule, me.Rule)
	// Other operands keep Starlark's own errors.
	_, err = starlark.Call(thread, shl, starlark.Tuple{starlark.MakeInt(1), starlark.MakeInt(600)}, nil)
	assert.EqualError(t, err, "shift count too large: 600")
}

// json.decode is charged at least what the decoded values really take: "{}" is 2 bytes of text
// and about 600 bytes of dict.
func TestJSONDecodeIsChargedItsRealCost(t *testing.T) {
	decode := newJSONModule().Members["decode"]
	n := testtier.Size(25_000, 100_000) // values of each kind: the smallest list takes 400 KB
	for _, item := range []string{"{}", "[]", `""`, `"abcdefgh"`, "0", "-1.5e3", "true", "null", `{"a":1}`, `{"a":{}}`, `[[],[]]`, `{"k":[1,2,"x"]}`} {
		text := "[" + strings.Repeat(item+",", n-1) + item + "]"
		est, err := scanJSON(text)
		require.NoError(t, err)
		runtime.GC()
		before := HeapInUse()
		thread := new(starlark.Thread)
		SetBudget(thread, NewBudget(1<<30))
		v, err := starlark.Call(thread, decode, starlark.Tuple{starlark.String(text)}, nil)
		require.NoError(t, err)
		runtime.GC()
		live := HeapInUse() - before
		runtime.KeepAlive(v)
		assert.GreaterOrEqual(t, est, live, "%s: charged %d bytes for %d live", item, est, live)
		assert.LessOrEqual(t, est, 4*max(live, int64(len(text))), "%s: charged %d bytes for %d live", item, est, live)
	}
}

// Text built by appending (print, str, join, % and format) peaks at about twice its size, and is
// charged so: 40 MiB of text does not fit a 64 MiB budget.
func TestTextBuiltByAppendingIsChargedTwice(t *testing.T) {
	sep := starlark.String(strings.Repeat("y", 40<<20)) // made before the budget: not the run's
	thread := new(starlark.Thread)
	thread.Print = func(*starlark.Thread, string) {}
	runtime.GC()
	SetBudget(thread, NewBudget(64<<20))
	guards := Guards().Predeclared()
	var me *MemoryError
	_, err := starlark.Call(thread, guards["print"], starlark.Tuple{starlark.String("a"), starlark.String("b")}, []starlark.Tuple{{starlark.String("sep"), sep}})
	require.True(t, errors.As(err, &me), "print: got %v", err)
	_, err = starlark.Call(thread, guards[nameMethod], starlark.Tuple{sep, starlark.String("join"), starlark.NewList([]starlark.Value{starlark.String("a"), starlark.String("b")})}, nil)
	require.True(t, errors.As(err, &me), "join: got %v", err)
	_, err = starlark.Call(thread, guards[nameMod], starlark.Tuple{starlark.String("%s"), sep}, nil)
	require.True(t, errors.As(err, &me), "%%: got %v", err)
	// Half of it fits.
	_, err = starlark.Call(thread, guards[nameMod], starlark.Tuple{starlark.String("%s"), sep[:20<<20]}, nil)
	require.NoError(t, err)
}
