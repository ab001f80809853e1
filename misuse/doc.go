// Package misuse tells how an agent misused an MCP tool, from what a server's analytics SDK
// sends: which input keys the tool ignored (IgnoredKeys, Derive), and whether a failed call was
// an input-validation error or a call to a tool the server does not have (ClassifyError).
//
// Everything here but Listings is a pure function of its arguments: no I/O, no clocks, no
// global state but compiled regular expressions. The consumer calls it for each tool call; the
// schemas come from the server's own tools/list results, as the SDK captured them
// ($mcp_tools_list events). Listings is the state those results build up: which listing each
// session and server version was served, by event time, judged against by Listings.Judge (see
// listings.go for the rules); it holds no clock either (times are the events'), and is bounded.
//
// # Ignored keys, in order of trust
//
//  1. reported: the server said which keys it dropped ($mcp_ignored_keys, mcpulse's own
//     property; see docs/DESIGN.md §2).
//  2. response: the tool result says so. PostHog's own MCP server adds `_ignoredKeys` (and
//     `_ignoredKeysNote`) to object results, wraps array results as
//     {results, _ignoredKeys, _ignoredKeysNote}, and appends an "Ignored input keys: ..." notice
//     to text results (PostHog pull request #111786, "report ignored input keys"). FromResponse
//     reads all of these shapes from the CallToolResult the SDK captured as $mcp_response.
//  3. schema: the call's arguments ($mcp_parameters.request.params.arguments, which the SDK
//     captures with its injected `context` argument removed) checked against the tool's input
//     schema as served (FromParameters, FromArguments).
//  4. not_measurable, with a Reason: no schema seen yet, arguments or schema cut or redacted by
//     the SDK, a root union, a schema this package cannot read.
//
// A missing notice beats a wrong one: wherever the schema does not say for certain that a key
// is undeclared, the key is not reported, and wherever the SDK's truncation or redaction could
// hide a key, the call is not measurable rather than clean.
package misuse
