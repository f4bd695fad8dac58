// Package contracts owns the output contract and the mutation policies that a plan's result must
// satisfy before anything it staged may be applied. It evaluates them on plain Go values: the
// plan's final globals (as converted by the builtins) and the staged table.ChangeSet, plus a
// narrow read accessor for committed data (Committed). It must not import starlark or store
// internals; it depends only on table, diag and the standard library.
//
// Contracts and policies are data. Each domain ships one JSON file (domains/<name>.json, embedded)
// holding its output contract's parameters and a list of rules. Each rule names a generic,
// parameterised check kind implemented in Go (only_tables, no_deletes, no_inserts, append_only,
// key_immutable, mutable_fields, non_negative, ledger_per_item, balance_chain), so another domain
// brings its own file (Parse) without Go changes. Like golang.org/x/tools analysis.Analyzer, every
// rule is a value with a name, a one-line doc and a check; Describe renders the same values for the
// prompt and --help, so the text a model reads and the checks that run cannot drift apart.
//
// Every violation is one diag.Diagnostic at diag.StageContract with a stable code (the Code*
// constants), a message that says what was found and what is allowed, and a hint that says what
// to write instead. Money is compared exactly, in whole cents: an amount
// or balance that is not a whole number of cents (beyond float noise) is refused, since any
// tolerance per row would add up over a ledger.
package contracts
