// Package safetext shows caller-chosen strings (tool names, distinct ids, ignored-key paths,
// client names) to people without letting them hide or reorder what is shown: every
// character that is not graphic is written as a visible escape.
package safetext

import (
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
