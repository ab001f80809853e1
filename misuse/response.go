package misuse

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// What PostHog's MCP server adds to a tool result when the schema dropped input keys
// (pull request #111786, "report ignored input keys"):
//   - an object result gets the keys `_ignoredKeys` (the dotted paths, at most 20) and
//     `_ignoredKeysNote` (the notice below);
//   - an array result is wrapped as {results, _ignoredKeys, _ignoredKeysNote};
//   - a string or formatted text result gets the notice appended: "Ignored input keys: " and
//     the paths, JSON-quoted, separated by ", ", then an explanation, and how many were cut
//     off at the 20-key cap.
//
// The result reaches the SDK as an MCP CallToolResult ({content: [{type: "text", text}],
// structuredContent?, isError?}), which it captures as $mcp_response (its text items cut at
// 32,768 UTF-16 units; src/extensions/truncation.ts).
const (
	ignoredKeysField = "_ignoredKeys"
	ignoredNoteField = "_ignoredKeysNote"
	noticePrefix     = "Ignored input keys: "
)

// FromResponse reads the ignored keys a server reported in a tool result: `_ignoredKeys`
// (with the count from `_ignoredKeysNote`) at the top of the result, in its
// structuredContent, or in a text item holding a JSON object; else the "Ignored input keys:"
// notice in a text item (the last one found). keys are masked (MaskControl) and capped at
// MaxKeys; total counts the keys the notice says were cut off too. ok is false when the result
// names no ignored keys (which, for a server that does not report them, says nothing), and
// when it is not valid JSON.
//
// Its results are those of decoding the result with encoding/json (into maps of raw values,
// the content items into structs of type and text), without the cost: a literal search
// rejects a result that spells neither marker; the objects' members are then found by a walk
// that trusts the JSON to be valid, and validJSON checks that it is before keys are returned.
func FromResponse(response []byte) (keys []string, total int, ok bool) {
	if !mentionsIgnoredKeys(response) {
		return nil, 0, false
	}
	if t := (boundaries{b: response}); t.PeekKind() == '"' {
		// A bare string result: the notice may still be in it.
		var text string
		if json.Unmarshal(response, &text) == nil {
			if keys, total, ok := fromText(text); ok {
				return capKeysOK(keys, total)
			}
		}
		return nil, 0, false
	}
	top, ok := scanObject(response)
	if !ok {
		return nil, 0, false
	}
	keys, total, ok = fromTop(top)
	if !ok || !validJSON(response) {
		return nil, 0, false
	}
	return capKeysOK(keys, total)
}

// fromTop reads the keys from the members of a result object.
func fromTop(top members) ([]string, int, bool) {
	if keys, total, ok := fromObject(top); ok {
		return keys, total, true
	}
	if sc, ok := scanObject(top.structuredContent); ok {
		if keys, total, ok := fromObject(sc); ok {
			return keys, total, true
		}
	}
	var found []string
	foundTotal, any := 0, false
	for _, item := range contentItems(top.content) {
		if item.Type != "text" || item.Text == "" {
			continue
		}
		if t := strings.TrimSpace(item.Text); strings.HasPrefix(t, "{") {
			if obj, ok := scanObject([]byte(t)); ok {
				if keys, total, ok := fromObject(obj); ok && validJSON([]byte(t)) {
					found, foundTotal, any = keys, total, true
					continue
				}
			}
		}
		if keys, total, ok := fromText(item.Text); ok {
			found, foundTotal, any = keys, total, true
		}
	}
	return found, foundTotal, any
}

// mentionsIgnoredKeys tells whether b holds either marker, `_ignoredKeys` or
// "Ignored input keys", literally (an escape spelling one of them differently does not count).
// A search costs a restart at each byte equal to the first of what it looks for: JSON is full
// of '_', so `_ignoredKeys` is looked for from its rarer "Keys". (One search for "gnored",
// which both markers hold, is slower: 'g' is common in text.)
func mentionsIgnoredKeys(b []byte) bool {
	const before = "_ignored"
	for i := 0; ; {
		j := bytes.Index(b[i:], []byte("Keys"))
		if j < 0 {
			break
		}
		j += i
		if j >= len(before) && string(b[j-len(before):j]) == before {
			return true
		}
		i = j + len("Keys")
	}
	return bytes.Contains(b, []byte("Ignored input keys"))
}

func capKeysOK(keys []string, total int) ([]string, int, bool) {
	k, t := capKeys(keys, total)
	return k, t, true
}

