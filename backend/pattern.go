package backend

import "strings"

// KindMatch reports whether kind matches pattern, in the syntax of AMQP
// topic exchanges applied to the kind's dot-separated words: the pattern
// word "*" matches exactly one word, "#" zero or more words, and any other
// word only itself. Words may be empty ("a..b" has three words, the middle
// one empty, which "*" matches). An empty pattern matches every kind.
//
// Drivers that route by pattern in the broker must agree with KindMatch;
// the conformance suite checks a table of cases against it.
func KindMatch(pattern, kind string) bool {
	if pattern == "" {
		return true
	}
	p := strings.Split(pattern, ".")
	k := strings.Split(kind, ".")
	// The glob algorithm over words: "#" is the star, "*" the single-word
	// wildcard. After a mismatch, the last "#" seen takes one more word.
	pi, ki := 0, 0
	star, mark := -1, 0
	for ki < len(k) {
		switch {
		case pi < len(p) && p[pi] == "#":
			star, mark = pi, ki
			pi++
		case pi < len(p) && (p[pi] == "*" || p[pi] == k[ki]):
			pi++
			ki++
		case star >= 0:
			mark++
			pi, ki = star+1, mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == "#" {
		pi++
	}
	return pi == len(p)
}

// KindMatchAny reports whether kind matches one of patterns; no patterns
// match every kind.
func KindMatchAny(patterns []string, kind string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if KindMatch(p, kind) {
			return true
		}
	}
	return false
}
