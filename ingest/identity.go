package ingest

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode/utf8"
)

// IdentityHash returns the identity hash that scopes interview suppression to one user of one
// PostHog instance (DESIGN.md §3; PostHog's MCP guide): the lowercase hex SHA-256 of the UTF-8
// bytes of exactly what JavaScript's JSON.stringify([instanceURL, distinctID]) returns. The
// result is 64 characters.
//
// Invalid UTF-8 is hashed as one U+FFFD per invalid byte, which is how encoding/json decodes
// it, so a raw and a Parse'd distinct_id hash alike. (JavaScript's UTF-8 decoders collapse a
// truncated multi-byte sequence into a single U+FFFD, so such bytes could hash differently
// there; JSON produced by a JavaScript sender is always valid UTF-8. A lone UTF-16 surrogate,
// which JSON.stringify writes as a \udXXX escape, cannot be held in a Go string at all.)
func IdentityHash(instanceURL, distinctID string) string {
	var b strings.Builder
	b.Grow(len(instanceURL) + len(distinctID) + 8)
	b.WriteByte('[')
	writeJSString(&b, instanceURL)
	b.WriteByte(',')
	writeJSString(&b, distinctID)
	b.WriteByte(']')
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])
}

// writeJSString writes s as ECMAScript's JSON.stringify quotes a string (ECMA-262
// QuoteJSONString): '"' and '\' backslash-escaped; \b \t \n \f \r as short escapes; every
// other code point below U+0020 as \u00xx with lowercase hex; everything else, including
// U+2028, U+2029, '<', '>' and '&', written as is. Go's encoding/json differs on the last
// group, which is why the hash cannot use it.
func writeJSString(b *strings.Builder, s string) {
	const hexDigits = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\f':
			b.WriteString(`\f`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte(hexDigits[r>>4])
			b.WriteByte(hexDigits[r&0xf])
		default:
			b.WriteRune(r) // RuneError for invalid bytes: U+FFFD
		}
	}
	b.WriteByte('"')
}
