// Package isolate runs plans in worker processes under OS limits: the hard bound that the
// sandbox's in-process guards cannot give (Go cannot bound one goroutine's memory, and a single
// builtin call of go.starlark.net can allocate or panic past any guard).
//
// It owns the Pool (a sandbox.Runner: warm workers, their limits, their replacement), the worker
// process's body (WorkerMain) and the pipe protocol between them. It depends on the sandbox,
// never on the engine, the store or the model client: a program that embeds the pool alone
// links none of them. A worker is the starplan binary
// re-executed with a hidden command; it runs the sandbox exactly as in process, except that its
// table.View is remote: every table call travels to the pool, which owns the run's staged view,
// and the answer travels back. The worker holds no database handle and cannot open files.
//
// Limits a worker applies to itself before it reads a program (Linux):
//
//   - memory: RLIMIT_DATA at its data segment at start + 2×Limits.MaxMemory + Options.Overhead
//     (+ the rows it keeps, see below), with the Go runtime's soft limit (debug.SetMemoryLimit)
//     and a watch that exits the worker cleanly below it, every millisecond of the worker's
//     processor time (an ITIMER_VIRTUAL signal: an idle worker is never woken, and a run arms
//     no timer of its own). RLIMIT_AS is unusable: the Go
//     runtime reserves more than a gigabyte of address space at start. A worker that reaches
//     either dies, and the pool reports limit_exceeded memory (it reads the runtime's "out of
//     memory" errors, a thread or race-detector shadow the kernel refused, and Go 1.26's
//     collector dereferencing nil after a refused allocation). The sandbox's guards and heap
//     watchdog still run inside the worker and usually stop a plan first, more precisely;
//   - processor time: RLIMIT_CPU at 2×Limits.Timeout + 2 s beyond what the worker has used (the
//     wall-clock deadline is the pool's: it kills the worker Options.KillGrace after it);
//   - open files (RLIMIT_NOFILE 32), file size (RLIMIT_FSIZE 0), core dumps (RLIMIT_CORE 0);
//   - network: a new network namespace (inside a new user namespace when the parent is not
//     privileged), and no socket (below).
//
// What a worker holds and may do (Linux; confine_linux.go, seccomp_linux.go), in the process
// that reads programs:
//
//   - capabilities: none, on every thread: the effective, permitted, inheritable, ambient and
//     bounding sets are empty, and no_new_privs is set. A worker's first start clears the
//     bounding set (a per-thread set, and the runtime has started threads) and re-executes
//     itself through /proc/self/exe, so every thread of the second start begins with it. A
//     worker without CAP_SETPCAP (an unprivileged pool that got no user namespace) cannot clear
//     its bounding set; it has no capability, and no_new_privs keeps any exec from granting one.
//   - user: a worker started as root runs as uid and gid 65534 (nobody), without supplementary
//     groups. An unprivileged pool's worker is root of its own user namespace, which maps only
//     the pool's user, and holds no capability there either.
//   - descriptors: its standard input, output and error (its pipes to the pool) and nothing it
//     inherited: the exec closes the rest. The serving process then opens only the Go
//     runtime's own (its poller, its cgroup's processor limit) and its /proc/self/status.
//   - working directory: an empty directory that the first start created and removed, so no
//     relative path reaches the pool's directory and nothing can be created in it.
//   - system calls: a seccomp allow-list of what the Go runtime calls while a worker serves
//     (read and write on the descriptors it holds, memory, threads, futexes, signals to itself,
//     timers, its poller, its own limits and usage), with memory never executable, clone only
//     for a thread, and prlimit64 and tgkill only on itself. Everything else fails with EPERM:
//     opening, listing or stat-ing any file, sockets, exec, fork, ptrace, kill, other processes'
//     limits, namespaces, mounts, io_uring, bpf. It has no mount namespace of its own: the host's
//     file tree exists, but nothing in it can be reached.
//
// What cannot be applied is listed once by Pool.Warnings, never skipped silently, and a worker
// still runs without it: the pool's owner decides (the CLI prints the warnings). That holds for
// the seccomp filter too, which is defense in depth: the interpreter gives a plan no system call
// at all, and the filter bounds what a flaw in it could reach. A worker that hits a limit,
// crashes or breaks the protocol is killed and replaced; its run's outcome is limit_exceeded or
// runtime_error, and the engine applies nothing from it.
//
// The protocol is length-prefixed binary frames (see codec.go) with typed values, so int64
// stays int64. The job (a sandbox.Request), the result and the messages around them are written
// by one encoder that walks their fields (record.go), so a field added to the job or the result
// crosses without an edit; a test fills every field by reflection and checks it arrives. Dict where-filters run in the pool, so only matching rows cross the pipe, in the
// schema's field order and in parts of findPart rows. A function filter stays in the worker,
// which fetches the candidate rows once and filters them itself (the pool then records every
// candidate as read: conflict detection is more conservative than in process, never less
// safe); a write with a function filter is resolved to keys in the worker and sent keyed.
//
// A worker keeps the rows it has received between calls and runs, within a memory bound
// (Options.RowCache, for all the pool's workers together, not a row count), and the pool sends a
// row it already holds as its number: the view's rows are shared, immutable maps, so a map's
// identity is its version. A plan still reaches only the rows the pool's view answers with; the
// cache only saves encoding and decoding them again. A kept row's memory is estimated from what
// the worker allocates for it (held.go: its map, boxed values and strings, which are copied out of
// their frame, so the frame is not kept), within a few bytes of the measured heap, and added to
// the worker's limits; the pool's record keeps the parent's maps of those rows alive. Past the
// bound, the rows held keep crossing as numbers and the others cross whole, so a read's cost
// grows with its size and never jumps; a worker whose full cache recent runs hardly use is
// replaced before a run, so every run's limits count exactly the rows its worker holds.
//
// A run that does not end ok returns no globals (in process it returns the half-set ones; the
// engine reads globals of ok runs only), so a plan cannot push what it built into the parent.
//
// The package must not hold a database handle in the worker, must not run plan code in the
// parent, and must not change the sandbox's behaviour: a plan's result is the same isolated and
// in process, except for the limits above.
package isolate
