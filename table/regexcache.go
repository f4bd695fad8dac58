package table

import (
	"regexp"
	"sync"
)

// regexCacheSize is how many compiled $regex patterns are kept. Patterns are at most
// MaxRegexLen bytes, so the cache holds at most a few megabytes of compiled programs.
const regexCacheSize = 128

// regexes keeps the patterns compiled most recently. A filter is compiled for every call of a
// table method, and the same patterns come back on every run (next_transaction_id's key pattern):
// compiling one again costs more than the rest of the filter. A *regexp.Regexp is safe for
// concurrent use, so one compiled pattern serves every run. When full, the cache starts again.
var regexes = struct {
	sync.Mutex
	m map[string]*regexp.Regexp
}{m: map[string]*regexp.Regexp{}}

// compileRegex is regexp.Compile through the cache. Failures are not kept.
func compileRegex(pattern string) (*regexp.Regexp, error) {
	regexes.Lock()
	re, ok := regexes.m[pattern]
	regexes.Unlock()
	if ok {
		return re, nil
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, err
	}
	regexes.Lock()
	if len(regexes.m) >= regexCacheSize {
		clear(regexes.m)
	}
	regexes.m[pattern] = re
	regexes.Unlock()
	return re, nil
}
