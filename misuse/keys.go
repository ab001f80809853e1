package misuse

import (
	"strings"

	"github.com/mcpulse/mcpulse/internal/safetext"
)

// MaxKeys is how many ignored-key paths one tool call keeps; IgnoredKeys.Total counts the rest.
// The cap is PostHog's MCP server's (pull request #111786: "the notice says how many keys were
// cut off at the 20 key cap") and docs/DESIGN.md §2's for $mcp_ignored_keys.
const MaxKeys = 20

// Source says where a tool call's ignored keys came from.
type Source string

// The sources, in the order Derive tries them.
const (
	// SourceReported: the event carried $mcp_ignored_keys (DESIGN.md §2).
	SourceReported Source = "reported"
	// SourceResponse: the tool result named them (`_ignoredKeys` or the "Ignored input keys"
	// notice).
	SourceResponse Source = "response"
	// SourceSchema: derived from the arguments and the tool's served input schema.
	SourceSchema Source = "schema"
	// SourceNotMeasurable: none of the above could say; Reason tells why.
	SourceNotMeasurable Source = "not_measurable"
)

// Reason says why a call's ignored keys are not measurable; "" when they are.
type Reason string

// The reasons. The consumer stores them as text (tool_calls.ignored_keys_reason); rollups
// group them as no_schema, truncated (the ones named *_truncated or *_redacted) and other.
const (
	ReasonNone Reason = ""
	// ReasonNoSchema: no $mcp_tools_list listing with this tool's schema judged the call (its
	// session's listing, else its server name and version's: Listings.Judge).
	ReasonNoSchema Reason = "no_schema"
	// ReasonNoArguments: the event has no $mcp_parameters (the SDK can be told to drop them,
	// and a beforeSend hook can remove them).
	ReasonNoArguments Reason = "no_arguments"
	// ReasonArgumentsInvalid: $mcp_parameters or its arguments are not JSON, or the arguments
	// are not a JSON object.
	ReasonArgumentsInvalid Reason = "arguments_invalid"
	// ReasonArgumentsTruncated: the SDK cut the arguments where a key could hide (depth 10,
	// 100 entries per object or array, or the 100 KB event budget; @posthog/mcp
	// src/extensions/truncation.ts).
	ReasonArgumentsTruncated Reason = "arguments_truncated"
	// ReasonArgumentsRedacted: the SDK replaced the value of a sensitive-looking key
	// (token, password, api_key, ...) with "[redacted]" where the schema admits an object or
	// an array, so keys below it are unknown (@posthog/mcp src/extensions/mcp-payloads.ts).
	ReasonArgumentsRedacted Reason = "arguments_redacted"
	// ReasonArgumentsTooDeep: the arguments nest deeper than MaxDepth.
	ReasonArgumentsTooDeep Reason = "arguments_too_deep"
	// ReasonSchemaTruncated: the served schema, as the SDK captured it in the tools/list
	// event, was cut or redacted exactly where these arguments go.
	ReasonSchemaTruncated Reason = "schema_truncated"
	// ReasonRootUnion: the schema's root is a union (anyOf/oneOf): such a tool reshapes its
	// input, and telling a consumed key from a dropped one is guesswork (PostHog #111786
	// gives root unions no notice either).
	ReasonRootUnion Reason = "root_union"
	// ReasonSchemaUnsupported: the served schema could not be compiled (not JSON, a remote
	// $ref, a $ref that resolves nowhere, a pattern Go's regexp cannot run, ...).
	ReasonSchemaUnsupported Reason = "schema_unsupported"
	// ReasonSchemaOverLimit: the served schema passes a SchemaLimits bound (bytes, members of
	// one object, nesting depth) and was never compiled (CheckSchema). Counted with
	// not_measurable_other.
	ReasonSchemaOverLimit Reason = "schema_over_limit"
	// ReasonArgumentsValidated: the arguments were captured after the server's validation had
	// already dropped the keys its schema does not declare, so none can be found
	// (@shinzolabs/instrumentation-mcp 1.1 records mcp.request.argument.* inside the tool
	// handler). Such a call's $mcp_parameters holds MarkerArgumentsValidated as its arguments.
	ReasonArgumentsValidated Reason = "arguments_validated"
)

// MarkerArgumentsValidated, as the arguments of $mcp_parameters
// ({"request":{"params":{"arguments":MarkerArgumentsValidated}}}), says the arguments were
// seen only after validation (ReasonArgumentsValidated): an ingest path that receives such
// arguments (package ingest/otlp) writes it instead of arguments that would pass for raw ones.
const MarkerArgumentsValidated = "[mcpulse: arguments seen after validation]"

// IgnoredKeys is the outcome for one tool call.
type IgnoredKeys struct {
	// Keys are dotted paths of the input keys the tool ignored, in the order they appear in
	// the arguments; array items by index ("series.0.math"); at most MaxKeys; each a KeyPath
	// (control characters masked as '?', at most safetext.MaxKeyPath bytes). Nil when none or not measurable.
	Keys []string
	// Total is how many keys were ignored before the cap (>= len(Keys)).
	Total int
	// Source says where Keys came from.
	Source Source
	// Reason says why not measurable ("" when Source is not SourceNotMeasurable).
	Reason Reason
}

// Measurable reports whether the call's ignored keys are known (possibly none).
func (k IgnoredKeys) Measurable() bool { return k.Source != SourceNotMeasurable && k.Source != "" }

// notMeasurable is the outcome for reason r.
func notMeasurable(r Reason) IgnoredKeys {
	return IgnoredKeys{Source: SourceNotMeasurable, Reason: r}
}

// MaskControl replaces C0 and C1 control characters, DEL and the line separators U+2028 and
// U+2029 with '?'. Key names are caller input shown to people and agents; JSON.stringify
// leaves U+2028/U+2029 raw, so they break lines in agent-facing text (PostHog #111786 masks
// the same set before it reports keys).
func MaskControl(s string) string {
	if strings.IndexFunc(s, IsControl) < 0 {
		return s
	}
	return strings.Map(func(r rune) rune {
		if IsControl(r) {
			return '?'
		}
		return r
	}, s)
}

// KeyPath is an ignored-key path as it is stored and shown, whichever source named it (the
// event's $mcp_ignored_keys, the tool's response, the arguments against the schema):
// MaskControl, then safetext.Bound to safetext.MaxKeyPath bytes, so that one key of 900 KB
// is stored as about 1 KB, cut and marked with its length and hash (two long paths that share
// their first kilobyte stay distinct).
func KeyPath(s string) string { return safetext.Bound(MaskControl(s), safetext.MaxKeyPath) }

// IsControl reports whether MaskControl masks r: C0 and C1 controls, DEL, U+2028, U+2029.
func IsControl(r rune) bool {
	return r < 0x20 || (r >= 0x7f && r < 0xa0) || r == 0x2028 || r == 0x2029
}

// keyList collects ignored-key paths under the cap.
type keyList struct {
	keys  []string
	total int
}

func (l *keyList) add(path string) {
	l.total++
	if len(l.keys) < MaxKeys {
		l.keys = append(l.keys, KeyPath(path))
	}
}

// capKeys makes stored paths of (KeyPath) and caps a key list read from elsewhere; total is at least len(keys).
func capKeys(keys []string, total int) ([]string, int) {
	if total < len(keys) {
		total = len(keys)
	}
	if len(keys) == 0 {
		return nil, total
	}
	n := min(len(keys), MaxKeys)
	out := make([]string, n)
	for i := range n {
		out[i] = KeyPath(keys[i])
	}
	return out, total
}
