//go:build race

package isolate

// tinyObject is the least memory a boxed word or a string's bytes take: under the race detector
// the runtime's tiny allocator gives every small object 16 bytes of its own.
const tinyObject = 16
