//go:build !race

package isolate

// tinyObject is the least memory a boxed word or a string's bytes take (the runtime's tiny
// allocator packs smaller objects into 16-byte blocks).
const tinyObject = 8

// raceExit is empty: only a worker built with the race detector needs its GORACE (race_on.go).
const raceExit = ""
