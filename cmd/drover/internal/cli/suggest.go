package cli

import (
	"slices"
	"strings"

	"github.com/agext/levenshtein"
)

// closest is the candidate the user most likely meant by typed: the only
// one typed begins (an abbreviation such as "depl"), else the nearest by
// edit distance when at most a third of its letters differ (at least one,
// so short names still get a suggestion) or when it holds the same letters
// two edits away (two letters swapped, "jbo" for "job", which Levenshtein
// counts as two). Ties go to the earlier candidate, keeping the order of
// the command table.
func closest(typed string, candidates []string) (string, bool) {
	typed = strings.ToLower(typed)
	var prefixed []string
	for _, c := range candidates {
		if len(typed) >= 2 && strings.HasPrefix(strings.ToLower(c), typed) {
			prefixed = append(prefixed, c)
		}
	}
	if len(prefixed) == 1 {
		return prefixed[0], true
	}
	best, bestDist := "", -1
	for _, c := range candidates {
		d := levenshtein.Distance(typed, strings.ToLower(c), nil)
		if bestDist < 0 || d < bestDist {
			best, bestDist = c, d
		}
	}
	switch {
	case bestDist < 0:
		return "", false
	case bestDist <= max(1, len(best)/3):
		return best, true
	case bestDist == 2 && sameLetters(typed, strings.ToLower(best)):
		return best, true
	}
	return "", false
}

// sameLetters reports whether a and b hold the same letters, in any order.
func sameLetters(a, b string) bool {
	x, y := []rune(a), []rune(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}
