package misuse

// Call is what Derive needs of one $mcp_tool_call event. Raw fields are the JSON text of the
// event's properties, nil when the property is absent.
type Call struct {
	// Reported says the event carried $mcp_ignored_keys (even an empty list); ReportedKeys and
	// ReportedTotal are that list and $mcp_ignored_keys_total (0: the list's length), already
	// validated by the caller.
	Reported      bool
	ReportedKeys  []string
	ReportedTotal int
	// Response is $mcp_response: the CallToolResult the SDK captured.
	Response []byte
	// Parameters is $mcp_parameters: the SDK's capture of the tools/call request.
	Parameters []byte
	// Schema is the tool's input schema as served by the call's server name and version
	// (CompileSchema of the latest snapshot seen); nil when none has been seen.
	Schema *Schema
	// Valid says Parameters is known to be valid JSON (RFC 8259; strings may hold invalid
	// UTF-8), as the properties of an event ingest.Parse accepted are: the arguments are then
	// walked without checking the grammar again (10 to 20% cheaper on an SDK call), with the same
	// outcome, except that JSON nested deeper than 10,000 levels, which the checking walk
	// refuses (ReasonArgumentsInvalid), is walked like any other. Leave it false for bytes
	// from anywhere else.
	Valid bool
}

// Derive returns a call's ignored keys from the most trusted source that has them:
// $mcp_ignored_keys (SourceReported), else the tool result (SourceResponse, FromResponse),
// else the arguments against the served schema (SourceSchema, FromParameters), else
// SourceNotMeasurable with the reason the schema derivation gave.
func Derive(c Call) IgnoredKeys {
	if c.Reported {
		keys, total := capKeys(c.ReportedKeys, c.ReportedTotal)
		return IgnoredKeys{Keys: keys, Total: total, Source: SourceReported}
	}
	if len(c.Response) > 0 {
		if keys, total, ok := FromResponse(c.Response); ok {
			return IgnoredKeys{Keys: keys, Total: total, Source: SourceResponse}
		}
	}
	return fromParameters(c.Schema, c.Parameters, c.Valid)
}
