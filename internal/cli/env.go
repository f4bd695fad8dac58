package cli

import (
	"errors"
	"fmt"

	"github.com/starplan/starplan/builtins"
	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/opener"
)

// sandboxInputs declares the per-run inputs of `starplan run`, which has no tables.
func sandboxInputs() builtins.Registry {
	return builtins.Registry{{Name: "user_request", Group: builtins.GroupInput, Signature: "user_request: str", Doc: "The customer's request, verbatim."}}
}

// planEnv is the environment plans are checked against: the store's domain (its tables and
// helpers) when there is a store, else the built-in inventory domain's, which needs none.
func planEnv(ios IOStreams, g *globalOptions) (*sandbox.Env, error) {
	if ios.host != nil {
		return ios.host.eng.Env(), nil
	}
	if target, err := storeTarget(ios, g); err == nil {
		st, _, err := ios.storeOpener().Open(ios.context(), target, opener.Options{})
		switch {
		case err == nil:
			defer st.Close()
			env, err := engine.EnvOf(st)
			if err != nil {
				return nil, withCode(ExitInternal, err, "")
			}
			return env, nil
		case !errors.Is(err, store.ErrNoStore):
			return nil, storeError(opener.Redact(target), err)
		}
	}
	dom := store.Inventory()
	env, ds := sandbox.NewDomainEnv(dom.Tables, dom.Definition[sandbox.HelpersFile])
	if len(ds) > 0 {
		return nil, withCode(ExitInternal, fmt.Errorf("the built-in domain's helpers do not check: %s", ds), "")
	}
	return env, nil
}