// validJSON is json.Valid, faster: jsontext's grammar is RFC 8259's, as encoding/json's is,
// with the same nesting limit (10,000), once it allows what encoding/json allows, repeated
// names and invalid UTF-8 (unpaired surrogate escapes included).
func validJSON(b []byte) bool {
	return jsontext.Value(b).IsValid(validOptions...)
}

var validOptions = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

// members are the raw values (nil when absent; the last when repeated) of the members of an
// object that FromResponse reads.
type members struct {
	ignoredKeys, ignoredNote, structuredContent, content []byte
}

// scanObject finds the members of the JSON object b (after blanks), trusting it to be valid
// (it reads it with boundaries): it is false when b is not an object, and on some, not all,
// invalid JSON. Names are compared as decoded, as a map's keys would be.
func scanObject(b []byte) (m members, ok bool) {
	t := boundaries{b: b}
	if t.PeekKind() != '{' {
		return m, false
	}
	t.i++
	for {
		switch t.PeekKind() {
		case '}':
			return m, true
		case '"':
		default:
			return m, false
		}
		name, err := t.ReadValue()
		if err != nil {
			return m, false
		}
		value, err := t.ReadValue()
		if err != nil || len(value) == 0 {
			return m, false
		}
		if bytes.IndexByte(name, '\\') >= 0 {
			s, ok := decodeString(name)
			if !ok {
				return m, false
			}
			name = []byte(`"` + s + `"`)
		}
		switch string(name[1 : len(name)-1]) {
		case ignoredKeysField:
			m.ignoredKeys = value
		case ignoredNoteField:
			m.ignoredNote = value
		case "structuredContent":
			m.structuredContent = value
		case "content":
			m.content = value
		}
	}
}

// decodeString decodes the JSON string literal lit as json.Unmarshal does (false when it
// rejects it): a literal of valid UTF-8 with no escape or control character is its own value;
// else jsontext.AppendUnquote decodes it, and json.Unmarshal what that rejects (invalid UTF-8
// and unpaired surrogates, replaced by json.Unmarshal by rules of its own; invalid literals).
func decodeString[T ~string | ~[]byte](lit T) (string, bool) {
	if plainString(lit) {
		return string(lit[1 : len(lit)-1]), true
	}
	if b, err := jsontext.AppendUnquote(nil, lit); err == nil {
		return string(b), true
	}
	var s string
	if json.Unmarshal([]byte(lit), &s) != nil {
		return "", false
	}
	return s, true
}

