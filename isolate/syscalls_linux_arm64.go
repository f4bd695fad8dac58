package isolate

// archSyscalls are the calls arm64 has beside the shared list: none.
var archSyscalls []uint32
