package builtins

import (
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	smath "go.starlark.net/lib/math"
	sjson "go.starlark.net/lib/json"
)

// newMathModule returns Python's math module on top of go.starlark.net/lib/math.
func newMathModule() *starlarkstruct.Module {
	m := &starlarkstruct.Module{Name: "math", Members: starlark.StringDict{}}
	for k, v := range smath.Module.Members {
		m.Members[k] = v
	}
	return m
}

// newJSONModule returns the json module on top of go.starlark.net/lib/json.
func newJSONModule() *starlarkstruct.Module {
	m := &starlarkstruct.Module{Name: "json", Members: starlark.StringDict{}}
	for k, v := range sjson.Module.Members {
		m.Members[k] = v
	}
	return m
}
