// Package safetext shows caller-chosen strings (tool names, distinct ids, ignored-key paths,
// client names) to people without letting them hide or reorder what is shown: every
// character that is not graphic is written as a visible escape.
package safetext

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Hidden reports whether r does not show as itself: every character unicode.IsGraphic
// rejects (C0 and C1 controls, DEL, the format characters including the bidirectional
// overrides, embeddings, isolates and marks U+202A–U+202E, U+2066–U+2069, U+200E, U+200F,
// U+061C and zero-width characters, the separators U+2028 and U+2029, private-use,
// surrogate and unassigned code points), and U+FFFD, which stands for invalid UTF-8.
func Hidden(r rune) bool { return !unicode.IsGraphic(r) || r == utf8.RuneError }

// Escape returns s with each Hidden character written as its Go escape (strconv.QuoteRuneToGraphic
// without the quotes): "hx-rlo\u202egnp.exe" is shown as `hx-rlo\u202egnp.exe`, a newline as
// `\n`, a byte of invalid UTF-8 as `\ufffd`. Spaces and every visible character are kept, so
// ordinary text, including non-Latin scripts and emoji, is returned unchanged. Escaping an
// escaped string changes nothing.
func Escape(s string) string {
	if strings.IndexFunc(s, Hidden) < 0 && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for _, r := range s {
		switch {
		case !Hidden(r):
			b.WriteRune(r)
			continue
		case r == utf8.RuneError:
			b.WriteString(`\ufffd`)
			continue
		}
		q := strconv.QuoteRuneToGraphic(r)
		b.WriteString(q[1 : len(q)-1])
	}
	return b.String()
}

// QuoteRunes is how many characters of a caller's value Quote shows.
const QuoteRunes = 64

// Quote renders a caller's value for an error message that names it: double-quoted with Go
// escapes (strconv.Quote, so quotes, backslashes, invalid UTF-8 and every character Hidden
// reports are written as escapes), cut to its first QuoteRunes characters and then followed
// by "…" and the value's whole length in bytes. A 100 KB value thus costs about a hundred
// bytes of message: `"2026-01-01xxxx…xxxx"… (102400 bytes)`. A byte of invalid UTF-8 counts
// as one character.
func Quote(s string) string {
	n, cut := 0, len(s)
	for i := range s {
		if n == QuoteRunes {
			cut = i
			break
		}
		n++
	}
	q := Escape(strconv.Quote(s[:cut]))
	if cut < len(s) {
		q += "… (" + strconv.Itoa(len(s)) + " bytes)"
	}
	return q
}

// The bounds on caller-chosen text that mcpulse stores, in bytes. A value over its bound is
// stored as Bound makes it.
const (
	// MaxName bounds a name or version that is a stored dimension: tool, client and server
	// names and versions, event names.
	MaxName = 256
	// MaxKeyPath bounds an ignored-key path (a dotted path of argument keys).
	MaxKeyPath = 1024
	// MaxText bounds a free text that is stored and shown: error and exception messages.
	MaxText = 8192
)

// boundHashHex is how many hex digits of the value's SHA-256 a bounded value carries (48 bits).
const boundHashHex = 12

// Bound returns s when it is at most limit bytes long; otherwise the longest prefix of s that
// ends on a UTF-8 character boundary and leaves room for a marker, followed by the marker
// "…[N bytes, sha256:H]", where N is len(s) and H the first 12 hex digits of s's SHA-256. The
// result is then at most limit bytes. Two long values that share their prefix stay distinct
// (unless their hashes' first 48 bits agree), and the same value is always bounded the same
// way, so a bounded value can be a key, a rollup dimension or a join between two sources.
// Bound(Bound(s, limit), limit) == Bound(s, limit). limit must leave room for the marker (at
// least 64 bytes); a smaller limit is taken as 64.
func Bound(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	limit = max(limit, 64)
	sum := sha256.Sum256([]byte(s))
	marker := "…[" + strconv.Itoa(len(s)) + " bytes, sha256:" + hex.EncodeToString(sum[:])[:boundHashHex] + "]"
	cut := limit - len(marker)
	// Back up to the start of a character: at most utf8.UTFMax-1 bytes, so that invalid
	// UTF-8 (continuation bytes without a start) cannot make it scan further.
	for i := 0; i < utf8.UTFMax-1 && cut > 0 && !utf8.RuneStart(s[cut]); i++ {
		cut--
	}
	return s[:cut] + marker
}

// Bounded reports whether s is a value Bound cut: it ends with Bound's marker.
func Bounded(s string) bool {
	i := strings.LastIndex(s, "…[")
	if i < 0 || !strings.HasSuffix(s, "]") {
		return false
	}
	m := s[i+len("…["):]
	j := strings.Index(m, " bytes, sha256:")
	if j < 0 {
		return false
	}
	n, err := strconv.Atoi(m[:j])
	h := m[j+len(" bytes, sha256:") : len(m)-1]
	return err == nil && n > 0 && len(h) == boundHashHex && strings.Trim(h, "0123456789abcdef") == ""
}
