// Package engine is starplan's library entry point: it joins the sandbox, the store and the
// contracts into runs that other programs embed.
//
//   - Run executes a model reply or a program against a staged view of the store, enforces the
//     output contract and the domain's mutation policy on what it staged, and returns one Result
//     (the same document the CLI prints with --json). A run that would change data is kept as a
//     pending run unless the request asks to apply it at once.
//   - Apply applies a pending run atomically, after checking that nothing it read or changed
//     has moved since (otherwise the outcome is a conflict and nothing is written).
//   - Every run, accepted or rejected, is recorded in the audit log (the store's system
//     collection "runs", which plans cannot see); Runs and Record read it back. Each record is
//     bounded (MaxRecord), and Prune removes the runs older than an age.
//   - Show returns a run's one document (Document: its result, digest, state, decision, history
//     and what its record keeps), which every transport prints.
//   - Observers (Options.Observe, Observe) are told each step of every run as it happens
//     (lifecycle.go), whichever transport asked for it; a run's recorded history is rebuilt
//     from its record by the same vocabulary (History, Event.Stream).
//
// The engine must not know about transports: flags, terminals and HTTP belong to the callers.
package engine
