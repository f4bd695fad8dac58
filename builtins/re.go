package builtins

import (
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// newReModule returns the re module.
func newReModule() *starlarkstruct.Module {
	return &starlarkstruct.Module{Name: "re", Members: starlark.StringDict{}}
}
