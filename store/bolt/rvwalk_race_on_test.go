//go:build race

package bolt

// raceOn is set when the tests run under the race detector.
const raceOn = true
