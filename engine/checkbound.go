package engine

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/starplan/starplan/contracts"
	"github.com/starplan/starplan/prompts"
	"github.com/starplan/starplan/sandbox"
)

// The bound of a domain check's rules. LoadDomain runs the domain's starlark rules on the example
// answer of every STATUS (prompts.CheckNotes); every call there shares one allowance of steps
// and time, besides each call's own invariantLimits, so that the check of a domain whose rules
// are slow ends in seconds however many rules and answers it has. The time is the total a run's
// rules get (invariantsTime).
const checkRuleSteps = 4_000_000

// checkBound is the allowance of the rules' calls in one domain check.
type checkBound struct {
	mu       sync.Mutex
	left     uint64    // steps
	deadline time.Time // of the whole check's rules
	spent    error     // why the allowance is spent, naming the rule that spent it; nil while it lasts
	rules    map[string][]string
}

// newCheckBound starts the allowance of a check of policy's rules now.
func newCheckBound(policy *contracts.Domain) *checkBound {
	b := &checkBound{left: checkRuleSteps, deadline: time.Now().Add(invariantsTime), rules: map[string][]string{}}
	if policy == nil {
		return b
	}
	for _, r := range policy.Rules {
		if fn, ok := r.Params["function"].(string); ok && r.Kind == "starlark" {
			b.rules[fn] = append(b.rules[fn], r.Name)
		}
	}
	return b
}

// take returns the limits of the next call: its own, cut to what is left of the check's; false
// once the allowance is spent.
func (b *checkBound) take(own sandbox.Limits) (sandbox.Limits, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.spent != nil {
		return own, false
	}
	l := own
	l.MaxSteps = min(own.MaxSteps, b.left)
	l.Timeout = min(own.Timeout, time.Until(b.deadline))
	if l.MaxSteps == 0 || l.Timeout <= 0 {
		b.spent = b.spentError("", "they were spent before it could run")
		return own, false
	}
	return l, true
}

// charge counts a call of fn, run under limits, that took steps and ended with err. It reports
// whether the check's allowance, not the call's own limit, stopped it: the call had all that was
// left, and a limit stopped it.
func (b *checkBound) charge(fn string, own, limits sandbox.Limits, steps uint64, err error) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.left -= min(steps, b.left)
	var le *sandbox.LimitError
	if !errors.As(err, &le) {
		return false
	}
	switch {
	case le.Limit == sandbox.LimitSteps && b.left == 0:
		b.spent = b.spentError(fn, fmt.Sprintf("it took the last of the steps (%s)", le.Err))
	case le.Limit == sandbox.LimitTime && limits.Timeout < own.Timeout:
		b.spent = b.spentError(fn, fmt.Sprintf("it ran out the time (%s)", le.Err))
	default:
		return false
	}
	return true
}

// spentError says that the check's allowance is spent, naming fn's rules ("": the next rule).
func (b *checkBound) spentError(fn, how string) error {
	who := "the domain's starlark rules"
	if fn != "" {
		who = fmt.Sprintf("rule %s (function %s of %s)", strings.Join(b.rules[fn], ", "), fn, InvariantsFile)
	}
	return fmt.Errorf("%s: %s: the check runs the starlark rules on every example answer within %d steps and %s in all, and %s: a rule must be quick on an example's changes (the answers of %s have none); look for a loop that does not end or work that grows too fast",
		contracts.PolicyFile, who, checkRuleSteps, invariantsTime, how, prompts.NotesFile)
}

// err is why the allowance is spent; nil while it lasts.
func (b *checkBound) err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.spent
}
