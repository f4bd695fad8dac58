// Package spell finds the name a user most likely meant, for "did you mean …?" hints.
//
// It owns the edit distances and the rule for picking a near name; callers own what counts as a
// name and how the hint is worded. It is a leaf: it imports only the standard library, so any
// package — including the ones a plan runs in — may use it.
package spell

import (
	"strings"
	"unicode"
)

// Nearest returns the candidate closest to x for a did-you-mean, or "" when none is close.
//
// Case is ignored, and so are '_', '$', '-' and ' '. A candidate is close when its Distance from
// x is under half of x's length, and always when it is one edit away; the first closest wins.
// Failing that, a candidate is chosen when it is the only one that contains x (x of three or more
// letters), or else the only one with x's letters in order (x of two or more: "qty" →
// "quantity_in_stock").
func Nearest(x string, candidates []string) string {
	fx := fold(x)
	if fx == "" {
		return ""
	}
	best, bestD := "", max(2, (len(fx)+1)/2) // under half of x's letters, and 1 for short names
	for _, c := range candidates {
		if d := Distance(fx, fold(c), bestD); d < bestD {
			best, bestD = c, d
		}
	}
	if best != "" {
		return best
	}
	// A unique candidate containing x, then a unique one with x's letters in order.
	for _, rule := range []func(c string) bool{
		func(c string) bool { return len(fx) >= 3 && strings.Contains(c, fx) },
		func(c string) bool { return len(fx) >= 2 && isSubsequence(fx, c) },
	} {
		found := ""
		for _, c := range candidates {
			if rule(fold(c)) {
				if found != "" {
					found = ""
					break
				}
				found = c
			}
		}
		if found != "" {
			return found
		}
	}
	return ""
}

// fold drops the case and the separators Nearest ignores.
func fold(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '$' || r == '-' || r == ' ' {
			return -1
		}
		return unicode.ToLower(r)
	}, s)
}

// isSubsequence reports whether x's bytes appear in y in order.
func isSubsequence(x, y string) bool {
	i := 0
	for j := 0; i < len(x) && j < len(y); j++ {
		if x[i] == y[j] {
			i++
		}
	}
	return i == len(x)
}

// Distance returns the edit distance between a and b in bytes, counting an insertion, a deletion,
// a substitution or a swap of two adjacent bytes as one edit (optimal string alignment).
//
// The work stops as soon as the distance is known to reach limit: a result below limit is exact,
// and any other result is some value >= limit. Callers keep a running best and pass it as limit,
// so strings far apart in length cost nothing.
func Distance(a, b string, limit int) int {
	return distance(a, b, limit, true)
}

// Levenshtein is Distance without swaps: a swap of two adjacent bytes counts as two edits. The
// same limit rule applies: a result below limit is exact, any other is some value >= limit.
func Levenshtein(a, b string, limit int) int {
	return distance(a, b, limit, false)
}

func distance(x, y string, limit int, swaps bool) int {
	if len(x) > len(y) {
		x, y = y, x
	}
	for len(x) > 0 && x[0] == y[0] { // a common prefix costs nothing
		x, y = x[1:], y[1:]
	}
	if x == "" || len(y)-len(x) >= limit {
		return len(y) - len(x) // exact when x is empty, else a lower bound
	}
	prev2 := make([]int, len(y)+1) // row i-2, for swaps
	prev := make([]int, len(y)+1)  // row i-1
	row := make([]int, len(y)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(x); i++ {
		row[0] = i
		best := i
		for j := 1; j <= len(y); j++ {
			cost := 1
			if x[i-1] == y[j-1] {
				cost = 0
			}
			k := min(prev[j-1]+cost, row[j-1]+1, prev[j]+1)
			if swaps && i > 1 && j > 1 && x[i-1] == y[j-2] && x[i-2] == y[j-1] {
				k = min(k, prev2[j-2]+1)
			}
			row[j] = k
			best = min(best, k)
		}
		if best >= limit { // no row's minimum ever falls, so the distance is at least best
			return best
		}
		prev2, prev, row = prev, row, prev2
	}
	return prev[len(y)]
}
