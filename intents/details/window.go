package details

import (
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode"
)

// expr is one compiled expression of a row with what its syntax tells of the text a match
// can lie in. Most expressions look at no more context than the characters right before and
// after a match (\b), can match no empty text and hold only some bytes; a match then lies
// inside one run of those bytes, and the expression need only run over the runs long enough
// and holding the bytes every match holds, each with one byte around it for \b.
type expr struct {
	re    *regexp.Regexp
	whole bool      // the expression reads more context (^, $): it runs over the whole text
	in    [256]bool // bytes a match can hold (every byte from 0x80 on, if any non-ASCII rune)
	min   int       // the fewest runes, so bytes, a match holds
	need  []byte    // ASCII bytes every match holds
}

func compile(e string) expr {
	x := expr{re: regexp.MustCompile(e)}
	t, err := syntax.Parse(e, syntax.Perl)
	if err != nil {
		panic(err)
	}
	x.min = minRunes(t)
	x.whole = x.min == 0 || !alphabet(t, &x.in)
	var need [4]uint64
	needed(t, &need)
	for c := 0; c < 128; c++ {
		if need[c>>6]&(1<<(c&63)) != 0 {
			x.need = append(x.need, byte(c))
		}
	}
	return x
}

// findAll is x.re.FindAllStringIndex(s, -1), run only where a match can lie.
func (x *expr) findAll(s string) [][]int {
	if x.whole {
		return x.re.FindAllStringIndex(s, -1)
	}
	var out [][]int
	for i := 0; i < len(s); {
		if !x.in[s[i]] {
			i++
			continue
		}
		j := i + 1
		for j < len(s) && x.in[s[j]] {
			j++
		}
		if j-i >= x.min && x.holdsNeeds(s[i:j]) {
			lo, hi := max(i-1, 0), min(j+1, len(s))
			for _, m := range x.re.FindAllStringIndex(s[lo:hi], -1) {
				m[0], m[1] = m[0]+lo, m[1]+lo
				out = append(out, m)
			}
		}
		i = j
	}
	return out
}

func (x *expr) holdsNeeds(run string) bool {
	for _, c := range x.need {
		if strings.IndexByte(run, c) < 0 {
			return false
		}
	}
	return true
}

// alphabet adds to in the bytes a match of t can hold, and says whether t looks at no more
// context than a character either side (false for ^, $ and operators it does not know).
func alphabet(t *syntax.Regexp, in *[256]bool) bool {
	addRune := func(r rune) {
		if r < 0x80 {
			in[r] = true
			return
		}
		for c := 0x80; c < 0x100; c++ {
			in[c] = true
		}
	}
	switch t.Op {
	case syntax.OpLiteral:
		for _, r := range t.Rune {
			addRune(r)
			if t.Flags&syntax.FoldCase != 0 {
				for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
					addRune(f)
				}
			}
		}
	case syntax.OpCharClass:
		for i := 0; i+1 < len(t.Rune); i += 2 {
			for r := t.Rune[i]; r <= t.Rune[i+1] && r < 0x80; r++ {
				addRune(r)
			}
			if t.Rune[i+1] >= 0x80 {
				addRune(0x80)
			}
		}
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		for c := range in {
			in[c] = true
		}
	case syntax.OpEmptyMatch, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
	case syntax.OpCapture, syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat, syntax.OpConcat, syntax.OpAlternate:
		for _, s := range t.Sub {
			if !alphabet(s, in) {
				return false
			}
		}
	default:
		return false
	}
	return true
}

// minRunes is the fewest runes a match of t holds.
func minRunes(t *syntax.Regexp) int {
	switch t.Op {
	case syntax.OpLiteral:
		return len(t.Rune)
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return 1
	case syntax.OpCapture, syntax.OpPlus:
		return minRunes(t.Sub[0])
	case syntax.OpRepeat:
		return t.Min * minRunes(t.Sub[0])
	case syntax.OpConcat:
		n := 0
		for _, s := range t.Sub {
			n += minRunes(s)
		}
		return n
	case syntax.OpAlternate:
		n := -1
		for _, s := range t.Sub {
			if m := minRunes(s); n < 0 || m < n {
				n = m
			}
		}
		return max(n, 0)
	}
	return 0
}

// needed adds to need (a set of ASCII bytes) the bytes every match of t holds.
func needed(t *syntax.Regexp, need *[4]uint64) {
	add := func(r rune) {
		if r < 0x80 {
			need[r>>6] |= 1 << (r & 63)
		}
	}
	switch t.Op {
	case syntax.OpLiteral:
		for _, r := range t.Rune {
			if t.Flags&syntax.FoldCase == 0 || unicode.SimpleFold(r) == r {
				add(r)
			}
		}
	case syntax.OpCharClass:
		if len(t.Rune) == 2 && t.Rune[0] == t.Rune[1] {
			add(t.Rune[0])
		}
	case syntax.OpCapture, syntax.OpPlus:
		needed(t.Sub[0], need)
	case syntax.OpRepeat:
		if t.Min > 0 {
			needed(t.Sub[0], need)
		}
	case syntax.OpConcat:
		for _, s := range t.Sub {
			needed(s, need)
		}
	case syntax.OpAlternate:
		all := [4]uint64{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}
		for _, s := range t.Sub {
			var one [4]uint64
			needed(s, &one)
			for i := range all {
				all[i] &= one[i]
			}
		}
		for i := range all {
			need[i] |= all[i]
		}
	}
}
