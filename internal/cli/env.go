package cli

import (
	"github.com/starplan/starplan/builtins"
	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/store"
)

// sandboxInputs declares the per-run inputs of `starplan run`, which has no tables.
func sandboxInputs() builtins.Registry {
	return builtins.Registry{{Name: "user_request", Group: builtins.GroupInput, Signature: "user_request: str", Doc: "The customer's request, verbatim."}}
}

// planEnv is the environment plans are checked against: the shipped domain's tables and
// helpers, without opening a store (checking needs the names, not the data).
func planEnv(_ *globalOptions) *sandbox.Env {
	dom := store.Inventory()
	env, ds := engine.NewEnv(dom.Tables, dom.Definition[sandbox.HelpersFile])
	if len(ds) > 0 {
		panic("the built-in domain's helpers do not check: " + ds.String())
	}
	return env
}
