package sandbox

import (
	"container/list"
	"slices"
	"sync"
)

// The bounds of an environment's cache of checked programs. Program text is the measure: what a
// compiled program holds grows with its text (thirty bytes per byte of source for the worst
// programs measured: 64 KiB of lambdas), so the cache holds at most about 30 MiB however hostile
// the programs it is given; a failed check holds at most 51 name diagnostics.
const (
	cacheEntries = 256
	cacheBytes   = 1 << 20
)

// checkCache keeps the most recently checked programs of one environment, so that a program
// checked again (a check followed by a run of the same plan, a replay, a plan sent twice, a
// worker running what its parent just checked) is not rewritten, parsed and compiled again: that
// is half the cost of a small plan. A check depends only on the program's text, the environment
// and the two limits that bound the check, which together are the key; the result is the same
// value the check would return (a compiled program is never changed by running it), so a hit is
// indistinguishable from a check except in time. Least recently used entries are dropped first.
type checkCache struct {
	mu    sync.Mutex
	bytes int
	byKey map[checkKey]*list.Element
	order list.List // of *cacheEntry, most recently used first
}

type checkKey struct {
	program    string
	maxProgram int
	maxNesting int
}

type cacheEntry struct {
	key     checkKey
	checked Checked
}

func newCheckCache() *checkCache { return &checkCache{byKey: map[checkKey]*list.Element{}} }

func keyOf(program string, limits Limits) checkKey {
	return checkKey{program: program, maxProgram: limits.MaxProgram, maxNesting: limits.MaxNesting}
}

// get returns the check of a program seen before. The slices are the caller's own.
func (c *checkCache) get(k checkKey) (Checked, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[k]
	if !ok {
		return Checked{}, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*cacheEntry).checked.clone(), true
}

// put records a check. Programs larger than the cache's byte bound are not kept.
func (c *checkCache) put(k checkKey, checked Checked) {
	if len(k.program) > cacheBytes/8 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byKey[k]; ok {
		return
	}
	c.byKey[k] = c.order.PushFront(&cacheEntry{key: k, checked: checked.clone()})
	c.bytes += len(k.program)
	for c.order.Len() > cacheEntries || c.bytes > cacheBytes {
		old := c.order.Remove(c.order.Back()).(*cacheEntry)
		delete(c.byKey, old.key)
		c.bytes -= len(old.key.program)
	}
}

// clone copies what a caller may append to or edit; the program and the text are shared.
func (c Checked) clone() Checked {
	c.Rewrites = slices.Clone(c.Rewrites)
	c.Diagnostics = slices.Clone(c.Diagnostics)
	return c
}
