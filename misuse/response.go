package misuse

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
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
// names no ignored keys (which, for a server that does not report them, says nothing).
func FromResponse(response []byte) (keys []string, total int, ok bool) {
	if !bytes.Contains(response, []byte(ignoredKeysField)) && !bytes.Contains(response, []byte("Ignored input keys")) {
		return nil, 0, false
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(response, &top); err != nil {
		// A bare string result: the notice may still be in it.
		var text string
		if json.Unmarshal(response, &text) == nil {
			if keys, total, ok := fromText(text); ok {
				return capKeysOK(keys, total)
			}
		}
		return nil, 0, false
	}
	if keys, total, ok := fromObject(top); ok {
		return capKeysOK(keys, total)
	}
	var sc map[string]json.RawMessage
	if raw, ok := top["structuredContent"]; ok && json.Unmarshal(raw, &sc) == nil {
		if keys, total, ok := fromObject(sc); ok {
			return capKeysOK(keys, total)
		}
	}
	var content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if raw, ok := top["content"]; ok {
		_ = json.Unmarshal(raw, &content)
	}
	var found []string
	foundTotal, any := 0, false
	for _, item := range content {
		if item.Type != "text" || item.Text == "" {
			continue
		}
		var obj map[string]json.RawMessage
		if t := strings.TrimSpace(item.Text); strings.HasPrefix(t, "{") && json.Unmarshal([]byte(t), &obj) == nil {
			if keys, total, ok := fromObject(obj); ok {
				found, foundTotal, any = keys, total, true
				continue
			}
		}
		if keys, total, ok := fromText(item.Text); ok {
			found, foundTotal, any = keys, total, true
		}
	}
	if !any {
		return nil, 0, false
	}
	return capKeysOK(found, foundTotal)
}

func capKeysOK(keys []string, total int) ([]string, int, bool) {
	k, t := capKeys(keys, total)
	return k, t, true
}

// fromObject reads `_ignoredKeys` (and the total from `_ignoredKeysNote`) of one object.
func fromObject(obj map[string]json.RawMessage) ([]string, int, bool) {
	raw, ok := obj[ignoredKeysField]
	if !ok {
		return nil, 0, false
	}
	var list []any
	if json.Unmarshal(raw, &list) != nil {
		return nil, 0, false
	}
	var keys []string
	for _, v := range list {
		if s, ok := v.(string); ok && s != "" {
			keys = append(keys, s)
		}
	}
	if len(keys) == 0 {
		return nil, 0, false
	}
	total := len(keys)
	var note string
	if raw, ok := obj[ignoredNoteField]; ok && json.Unmarshal(raw, &note) == nil {
		if _, t, ok := fromText(note); ok && t > total {
			total = t
		}
	}
	return keys, total, true
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
			var v string
			if json.Unmarshal([]byte(s[:i+1]), &v) != nil {
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
