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
//     property 'query'", "data must NOT have additional properties".
var (
	unknownToolRE = regexp.MustCompile(`(?i)(?:^|: )(?:Tool \S{1,256} (?:not found|disabled)$|Unknown tool: |unknown tool "|Tool not found: )`)
	validationRE  = regexp.MustCompile(`(?i)Input validation error|Invalid arguments for tool |validating "arguments"|validation errors? for \S*Arguments`)
	requiredRE    = regexp.MustCompile(`(?:^|[\n:,] ?|: )Required(?: at |$|\n|,)|(?i)received undefined|"received":\s*"undefined"|required: missing propert|is a required property|Field required|\[type=missing|must have required property`)
	typeRE        = regexp.MustCompile(`(?i)(?:^|[\s:,])expected [a-z]+, received [a-z]+|"code":\s*"invalid_type"|has type "[a-z]+", want |is not of type '|Input should be a valid (?:integer|number|string|boolean|dictionary|list|array|object)|\[type=(?:int|float|string|bool|dict|list|model)_(?:type|parsing)|must be (?:integer|number|string|boolean|object|array|null)\b`)
	unknownKeyRE  = regexp.MustCompile(`(?i)Unrecognized keys?\b|"code":\s*"unrecognized_keys"|unexpected additional propert|Additional properties are not allowed|Extra inputs are not permitted|\[type=extra_forbidden|must NOT have additional properties`)
)

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
	if unknownToolRE.MatchString(firstLine) && !validationRE.MatchString(firstLine) {
		return ClassUnknownTool
	}
	if !validationRE.MatchString(m) {
		return ClassOther
	}
	switch {
	case requiredRE.MatchString(m):
		return ClassValidationRequired
	case typeRE.MatchString(m):
		return ClassValidationType
	case unknownKeyRE.MatchString(m):
		return ClassValidationUnknownKey
	}
	return ClassValidationOther
}
