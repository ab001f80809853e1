-- Schema ratchet runs on the snapshots seen in traffic (served_tool_schemas) beside the runs
-- that list a server's tools themselves: each run says where its tools came from and, for
-- traffic, which server version it checked; each tool says whether its snapshot was cut or
-- redacted by the SDK (its size is then a lower bound). Rows written before keep the defaults
-- (a listing, no version, whole).
ALTER TABLE mcpulse.schema_check_runs ADD COLUMN source String DEFAULT 'server';
ALTER TABLE mcpulse.schema_check_runs ADD COLUMN server_version String DEFAULT '';
ALTER TABLE mcpulse.schema_check_tools ADD COLUMN truncated UInt8 DEFAULT 0;
