package misuse

import (
	"regexp"
	"strings"
)

// ErrorClass is what kind of mistake a failed tool call's error message shows.
type ErrorClass string

// The classes. The validation classes are only given to messages an MCP SDK's own argument
// validation produces, so a tool's own error that happens to say "expected number" stays
// ClassOther.
const (
	// ClassNone: no error message.
	ClassNone ErrorClass = ""
	// ClassValidationType: an argument has the wrong type.
	ClassValidationType ErrorClass = "validation_type"
	// ClassValidationRequired: a required argument is missing.
	ClassValidationRequired ErrorClass = "validation_required"
	// ClassValidationUnknownKey: a strict schema refused a key it does not declare (the
	// ignored-key mistake, on a server that rejects instead of dropping).
	ClassValidationUnknownKey ErrorClass = "validation_unknown_key"
	// ClassValidationOther: any other input-validation failure (an enum value, a bound, a
	// pattern, too many elements).
	ClassValidationOther ErrorClass = "validation_other"
	// ClassUnknownTool: the server has no tool of that name (or has it disabled, so it is not
	// listed): a hallucinated or stale tool name.
	ClassUnknownTool ErrorClass = "unknown_tool"
	// ClassOther: any other error.
	ClassOther ErrorClass = "other"
)

// IsValidation reports whether c is one of the input-validation classes.
func (c ErrorClass) IsValidation() bool {
	switch c {
	case ClassValidationType, ClassValidationRequired, ClassValidationUnknownKey, ClassValidationOther:
		return true
	}
	return false
}

// Messages, as the SDKs produce them (the fixtures in testdata/sdk hold the TypeScript ones
// exactly as @posthog/mcp sent them):
//
//   - TypeScript SDK 1.x (@modelcontextprotocol/sdk 1.32, src/server/mcp.ts): a tools/call
//     failure becomes an error result whose text is the McpError message, "MCP error -32602: "
//   - "Tool <name> not found" | "Tool <name> disabled" | "Input validation error: Invalid
//     arguments for tool <name>: " + the Zod issues ("<message> at <path>", joined by "\n") |
//     "Invalid arguments for tool <name>: arguments contain more than the maximum of N
//     elements". Older 1.x releases put Zod's JSON issue list after the colon.
//   - TypeScript SDK 2.x (@modelcontextprotocol/server 2.4): "Tool <name> not found" is a
//     JSON-RPC error (code -32602) the SDK captures as the exception; validation failures are
//     error results "Input validation error: Invalid arguments for tool <name>: " + issues
//     ("<path>: <message>", joined by ", ").
//   - Zod 3 issue messages: "Expected number, received string", "Required",
//     "Unrecognized key(s) in object: 'b'", "Invalid enum value. Expected 'a' | 'b', received
//     'c'". Zod 4: "Invalid input: expected number, received string", "Invalid input: expected
//     number, received undefined" (missing), "Unrecognized key: \"b\"", "Invalid option:
//     expected one of ...".
//   - @posthog/mcp 0.16.3 (src/extensions/instrument-lowlevel.ts): "Unknown tool: <name>" for
//     a call no handler claims.
//   - Go SDK (github.com/modelcontextprotocol/go-sdk 1.8, mcp/server.go): JSON-RPC error
//     `unknown tool "<name>"`; error result `validating "arguments": ...` with
//     github.com/google/jsonschema-go messages ("required: missing properties: [...]",
//     "type: ... has type \"string\", want \"number\"", "unexpected additional properties
//     [...]").
//   - Python SDK (modelcontextprotocol/python-sdk): low-level server "Input validation error:
//     " + jsonschema's message ("'b' is a required property", "'x' is not of type 'number'",
//     "Additional properties are not allowed ('c' was unexpected)"); FastMCP "Unknown tool:
//     <name>" and pydantic's "N validation error(s) for <tool>Arguments ... Field required
//     [type=missing" / "Input should be a valid integer [type=int_parsing".
//   - Ajv (the JSON Schema validator of TypeScript servers built on the low-level Server, and
//     of SDK 2.x's JSON Schema tools): "data/limit must be integer", "data must have required
//     property 'query'", "data must NOT have additional properties", and for a draft 2020-12
//     schema's `unevaluatedProperties: false` (Ajv2020) "data must NOT have unevaluated
//     properties" (Ajv 8.20.0's errorsText).
var (
	// zodTypeRE is Zod's wrong-type issue: "Expected number, received string" (Zod 3) or
	// "Invalid input: expected number, received string" (Zod 4); an enum's "Expected 'a' |
	// 'b', received 'c'" does not match (its expected side is quoted).
	zodTypeRE = regexp.MustCompile(`(?:^|[\s:,])[Ee]xpected [a-z]+, received [a-z]+`)
	// jsonInvalidTypeRE is the same issue in Zod's JSON issue list (older TypeScript 1.x).
	jsonInvalidTypeRE = regexp.MustCompile(`"code":\s*"invalid_type"`)
	// jsonUndefinedRE is a missing key in Zod's JSON issue list.
	jsonUndefinedRE = regexp.MustCompile(`"received":\s*"undefined"`)
)

