// Package campaigns checks the PostHog feature flags that drive an MCP server's interview
// recruitment campaigns and intent-prompt trials before they run ("flag lint").
//
// The rules come from the MCP server's own documentation (seed 004, sections "Intent prompt
// trials" and "Interview recruitment with URL elicitation"): a campaign is one variant of the
// multivariate flag mcp-interview-recruitment, whose JSON payload decides whether the server
// recruits at all, and every release condition must carry the shared exclusion cohort; the
// mcp-intent-prompt flag's payload replaces the description of the SDK's context argument and
// must never be released unconditionally.
//
// Flags are read in PostHog's own JSON (DecodeFlags), from a file or from PostHog's
// feature-flags API (Fetch), and checked by Lint.
package campaigns

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"

	"github.com/mcpulse/mcpulse/internal/safetext"
)

// Flag keys the MCP server evaluates (seed 004).
const (
	RecruitmentFlag  = "mcp-interview-recruitment"
	IntentPromptFlag = "mcp-intent-prompt"
)

// MaxFlagsBytes bounds a flag definitions document (a file or one API page): 32 MiB, far above
// a project's flags, so a wrong file fails with a clear error instead of exhausting memory.
const MaxFlagsBytes = 32 << 20

// Flag is one feature flag definition as PostHog serves it, in the feature-flags API
// (GET /api/projects/{project_id}/feature_flags/, each element of "results") and in the
// local-evaluation response (GET /api/feature_flag/local_evaluation, each element of
// "flags"; posthog-go's FeatureFlag). Only the fields the lint reads are kept.
type Flag struct {
	Key     string  `json:"key"`
	Active  bool    `json:"active"`
	Deleted bool    `json:"deleted"`
	Filters Filters `json:"filters"`
	// Malformed, set by DecodeFlags on a checked flag whose definition does not decode,
	// says which field is wrong (e.g. `"filters.groups.rollout_percentage" is a string, want a
	// number`); the other fields are then zero but Key. Lint reports it as flag_malformed.
	Malformed string `json:"-"`
}

// Filters is a flag's "filters" object: its release conditions ("groups", OR alternatives
// evaluated in order), its variants when multivariate, and its payloads keyed by variant key
// (or "true" for a boolean flag).
type Filters struct {
	Groups       []Condition   `json:"groups"`
	Multivariate *Multivariate `json:"multivariate"`
	// Payloads maps a variant key to its payload. PostHog stores each payload as a
	// JSON-encoded string; the feature-flags API may also return it as a JSON value. Payload
	// gives the JSON text in both cases.
	Payloads map[string]json.RawMessage `json:"payloads"`
}

// Multivariate lists a multivariate flag's variants.
type Multivariate struct {
	Variants []Variant `json:"variants"`
}

// Variant is one value of a multivariate flag. RolloutPercentage (0–100) splits the people a
// condition without a variant override releases.
type Variant struct {
	Key               string   `json:"key"`
	Name              string   `json:"name"`
	RolloutPercentage *float64 `json:"rollout_percentage"`
}

// Condition is one release condition: every property must match (AND), then
// RolloutPercentage (0–100; null means 100) of the matching people are released, to Variant
// when it is set (an override), else to a variant chosen by the variants' split.
type Condition struct {
	Properties        []Property `json:"properties"`
	RolloutPercentage *float64   `json:"rollout_percentage"`
	Variant           *string    `json:"variant"`
}

// Property is one property filter of a condition. A cohort filter has Type "cohort", Key "id"
// and the cohort id as Value (a number, or a string of digits); Negation inverts the match.
type Property struct {
	Key      string          `json:"key"`
	Type     string          `json:"type"`
	Operator string          `json:"operator"`
	Value    json.RawMessage `json:"value"`
	Negation bool            `json:"negation"`
}

