package isolate

import "golang.org/x/sys/unix"

// archSyscalls are the calls amd64 has beside the shared list: epoll_wait, which arm64 lacks
// (its runtime uses epoll_pwait).
var archSyscalls = []uint32{unix.SYS_EPOLL_WAIT}
