package table

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"sync"
)

// MaxRegexInsts is the largest compiled program a $regex pattern may have, in RE2 instructions.
// Text length alone does not bound it: `(()){1000}` is 10 bytes and compiles to thousands of
// instructions (a 1 KiB pattern can take 20 MiB and a tenth of a second), and matching costs
// about the program's size times the text's length. Patterns a filter needs are a few hundred.
const MaxRegexInsts = 2_000

// MaxRegexGroups is the most capture groups a $regex pattern may have after its repetitions are
// expanded: a filter uses none (a match is all it asks), and each one multiplies what matching
// holds per candidate state.
const MaxRegexGroups = 32

// regexCacheInsts bounds the instructions the cache of compiled patterns keeps in all.
const regexCacheInsts = 128 * 1_000

// regexes keeps the patterns compiled most recently. A filter is compiled for every call of a
// table method, and the same patterns come back on every run (a domain helper's key pattern):
// compiling one again costs more than the rest of the filter. A *regexp.Regexp is safe for
// concurrent use, so one compiled pattern serves every run. When full, the cache starts again.
var regexes = struct {
	sync.Mutex
	m     map[string]*regexp.Regexp
	insts int
}{m: map[string]*regexp.Regexp{}}

// compileRegex compiles a $regex pattern through the cache, refusing one whose compiled
// program is larger than MaxRegexInsts before it is built. Failures are not kept.
func compileRegex(pattern string) (*regexp.Regexp, error) {
	regexes.Lock()
	re, ok := regexes.m[pattern]
	regexes.Unlock()
	if ok {
		return re, nil
	}
	insts, err := regexSize(pattern)
	if err != nil {
		return nil, err
	}
	re, err = regexp.Compile(pattern)
	if err != nil {
		return nil, err
	}
	regexes.Lock()
	if regexes.insts+insts > regexCacheInsts {
		clear(regexes.m)
		regexes.insts = 0
	}
	regexes.m[pattern] = re
	regexes.insts += insts
	regexes.Unlock()
	return re, nil
}

// regexSize is the number of instructions pattern compiles to, or an error when it is more than
// MaxRegexInsts or does not parse. Counting repetitions before simplifying refuses a pattern
// whose expansion would be large without building it.
func regexSize(pattern string) (int, error) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return 0, err
	}
	if n := expansion(re); n > MaxRegexInsts {
		return 0, fmt.Errorf("the pattern would compile to more than %d instructions; use a simpler one (fewer or smaller repetitions)", MaxRegexInsts)
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return 0, err
	}
	if len(prog.Inst) > MaxRegexInsts {
		return 0, fmt.Errorf("the pattern compiles to %d instructions, more than %d; use a simpler one", len(prog.Inst), MaxRegexInsts)
	}
	if groups := prog.NumCap/2 - 1; groups > MaxRegexGroups {
		return 0, fmt.Errorf("the pattern has %d capture groups once expanded, more than %d; group with (?:...) instead", groups, MaxRegexGroups)
	}
	return len(prog.Inst), nil
}

// expansion estimates the size of re once its counted repetitions are expanded, stopping as soon
// as it passes MaxRegexInsts.
func expansion(re *syntax.Regexp) int {
	n := 1
	for _, sub := range re.Sub {
		n += expansion(sub)
		if n > MaxRegexInsts {
			return n
		}
	}
	if re.Op == syntax.OpRepeat {
		times := re.Max
		if times < 0 {
			times = re.Min
		}
		n *= max(times, 1)
	}
	return n
}