// DecodeFlags reads one flag definitions document of at most MaxFlagsBytes: PostHog's
// feature-flags API list ({"results": [...], "next": ...}), its local-evaluation response
// ({"flags": [...]}), or one flag as the API returns it (GET .../feature_flags/{id}/: an object
// with "key"). It returns the flags (deleted ones included, in document order) and the
// API's "next" page URL ("" when absent, null or not a string).
//
// Each flag is decoded on its own, its key first, so one odd flag never stops the lint. A flag
// that is not an object, has no string key or is neither RecruitmentFlag nor IntentPromptFlag
// is returned as far as it decodes (its key only, when its definition does not) or, without a
// key, left out. A checked flag whose definition does not decode is returned with its key and
// Malformed saying which field is wrong; Lint reports it as flag_malformed.
//
// The error cases are about the document as a whole, and say what is expected: not one JSON
// value, not a JSON object, neither or both of "results" and "flags", or one of them not an
// array.
func DecodeFlags(r io.Reader) (flags []Flag, next string, err error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFlagsBytes+1))
	if err != nil {
		return nil, "", fmt.Errorf("reading flag definitions: %w", err)
	}
	if len(data) > MaxFlagsBytes {
		return nil, "", fmt.Errorf("flag definitions exceed %d bytes", MaxFlagsBytes)
	}
	var top json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&top); err != nil {
		return nil, "", fmt.Errorf("flag definitions are not JSON: %s", jsonSyntaxText(err))
	}
	if dec.More() {
		return nil, "", errors.New("flag definitions: more than one JSON value")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, "", errors.New("flag definitions: data after the JSON object")
	}
	var doc map[string]json.RawMessage
	if kind := jsonKind(top); kind != "an object" || json.Unmarshal(top, &doc) != nil {
		return nil, "", fmt.Errorf(`flag definitions are %s; want a JSON object in PostHog's shape: the feature-flags API list {"results": [...]}, the local-evaluation response {"flags": [...]} or one flag {"key": ...}`, kind)
	}
	results, flagsList := present(doc["results"]), present(doc["flags"])
	var list json.RawMessage
	field := ""
	switch {
	case results && flagsList:
		return nil, "", errors.New(`flag definitions have both "results" (feature-flags API) and "flags" (local evaluation)`)
	case results:
		list, field = doc["results"], "results"
	case flagsList:
		list, field = doc["flags"], "flags"
	case present(doc["key"]):
		f, ok := decodeFlag(top)
		if !ok {
			return nil, "", errors.New(`flag definition: "key" is not a string`)
		}
		return []Flag{f}, "", nil
	default:
		return nil, "", errors.New(`flag definitions have neither "results" (feature-flags API list), "flags" (local-evaluation response) nor "key" (one flag)`)
	}
	var items []json.RawMessage
	if kind := jsonKind(list); kind != "an array" || json.Unmarshal(list, &items) != nil {
		return nil, "", fmt.Errorf(`flag definitions: %q is %s; want an array of flags`, field, kind)
	}
	for _, item := range items {
		if f, ok := decodeFlag(item); ok {
			flags = append(flags, f)
		}
	}
	_ = json.Unmarshal(doc["next"], &next) // a next that is not a string is no page
	return flags, next, nil
}

// present reports whether a member is there and not null.
func present(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && !bytes.Equal(raw, []byte("null"))
}

// decodeFlag decodes one element of a flag list, its key first. ok is false when the element
// has no string key. A checked flag that does not decode comes back with Malformed set; any
// other flag with only its key.
func decodeFlag(raw json.RawMessage) (Flag, bool) {
	var head struct {
		Key json.RawMessage `json:"key"`
	}
	if jsonKind(raw) != "an object" || json.Unmarshal(raw, &head) != nil {
		return Flag{}, false
	}
	var key string
	if jsonKind(head.Key) != "a string" || json.Unmarshal(head.Key, &key) != nil || key == "" {
		return Flag{}, false
	}
	var f Flag
	err := json.Unmarshal(raw, &f)
	if err == nil {
		return f, true
	}
	f = Flag{Key: key}
	if key == RecruitmentFlag || key == IntentPromptFlag {
		f.Malformed = unmarshalText(err)
	}
	return f, true
}

// unmarshalText says what is wrong in a flag definition in JSON's terms (field path, JSON
// type found and wanted), never Go's.
func unmarshalText(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "the definition"
		}
		return fmt.Sprintf("%s is %s, want %s", safetext.Quote(field), jsonValueName(te.Value), jsonTypeName(te.Type))
	}
	return "the definition cannot be read: " + jsonSyntaxText(err)
}

// jsonSyntaxText is a JSON decoding error's text without Go's names.
func jsonSyntaxText(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%s (at byte %d)", strings.TrimPrefix(se.Error(), "json: "), se.Offset)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "the document is empty or cut short"
	}
	return "invalid JSON"
}

// jsonKind names the JSON type of a value ("an object", "an array", "a string", "a number",
// "true or false", "null"), "nothing" when it is empty.
func jsonKind(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "true or false"
	case 'n':
		return "null"
	}
	return "a number"
}

// jsonValueName turns UnmarshalTypeError.Value ("string", "number", "bool", "array",
// "object", "number 1.5") into JSON's words.
func jsonValueName(v string) string {
	switch {
	case v == "string":
		return "a string"
	case v == "bool":
		return "true or false"
	case v == "array":
		return "an array"
	case v == "object":
		return "an object"
	case strings.HasPrefix(v, "number"):
		return "a number"
	}
	return "a JSON " + safetext.Escape(v)
}

// jsonTypeName says which JSON value decodes into t.
func jsonTypeName(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "another type"
}

// PayloadText returns the JSON text of a stored payload: the content of a JSON-encoded string
// (how PostHog stores filters.payloads), or the value itself when it is not a string. ok is
// false when there is no payload (absent or null).
func PayloadText(raw json.RawMessage) (text []byte, ok bool, err error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, false, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, true, err
		}
		return []byte(s), true, nil
	}
	return raw, true, nil
}

// sortedKeys returns m's keys in order, so reports are stable.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