// plainString tells whether lit is a JSON string literal with no escape or control
// character, of valid UTF-8.
func plainString[T ~string | ~[]byte](lit T) bool {
	if len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' {
		return false
	}
	ascii := true
	for i := 1; i < len(lit)-1; i++ {
		switch c := lit[i]; {
		case c < 0x20 || c == '"' || c == '\\':
			return false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return ascii || utf8.Valid([]byte(lit))
}

// fromObject reads `_ignoredKeys` (and the total from `_ignoredKeysNote`) of one object.
func fromObject(obj members) ([]string, int, bool) {
	if obj.ignoredKeys == nil {
		return nil, 0, false
	}
	keys, ok := stringList(obj.ignoredKeys)
	if !ok || len(keys) == 0 {
		return nil, 0, false
	}
	total := len(keys)
	if len(obj.ignoredNote) > 0 && obj.ignoredNote[0] == '"' {
		if note, ok := decodeString(obj.ignoredNote); ok {
			if _, t, ok := fromText(note); ok && t > total {
				total = t
			}
		}
	}
	return keys, total, true
}

// stringList returns the non-empty strings of the JSON array raw; false when raw is not an
// array or, as with json.Unmarshal into []any, holds a number beyond float64.
func stringList(raw []byte) ([]string, bool) {
	if string(raw) == "null" {
		return nil, true
	}
	t := boundaries{b: raw}
	if t.PeekKind() != '[' {
		return nil, false
	}
	t.i++
	var keys []string
	for {
		switch t.PeekKind() {
		case ']':
			return keys, true
		case '"':
			v, err := t.ReadValue()
			if err != nil {
				return nil, false
			}
			s, ok := decodeString(v)
			if !ok {
				return nil, false
			}
			if s != "" {
				keys = append(keys, s)
			}
		case 'n', 't', 'f':
			if t.SkipValue() != nil {
				return nil, false
			}
		default: // numbers, arrays, objects (and the end): decoded the general way, for its errors
			return stringListDecoded(raw)
		}
	}
}

func stringListDecoded(raw []byte) ([]string, bool) {
	var list []any
	if json.Unmarshal(raw, &list) != nil {
		return nil, false
	}
	var keys []string
	for _, v := range list {
		if s, ok := v.(string); ok && s != "" {
			keys = append(keys, s)
		}
	}
	return keys, true
}

// contentItem is an item of a result's content as json.Unmarshal into it reads it.
type contentItem struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// contentItems reads a result's content as json.Unmarshal into []contentItem does, errors
// ignored: an item that is not an object is a zero item, a member that is not a string is
// skipped, names match in any case. Names it cannot compare quickly (escaped, not ASCII) go
// to json.Unmarshal.
func contentItems(raw []byte) []contentItem {
	t := boundaries{b: raw}
	if t.PeekKind() != '[' {
		return nil
	}
	t.i++
	var items []contentItem
	for {
		switch t.PeekKind() {
		case ']':
			return items
		case 0:
			return nil
		}
		v, err := t.ReadValue()
		if err != nil || len(v) == 0 {
			return nil
		}
		var item contentItem
		if v[0] == '{' && !contentItemFields(v, &item) {
			var all []contentItem
			_ = json.Unmarshal(raw, &all)
			return all
		}
		items = append(items, item)
	}
}

// contentItemFields sets item's fields from the object obj; false when a name is escaped or
// not ASCII.
func contentItemFields(obj []byte, item *contentItem) bool {
	t := boundaries{b: obj, i: 1}
	for t.PeekKind() == '"' {
		name, err := t.ReadValue()
		if err != nil || bytes.IndexByte(name, '\\') >= 0 {
			return false
		}
		for _, c := range name {
			if c >= utf8.RuneSelf {
				return false
			}
		}
		value, err := t.ReadValue()
		if err != nil || len(value) == 0 {
			return false
		}
		name = name[1 : len(name)-1]
		var field *string
		if bytes.EqualFold(name, []byte("type")) {
			field = &item.Type
		} else if bytes.EqualFold(name, []byte("text")) {
			field = &item.Text
		}
		if field != nil && value[0] == '"' {
			s, ok := decodeString(value)
			if !ok {
				return false
			}
			*field = s
		}
	}
	return true
}

// Counts a notice may give after its list: "and 5 more", "(25 total)", "25 keys in total",
// "first 20 of 25".
var (
	andMoreRE = regexp.MustCompile(`(?i)\band (\d{1,9}) (?:more|others?)\b`)
	totalRE   = regexp.MustCompile(`(?i)\b(\d{1,9}) (?:keys? )?(?:in )?total\b|\btotal(?: of)?:? (\d{1,9})\b|\bof (\d{1,9})\b`)
)

// fromText parses the last "Ignored input keys: ..." notice in a text.
func fromText(text string) ([]string, int, bool) {
	i := strings.LastIndex(text, noticePrefix)
	if i < 0 {
		return nil, 0, false
	}
	rest := text[i+len(noticePrefix):]
	var keys []string
	for {
		rest = strings.TrimLeft(rest, " ")
		if rest == "" {
			break
		}
		var key string
		if rest[0] == '"' {
			n, s, ok := jsonStringPrefix(rest)
			if !ok {
				break
			}
			key, rest = s, rest[n:]
		} else {
			end := len(rest)
			for _, sep := range []string{", ", ". ", "\n", " ("} {
				if j := strings.Index(rest, sep); j >= 0 && j < end {
					end = j
				}
			}
			key, rest = strings.TrimSuffix(rest[:end], "."), rest[end:]
		}
		if key == "" {
			break
		}
		keys = append(keys, key)
		if !strings.HasPrefix(rest, ",") {
			break
		}
		rest = rest[1:]
	}
	if len(keys) == 0 {
		return nil, 0, false
	}
	total := len(keys)
	// The count, if any, is in the rest of the notice's paragraph.
	if j := strings.Index(rest, "\n\n"); j >= 0 {
		rest = rest[:j]
	}
	if !strings.ContainsAny(rest, "0123456789") { // both expressions need a digit (\d is ASCII)
		return keys, total, true
	}
	if m := andMoreRE.FindStringSubmatch(rest); m != nil {
		if n, err := strconv.Atoi(m[1]); err == nil {
			total = len(keys) + n
		}
	} else if m := totalRE.FindStringSubmatch(rest); m != nil {
		for _, g := range m[1:] {
			if n, err := strconv.Atoi(g); err == nil && n > total {
				total = n
			}
		}
	}
	return keys, total, true
}

// jsonStringPrefix decodes the JSON string at the start of s: its length in s, its value.
func jsonStringPrefix(s string) (int, string, bool) {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			v, ok := decodeString(s[:i+1])
			if !ok {
				return 0, "", false
			}
			if !utf8.ValidString(v) {
				v = strings.ToValidUTF8(v, "\uFFFD")
			}
			return i + 1, v, true
		}
	}
	return 0, "", false
}
