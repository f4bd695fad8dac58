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
// The parse has a fast path (fastParse) for the plain programs plans are made of: one scan of
// the text gives the tokens, what the Python-ism scanner (lex) would measure, and a tree
// identical to go.starlark.net's (tests compare trees and compiled bytes over the test corpus,
// its one-edit variants and a fuzz target). Anything else, every error included, goes to
// go.starlark.net's parser and lex, so a diagnostic keeps its wording and position.
//
// The check also asks the helpers about their own calls (builtins.Helper.Check): every call
// name(...) or name.method(...) of a predeclared helper that has a check, where no function,
// lambda or comprehension of the program binds that name, is handed to it. The table helpers
// report fields their table lacks in literal rows and where-filters, operators a filter does
// not know, and arguments their signature does not take (unknown-field, unknown-operator,
// wrong-arguments), so such a plan is refused with a did-you-mean before it runs. The checker
// knows nothing of tables: it only walks the calls.
//
// Memory is bounded in process by two mechanisms. Before compiling, the checked syntax tree is
// rewritten (builtins.GuardTree) so that the operations that can amplify memory in a single
// step (`*`, `+`, `%` and `<<`, `+=`, and the methods that build large strings and lists, such
// as str.join and str.replace, however they are reached: called, aliased or fetched with
// getattr) go through guards that estimate the size of their result and refuse it when it would
// not fit the run's budget; the builtins that materialise iterables (list, sorted, enumerate,
// ...) and render text (str, repr, print) are guarded the same way. A heap watchdog cancels a
// run whose heap grows past its budget by other means. A domain's own code (a module's top
// level, LoadModule, and a call of its functions, Call) is bounded the same way (bind), and also
// measures what its values hold at every checkpoint unasked: a thread that begins on a heap of
// others' garbage, freed while it allocates, shows no growth of the heap.
// The same guards, and // routed to one,
// make floats print and divide as in Python (builtins.Repr, builtins.FloatDivMod), where
// go.starlark.net's own float text and floored division differ.
//
// Time is bounded by the step limit and the clock, both checked by the interpreter between
// steps. Builtins that do work out of proportion to their operands (big-integer arithmetic and
// conversions) estimate it before they start and charge it as steps (builtins.ChargeWork), and
// refuse a single call of more than builtins.MaxCallSteps, so one step inside a builtin cannot
// outlast the time limit by more than about 0.1 s.
//
// # Runners
//
// A run is a Request: plain data (the reply, its inputs and limits, the staged view its table
// calls go to, its now(), the globals wanted, the domain's helpers), the one job shape every
// Runner takes. An *Env is the in-process Runner; isolate.Pool carries the same Request to a
// worker process, which depends on this package and not on the engine, so embedding the worker
// pool links neither the store nor the model client. A request's zero limits are its runner's
// defaults: Limits.Effective is the one merge (the request's own, the runner's defaults, the
// package's), called by the engine and by every runner.
//
// # What differs from the isolated worker
//
// In process these bounds are soft; the isolated worker (package isolate) gives each run its own
// process under OS limits and makes them hard. The differences that remain:
//
//   - Memory is measured on the process's heap, because Go cannot attribute allocations to a
//     goroutine. A run's usage is the heap's growth since the run began, so concurrent runs see
//     each other's allocations. The heap watchdog makes up for that by attribution: while
//     several runs are active and one is over its budget by the heap, every run is asked to
//     measure what its own values hold, on its own goroutine at its next checkpoint (every
//     65,536 steps): a walk of every value reachable from its frames' locals and its module's
//     globals, shared values counted once, the environment's predeclared values not at all. A
//     run over its budget by that measure is stopped; one that is not is left alone, and a
//     neighbour's memory no longer stops it. The measure is an estimate of what the values keep
//     alive (interface slots, headers, hash table entries), not the heap's own count, and it
//     cannot see the interpreter's operand stack (a comprehension's list before it is
//     assigned), a variable captured by a nested function other than through that function,
//     Go memory behind values it does not look into (a table, a compiled pattern: a small
//     constant each), or garbage.
//     When no measure explains the heap, the watchdog falls back to the rule for a single run
//     and stops every run over its budget (see watchdog.attribute), so under load a run can
//     still be stopped for memory it does not hold, though now only when the culprit hides it.
//     The guards (builtins.Charge) still read the process's heap: under load one can refuse a
//     large result for a neighbour's memory. Both err towards stopping runs, never towards
//     letting one through. Use the isolated worker where that matters.
//   - The watchdog samples the heap every 2 ms and tolerates garbage until a collection has
//     confirmed the growth, so a run's heap can pass its budget by up to half of it, plus what
//     one step allocates, before it is stopped. With several runs active a run is stopped at a
//     checkpoint, so it can also grow by what it allocates in the steps until its next one. The process's RSS also holds memory the Go
//     runtime has not yet returned to the system.
//   - The interpreter's own operations are not metered inside a step: comparing a value with
//     each element of a list (`in`, list.index, ==) compares every pair in full, so a list of
//     100,000 references to one 1 MB string searched for an equal-length string is 100 GB of
//     comparison in one step (2.5 s per `in` measured). The time limit ends the run at the next
//     step, not during it.
//   - A Go stack overflow or an out-of-memory failure of the runtime ends the whole process;
//     nesting depths are bounded (check, MaxTextDepth, json) so that a plan cannot cause the
//     first, and the budget and watchdog make the second unlikely, not impossible.
//
// The package must not import clover, the store, net or the model client: a plan reaches data
// only through the table.View of its Request, bound to the thread (tables.Bind).
package sandbox
