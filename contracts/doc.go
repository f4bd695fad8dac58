// Package contracts owns the output contract, the mutation policies and the approval rules that a
// plan's result must satisfy before anything it staged may be applied. It evaluates them on plain
// Go values: the plan's final globals (as converted by the builtins) and the staged
// table.ChangeSet, plus a narrow read accessor for committed data (Committed). It must not import
// starlark or store; it depends on table, diag, the built-in domains (Load reads a shipped
// domain's policy by name) and two leaf packages (spell, termsafe).
//
// Contracts and policies are data. Each domain's directory holds a policy.json (PolicyFile, read
// through the domain's fs.FS by FromDefinition, or parsed by Parse) with its output contract's
// parameters, a list of rules and an "approval" object. Each rule names a generic, parameterised
// check kind (Kinds lists them with their parameters and docs: only tables, no deletes or inserts,
// append-only tables, immutable keys and fields, non-negative values, ledgers and balances, and
// "starlark", a function of the domain's invariants.star that the engine binds as an Invariant), so
// another domain brings its own file without Go changes. Like golang.org/x/tools
// analysis.Analyzer, every rule is a value with a name, a one-line doc and a check; Describe renders
// the same values for the prompt and --help, so the text a model reads and the checks that run
// cannot drift apart. The approval object (Approval, approval.go) says who must approve a run:
// four eyes, how many approvers, how long a run may wait, and the auto rules (AutoKinds) that let
// a change set through without a person; the engine evaluates them at apply.
//
// Every violation is one diag.Diagnostic at diag.StageContract with a stable code (the Code*
// constants), a message that says what was found and what is allowed, and a hint that says what
// to write instead. Money is compared exactly, in whole cents: an amount or balance that is not a
// whole number of cents (beyond float noise) is refused, since any tolerance per row would add up
// over a ledger.
package contracts
