//go:build race

package isolate

// tinyObject is the least memory a boxed word or a string's bytes take: under the race detector
// the runtime's tiny allocator gives every small object 16 bytes of its own.
const tinyObject = 16

// raceExit is added to a worker's environment unless it sets GORACE: a worker built with the race
// detector (a test binary serving as one) would otherwise sleep a second as it exits
// (atexit_sleep_ms), and closing a pool waits for its workers to exit.
const raceExit = "GORACE=atexit_sleep_ms=0"
