package isolate

import (
	"math/bits"
	"slices"
)

// What a worker's heap holds for the rows it keeps (rowCache), estimated from what the decoder
// allocates for them, so that the pool can add it to the worker's limits and bound the cache by
// memory. The estimate follows the Go runtime's allocator and maps (Go 1.24 and later): a kept
// row is a map made with its field count as hint, a string value is boxed in its interface and
// its bytes copied out of the frame, an int64 or float64 is boxed unless it is one of the
// runtime's static small values, a list is a slice, a nested map another map. Every object is
// rounded up to its size class, after the allocator's header when it holds pointers.
// TestRowCostEstimate checks the estimate against the measured heap: at or above what the
// worker's spans grow by, and close to what its objects take, for narrow, wide and nested rows.

// sizeClasses are the Go allocator's object sizes up to 32 KiB (internal/runtime/gc's
// SizeClassToSize, without class 0); a larger object takes whole 8 KiB pages.
var sizeClasses = [...]int64{8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224,
	240, 256, 288, 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280, 1408,
	1536, 1792, 2048, 2304, 2688, 3072, 3200, 3456, 4096, 4864, 5376, 6144, 6528, 6784, 6912, 8192,
	9472, 9728, 10240, 10880, 12288, 13568, 14336, 16384, 18432, 19072, 20480, 21760, 24576, 27264,
	28672, 32768}

// allocSize is the memory an object of n bytes takes.
func allocSize(n int64) int64 {
	if n <= 0 {
		return 0
	}
	if n <= tinyObject {
		return tinyObject
	}
	if n > sizeClasses[len(sizeClasses)-1] {
		return (n + 8191) &^ 8191
	}
	i, _ := slices.BinarySearch(sizeClasses[:], n)
	return sizeClasses[i]
}

// pointerSize is the memory an object of n bytes that holds pointers takes: past 512 bytes the
// allocator puts an 8-byte header of its layout in front of it.
func pointerSize(n int64) int64 {
	if n > 512 {
		n += 8
	}
	return allocSize(n)
}

// The layout of a map[string]any (internal/runtime/maps): the Map itself, groups of 8 slots of
// a key and a value (16 bytes each) after an 8-byte control word, and, past 8 entries, a
// directory of tables of at most 1,024 slots filled to at most 7/8.
const (
	mapHeader   = 48
	mapGroup    = 8 + 8*(16+16)
	mapTable    = 32
	tableSlots  = 1024
	boxedString = 16         // a string in an interface: its header
	boxedWord   = tinyObject // an int64 or float64 in an interface
	boxedSlice  = 24         // a []any in an interface: its header
	cacheSlot   = 16         // the row's place in the worker's cache slice, with its growth
)

// mapCost is what make(map[string]any, n) takes once n entries are in it. A map of one table is
// laid out exactly; past tableSlots, keys spread over the tables at random, and one of them may
// grow or split, so every table is counted at its largest, and one more.
func mapCost(n int) int64 {
	if n <= 8 {
		if n == 0 {
			return mapHeader
		}
		return mapHeader + pointerSize(mapGroup)
	}
	target := uint64(n) * 8 / 7
	if target <= tableSlots {
		slots := uint64(1) << bits.Len64(max(target, 8)-1)
		return mapHeader + pointerSize(8) + pointerSize(mapTable) + pointerSize(int64(slots/8)*mapGroup)
	}
	tables := int64(1)<<bits.Len64((target+tableSlots-1)/tableSlots-1) + 1
	perTable := pointerSize(mapTable) + pointerSize(tableSlots/8*mapGroup)
	return mapHeader + pointerSize(2*tables*8) + tables*perTable
}

// heldCost is what the worker's memory grows by for kept values whose objects take held bytes:
// the runtime's spans are partly used, and carry their bitmaps and mark bits (HeapInuse runs
// about 6 % above HeapAlloc for kept rows; the limits count the runtime's whole memory).
func heldCost(held int64) int64 { return held + held/8 }

// wordCost is what an int64 or float64 (its bits) takes in an interface: nothing for the
// runtime's static values below 256.
func wordCost(bits uint64) int64 {
	if bits < 256 {
		return 0
	}
	return boxedWord
}

// stringCost is what a string value the worker keeps takes: its boxed header and its bytes,
// copied out of the frame.
func stringCost(n int) int64 {
	if n == 0 {
		return 0
	}
	return boxedString + allocSize(int64(n))
}

// listCost is what a []any of n elements takes in an interface, beyond its elements' values.
func listCost(n int) int64 {
	return boxedSlice + pointerSize(16*int64(n))
}
