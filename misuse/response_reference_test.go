package misuse

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// FromResponseReference and ValidJSON are for the external tests.
var (
	FromResponseReference = fromResponseReference
	ValidJSON             = validJSON
)

// fromResponseReference is FromResponse as it was before it learned to skip the generic
// decoding: json.Unmarshal into maps of raw values, two literal prefilters. The differential
// tests hold FromResponse to its results.
func fromResponseReference(response []byte) (keys []string, total int, ok bool) {
	if !bytes.Contains(response, []byte(ignoredKeysField)) && !bytes.Contains(response, []byte("Ignored input keys")) {
		return nil, 0, false
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(response, &top); err != nil {
		var text string
		if json.Unmarshal(response, &text) == nil {
			if keys, total, ok := fromTextReference(text); ok {
				return capKeysOK(keys, total)
			}
		}
		return nil, 0, false
	}
	if keys, total, ok := fromObjectReference(top); ok {
		return capKeysOK(keys, total)
	}
	var sc map[string]json.RawMessage
	if raw, ok := top["structuredContent"]; ok && json.Unmarshal(raw, &sc) == nil {
		if keys, total, ok := fromObjectReference(sc); ok {
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
			if keys, total, ok := fromObjectReference(obj); ok {
				found, foundTotal, any = keys, total, true
				continue
			}
		}
		if keys, total, ok := fromTextReference(item.Text); ok {
			found, foundTotal, any = keys, total, true
		}
	}
	if !any {
		return nil, 0, false
	}
	return capKeysOK(found, foundTotal)
}

func fromObjectReference(obj map[string]json.RawMessage) ([]string, int, bool) {
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
		if _, t, ok := fromTextReference(note); ok && t > total {
			total = t
		}
	}
	return keys, total, true
}

// fromTextReference is fromText as it was, decoding quoted keys with json.Unmarshal.
func fromTextReference(text string) ([]string, int, bool) {
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
			n, s, ok := jsonStringPrefixReference(rest)
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

func jsonStringPrefixReference(s string) (int, string, bool) {
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
