-- Every served tool schema per server name and version, as the demo's outcome compares them.
SELECT server_name, server_version, tool_name, schema_sha256, truncated, first_seen, last_seen
FROM mcpulse.v_served_tool_schemas
