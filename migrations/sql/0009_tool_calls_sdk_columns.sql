-- Columns for what the MCP analytics SDK (@posthog/mcp) sends on a tool call (DESIGN.md §2) and
-- for the misuse the consumer derives from it (package misuse): where the call's ignored keys
-- came from (reported, response, schema, not_measurable) and why they were not measurable, the
-- class of a failed call's error, and a call to a tool the server version does not list.
-- Rows written before this migration hold '' and 0.
ALTER TABLE mcpulse.tool_calls ADD COLUMN server_name String;
ALTER TABLE mcpulse.tool_calls ADD COLUMN server_version String;
ALTER TABLE mcpulse.tool_calls ADD COLUMN protocol_version String;
ALTER TABLE mcpulse.tool_calls ADD COLUMN intent String;
ALTER TABLE mcpulse.tool_calls ADD COLUMN intent_source String;
ALTER TABLE mcpulse.tool_calls ADD COLUMN error_message String;
ALTER TABLE mcpulse.tool_calls ADD COLUMN ignored_keys_source String;
ALTER TABLE mcpulse.tool_calls ADD COLUMN ignored_keys_reason String;
ALTER TABLE mcpulse.tool_calls ADD COLUMN error_class String;
ALTER TABLE mcpulse.tool_calls ADD COLUMN unknown_tool UInt8;
