// Package sandbox runs a plan that a model wrote without trusting it: it extracts the program
// from a reply, rewrites the Python-isms that have an exact Starlark meaning (subpackage
// pycompat), checks it statically, and runs it on go.starlark.net with nothing but the names of
// a builtins.Registry, under step, time, output and memory limits.
//
// The check first makes sure that the program that runs is the program a reviewer reads: text
// holding NUL (where the Starlark scanner would stop), other control characters but tab and line
// breaks, bidi overrides or separators is rejected (program-control-char, checkText), so a
// result's Program is exactly the text that was checked and then run, after its recorded
// rewrites.
//
// Memory is bounded in process by two mechanisms. Before compiling, the checked syntax tree is
// rewritten so that the operations that can amplify memory in a single step (`*` and `+` on
// sequences, `+=`, `str.join`, `str.replace`) go through guards in package builtins that
// estimate the size of their result and refuse it when it would not fit the run's budget; the
// builtins that materialise iterables (list, sorted, enumerate, ...) are guarded the same way.
// A heap watchdog cancels a run whose heap grows past its budget by other means. Neither is a
// hard bound (Go cannot bound one goroutine's heap): the hard bound is the isolated worker.
//
// The package must not import clover, the store, net or the model client: a plan reaches data
// only through the table.View that the caller binds to the thread.
package sandbox
