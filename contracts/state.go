package contracts

import (
	"fmt"

	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/table"
)

// stateKinds are the rule kinds that are properties of a state, not only of a change: every
// row of a valid store satisfies them, whatever runs made it. The others (append_only,
// no_inserts, ledger_per_item, ...) speak of a change and mean nothing of a state alone.
var stateKinds = map[string]bool{"non_negative": true, "balance_chain": true, "non_negative_balance": true}

// CheckState holds a whole committed state to the domain's state rules: state lists every row
// of every table as inserted (in key order) into an empty store, so the ledger's balance chain
// is checked from its first row, along with no negative stock and no negative running balance.
// It is what `starplan db check` verifies of a store's data.
func (d *Domain) CheckState(state table.ChangeSet) (diag.List, error) {
	if !d.ready {
		return nil, fmt.Errorf("contracts: domain %q was not validated; build domains with Load or Parse", d.Name)
	}
	p := &pass{in: Input{Changes: state, Committed: LastRows{}}, contract: &d.Contract}
	for i := range d.Rules {
		r := &d.Rules[i]
		if !stateKinds[r.Kind] {
			continue
		}
		if err := r.check(p); err != nil {
			return nil, fmt.Errorf("contracts: rule %q: %w", r.Name, err)
		}
	}
	return p.out, nil
}
