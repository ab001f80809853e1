package details

import (
	"iter"
	"strings"
	"unicode"
	"unicode/utf8"
)

// facts is what one pass over a text finds: which of the bytes in tracked it holds and how
// many ASCII digits. The rows' quick and can tests read them, and work out anything rarer
// from the text itself only when the bytes it needs are there.
type facts struct {
	s      string
	bytes  uint32 // bit i is set when s holds tracked[i]
	digits int    // how many ASCII digits s holds
}

// tracked are the bytes whose presence facts notes: those the rows' tests ask for.
const tracked = "_-AzJ:=@/\\.+"

// byteClass is, per byte, its bit in facts.bytes (when tracked) and 1<<31 for an ASCII digit.
var byteClass = func() (t [256]uint32) {
	for i := 0; i < len(tracked); i++ {
		t[tracked[i]] = 1 << i
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = 1 << 31
	}
	return t
}()

func read(s string) facts {
	var bytes uint32
	digits := 0
	for i := 0; i < len(s); i++ {
		x := byteClass[s[i]]
		bytes |= x
		digits += int(x >> 31)
	}
	return facts{s: s, bytes: bytes &^ (1 << 31), digits: digits}
}

// has reports whether byte c occurs in the text (true for a byte not in tracked).
func (f facts) has(c byte) bool {
	bit := byteClass[c] &^ (1 << 31)
	return bit == 0 || f.bytes&bit != 0
}

// before reports whether one of words ends right before an occurrence of byte c.
func (f facts) before(c byte, words ...string) bool {
	for i := range indexes(f.s, c) {
		for _, w := range words {
			if strings.HasSuffix(f.s[:i], w) {
				return true
			}
		}
	}
	return false
}

// around reports whether an occurrence of byte c has a byte that prev accepts right before
// it and one that next accepts right after it (a nil test accepts anything, even no byte).
func (f facts) around(c byte, prev, next func(byte) bool) bool {
	s := f.s
	for i := range indexes(s, c) {
		if (prev == nil || i > 0 && prev(s[i-1])) && (next == nil || i+1 < len(s) && next(s[i+1])) {
			return true
		}
	}
	return false
}

// indexes yields the index of each occurrence of byte c in s, in order.
func indexes(s string, c byte) iter.Seq[int] {
	return func(yield func(int) bool) {
		for i := 0; i < len(s); i++ {
			j := strings.IndexByte(s[i:], c)
			if j < 0 {
				return
			}
			i += j
			if !yield(i) {
				return
			}
		}
	}
}

// digitRun is the length of the longest run of ASCII digits in the text.
func (f facts) digitRun() int {
	longest, run := 0, 0
	for i := 0; i < len(f.s); i++ {
		if isDigit(f.s[i]) {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return longest
}

// hexBeforeDash reports whether 8 ASCII hex digits come right before a '-', as a UUID's first
// group does.
func (f facts) hexBeforeDash() bool {
	s := f.s
	for i := range indexes(s, '-') {
		if i >= 8 {
			k := i - 8
			for k < i && isHex(s[k]) {
				k++
			}
			if k == i {
				return true
			}
		}
	}
	return false
}

// keyValue reports whether a ':' or '=' follows (after ASCII white space, as \s reads it) a
// letter that ends "key", "secret", "token" or "password" in either case.
func (f facts) keyValue() bool {
	s := f.s
	for i := 0; i < len(s); i++ {
		if s[i] != ':' && s[i] != '=' {
			continue
		}
		k := i - 1
		for k >= 0 && isSpace(s[k]) {
			k--
		}
		if k >= 0 {
			switch s[k] | 0x20 {
			case 'y', 't', 'n', 'd':
				return true
			}
		}
	}
	return false
}

func isDigit(c byte) bool     { return c-'0' < 10 }
func isDigit1to9(c byte) bool { return c-'1' < 9 }
func isColon(c byte) bool     { return c == ':' }
func isHex(c byte) bool       { return c-'0' < 10 || (c|0x20)-'a' < 6 }
func isSpace(c byte) bool     { return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r' }
func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// containsFoldASCII reports whether s contains needle (lowercase ASCII letters) with its
// letters in either ASCII case.
func containsFoldASCII(s, needle string) bool {
	c0 := needle[0]
	for _, first := range [2]byte{c0, c0 - 'a' + 'A'} {
		for i := range indexes(s, first) {
			if len(s)-i >= len(needle) && foldPrefixASCII(s[i+1:], needle[1:]) {
				return true
			}
		}
	}
	return false
}

func foldPrefixASCII(s, needle string) bool {
	for j := 0; j < len(needle); j++ {
		if lowerASCII(s[j]) != needle[j] {
			return false
		}
	}
	return true
}

// lowerContainsAny reports whether strings.ToLower(s) contains one of needles (lowercase
// ASCII), without building the lowercased copy: a non-ASCII rune counts as the ASCII letter it
// lowercases to (U+212A KELVIN SIGN as 'k', U+0130 as 'i'), an invalid byte as U+FFFD.
func lowerContainsAny(s string, needles []string) bool {
	for _, n := range needles {
		for i := 0; i+len(n) <= len(s); i++ {
			if c := s[i]; c < utf8.RuneSelf && lowerASCII(c) != n[0] {
				continue
			}
			if lowerHasPrefix(s[i:], n) {
				return true
			}
		}
	}
	return false
}

// lowerHasPrefix reports whether strings.ToLower(s) starts with needle (lowercase ASCII).
func lowerHasPrefix(s, needle string) bool {
	p := 0
	for j := 0; j < len(needle); j++ {
		if p >= len(s) {
			return false
		}
		if c := s[p]; c < utf8.RuneSelf {
			if lowerASCII(c) != needle[j] {
				return false
			}
			p++
			continue
		}
		r, w := utf8.DecodeRuneInString(s[p:])
		if unicode.ToLower(r) != rune(needle[j]) {
			return false
		}
		p += w
	}
	return true
}
