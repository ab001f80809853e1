package ingest

import (
	"crypto/sha256"
	"encoding/hex"
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
	b := make([]byte, 0, len(instanceURL)+len(distinctID)+8)
	b = append(b, '[')
	b = AppendJSString(b, instanceURL)
	b = append(b, ',')
	b = AppendJSString(b, distinctID)
	b = append(b, ']')
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// AppendJSString appends s quoted as ECMAScript's JSON.stringify quotes a string (ECMA-262
// QuoteJSONString): '"' and '\' backslash-escaped; \b \t \n \f \r as short escapes; every other
// code point below U+0020 as \u00xx with lowercase hex; everything else, including U+2028,
// U+2029, '<', '>' and '&', written as is (invalid UTF-8 as U+FFFD). Go's encoding/json differs
// on the last group, which is why the identity hash, and a corpus that must look as a PostHog
// SDK sends it, cannot use it.
func AppendJSString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == '"':
			b = append(b, `\"`...)
		case r == '\\':
			b = append(b, `\\`...)
		case r == '\b':
			b = append(b, `\b`...)
		case r == '\t':
			b = append(b, `\t`...)
		case r == '\n':
			b = append(b, `\n`...)
		case r == '\f':
			b = append(b, `\f`...)
		case r == '\r':
			b = append(b, `\r`...)
		case r < 0x20:
			b = append(b, '\\', 'u', '0', '0', hexDigits[r>>4], hexDigits[r&0xf])
		default:
			b = utf8.AppendRune(b, r) // RuneError for invalid bytes: U+FFFD
		}
	}
	return append(b, '"')
}

// CheckIdentity reports what Parse refuses in the two parts of an identity when they come as Go
// strings rather than inside an event (a command-line flag, a line of a file): a distinct_id or
// instance_url holding invalid UTF-8, which includes a UTF-16 surrogate encoded on its own
// (Go cannot keep either as JavaScript does, so IdentityHash would hash U+FFFD instead and
// name another identity), and a distinct_id longer than MaxDistinctIDLength characters. An
// empty string is not checked. The error is a *ValidationError with Parse's field paths.
func CheckIdentity(instanceURL, distinctID string) error {
	v := &ValidationError{}
	if !utf8.ValidString(distinctID) {
		v.add("distinct_id", notJSExact)
	} else if n := utf8.RuneCountInString(distinctID); n > MaxDistinctIDLength {
		v.add("distinct_id", "%d characters, at most %d allowed", n, MaxDistinctIDLength)
	}
	if !utf8.ValidString(instanceURL) {
		v.add("properties.instance_url", notJSExact)
	}
	if len(v.Problems) > 0 {
		return v
	}
	return nil
}
