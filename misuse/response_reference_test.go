package misuse

import (
	"bytes"
	"encoding/json"
	"strings"
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
			if keys, total, ok := fromText(text); ok {
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
		if keys, total, ok := fromText(item.Text); ok {
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
		if _, t, ok := fromText(note); ok && t > total {
			total = t
		}
	}
	return keys, total, true
}