// Substrings that mark each class (the wording of the SDKs listed above); regular expressions
// only run where a substring says they may match, so a message costs a few scans.
var (
	validationMarks = []string{"Input validation error", "Invalid arguments for tool ", `validating "arguments"`}
	requiredMarks   = []string{"received undefined", "missing properties", "is a required property", "Field required",
		"[type=missing", "must have required property"}
	typeMarks       = []string{`has type "`, "is not of type '"}
	unknownKeyMarks = []string{"Unrecognized key", "unrecognized_keys", "unexpected additional propert",
		"Additional properties are not allowed", "Extra inputs are not permitted", "[type=extra_forbidden",
		"must NOT have additional properties", "must NOT have unevaluated properties"}
	// Words after "Input should be a valid " (pydantic), "[type=" (pydantic) and " must be " (Ajv)
	// that name a type.
	pydanticTypes = []string{"integer", "number", "string", "boolean", "dictionary", "list", "array", "object"}
	pydanticKinds = []string{"int_", "float_", "string_", "bool_", "dict_", "list_", "model_"}
	ajvTypes      = []string{"integer", "number", "string", "boolean", "object", "array", "null"}
)

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// followedBy reports whether some occurrence of prefix in s is followed by one of words (and,
// when wordEnd, then by a character that ends a word).
func followedBy(s, prefix string, words []string, wordEnd bool) bool {
	for i := strings.Index(s, prefix); i >= 0; {
		rest := s[i+len(prefix):]
		for _, w := range words {
			if strings.HasPrefix(rest, w) && (!wordEnd || len(rest) == len(w) || !isWordByte(rest[len(w)])) {
				return true
			}
		}
		j := strings.Index(rest, prefix)
		if j < 0 {
			break
		}
		i += len(prefix) + j
	}
	return false
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// zodRequired reports a Zod 3 "Required" issue: the whole message of an issue, so "Required"
// stands after the start, a line break, ": " or ", " and before " at ", a line break, ',' or
// the end.
func zodRequired(m string) bool {
	const w = "Required"
	for i := strings.Index(m, w); i >= 0; {
		before, after := m[:i], m[i+len(w):]
		okBefore := before == "" || strings.HasSuffix(before, "\n") || strings.HasSuffix(before, ": ") ||
			strings.HasSuffix(before, ", ") || strings.HasSuffix(before, ":") || strings.HasSuffix(before, ",")
		okAfter := after == "" || strings.HasPrefix(after, " at ") || after[0] == '\n' || after[0] == ','
		if okBefore && okAfter {
			return true
		}
		j := strings.Index(after, w)
		if j < 0 {
			break
		}
		i += len(w) + j
	}
	return false
}

// unknownTool reports whether a message's first line is an SDK's unknown-tool error:
// "Tool <name> not found" or "Tool <name> disabled" (TypeScript, the name without spaces),
// "Unknown tool: <name>" (@posthog/mcp, Python) or `unknown tool "<name>"` (Go), at the start
// of the line or after ": ".
func unknownTool(line string) bool {
	for _, part := range [2]string{line, afterColon(line)} {
		switch {
		case part == "":
		case strings.HasPrefix(part, "Unknown tool: "), strings.HasPrefix(part, "unknown tool: "),
			strings.HasPrefix(part, `unknown tool "`), strings.HasPrefix(part, `Unknown tool "`),
			strings.HasPrefix(part, "Tool not found: "):
			return true
		case strings.HasPrefix(part, "Tool "):
			name, ok := strings.CutSuffix(part[len("Tool "):], " not found")
			if !ok {
				name, ok = strings.CutSuffix(part[len("Tool "):], " disabled")
			}
			if ok && name != "" && len(name) <= 256 && !strings.ContainsAny(name, " \t") {
				return true
			}
		}
	}
	return false
}

// afterColon is what follows the first ": " of s ("" when none).
func afterColon(s string) string {
	if _, rest, ok := strings.Cut(s, ": "); ok {
		return rest
	}
	return ""
}

// ClassifyError classifies a failed tool call by its error message ($mcp_error_message, or a
// $exception_list value of the $exception event the SDK sends next to it). When a message
// lists several validation issues, the first class in this order wins: required, type,
// unknown key, other. Leading and trailing space is ignored; the match is on the SDKs' own
// wording (see the list above), so a tool's own error text is ClassOther.
func ClassifyError(message string) ErrorClass {
	m := strings.TrimSpace(message)
	if m == "" {
		return ClassNone
	}
	// The TypeScript 1.x McpError prefix; its code says nothing the text does not.
	if rest, ok := strings.CutPrefix(m, "MCP error "); ok {
		if i := strings.Index(rest, ": "); i > 0 && i <= 7 {
			m = rest[i+2:]
		}
	}
	firstLine, _, _ := strings.Cut(m, "\n")
	if !containsAny(firstLine, validationMarks) && unknownTool(firstLine) {
		return ClassUnknownTool
	}
	if !containsAny(m, validationMarks) && !(strings.Contains(m, "validation error") && strings.Contains(m, "Arguments")) {
		return ClassOther
	}
	switch {
	case containsAny(m, requiredMarks) || zodRequired(m) ||
		strings.Contains(m, "undefined") && jsonUndefinedRE.MatchString(m):
		return ClassValidationRequired
	case containsAny(m, typeMarks) ||
		strings.Contains(m, ", received ") && zodTypeRE.MatchString(m) ||
		strings.Contains(m, "invalid_type") && jsonInvalidTypeRE.MatchString(m) ||
		followedBy(m, "Input should be a valid ", pydanticTypes, true) ||
		followedBy(m, "[type=", pydanticKinds, false) && (strings.Contains(m, "_type,") || strings.Contains(m, "_parsing,") || strings.Contains(m, "_type]") || strings.Contains(m, "_parsing]")) ||
		followedBy(m, " must be ", ajvTypes, true):
		return ClassValidationType
	case containsAny(m, unknownKeyMarks):
		return ClassValidationUnknownKey
	}
	return ClassValidationOther
}
