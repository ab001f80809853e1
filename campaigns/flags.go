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
	"sort"
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

// flagsDocument is either shape PostHog serves: the API list ({"count", "next", "previous",
// "results"}) or the local-evaluation response ({"flags", "group_type_mapping", "cohorts"}).
type flagsDocument struct {
	Results *[]Flag `json:"results"`
	Flags   *[]Flag `json:"flags"`
	Next    *string `json:"next"`
	Key     *string `json:"key"`
}

// DecodeFlags reads one flag definitions document of at most MaxFlagsBytes: PostHog's
// feature-flags API list ({"results": [...], "next": ...}), its local-evaluation response
// ({"flags": [...]}), or one flag as the API returns it (GET .../feature_flags/{id}/: an object
// with "key"). It returns the flags (deleted ones included, in document order) and the
// API's "next" page URL ("" when absent or null). A document that is not one JSON object, has
// neither or both of "results" and "flags", or has a flag without a key is an error that says
// where.
func DecodeFlags(r io.Reader) (flags []Flag, next string, err error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFlagsBytes+1))
	if err != nil {
		return nil, "", fmt.Errorf("reading flag definitions: %w", err)
	}
	if len(data) > MaxFlagsBytes {
		return nil, "", fmt.Errorf("flag definitions exceed %d bytes", MaxFlagsBytes)
	}
	var doc flagsDocument
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		return nil, "", fmt.Errorf("flag definitions are not PostHog's JSON: %w", err)
	}
	if dec.More() {
		return nil, "", errors.New("flag definitions: more than one JSON value")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, "", errors.New("flag definitions: data after the JSON object")
	}
	switch {
	case doc.Results != nil && doc.Flags != nil:
		return nil, "", errors.New(`flag definitions have both "results" (feature-flags API) and "flags" (local evaluation)`)
	case doc.Results != nil:
		flags = *doc.Results
	case doc.Flags != nil:
		flags = *doc.Flags
	case doc.Key != nil:
		var f Flag
		if err := json.Unmarshal(data, &f); err != nil {
			return nil, "", fmt.Errorf("flag definition is not PostHog's JSON: %w", err)
		}
		flags = []Flag{f}
	default:
		return nil, "", errors.New(`flag definitions have neither "results" (feature-flags API list), "flags" (local-evaluation response) nor "key" (one flag)`)
	}
	for i, f := range flags {
		if f.Key == "" {
			return nil, "", fmt.Errorf("flag definitions: flag %d has no key", i)
		}
	}
	if doc.Next != nil {
		next = *doc.Next
	}
	return flags, next, nil
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
