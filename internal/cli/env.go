package cli

import (
	"github.com/starplan/starplan/builtins"
	"github.com/starplan/starplan/sandbox"
)

// sandboxInputs declares the per-run inputs every plan may read.
func sandboxInputs() builtins.Registry {
	return builtins.Registry{{Name: "user_request", Group: builtins.GroupInput, Signature: "user_request: str", Doc: "The customer's request, verbatim."}}
}

// planEnv is the environment plans are checked against.
func planEnv(_ *globalOptions) *sandbox.Env {
	return sandbox.NewEnv(sandboxInputs())
}
