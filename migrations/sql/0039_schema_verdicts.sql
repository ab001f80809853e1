-- The listing state's verdict on each served tool input schema, by the schema's content hash
-- (schema_sha256 of served_tool_schemas: the SHA-256 of the inputSchema JSON text as received),
-- decided once: measured (within the schema limits and compiled), over_limit (never compiled:
-- it passes the limit named, whose value was limit_max, the text going to limit_seen; its
-- calls are not measured, reason schema_over_limit) or unsupported (within the limits but not
-- compilable). The consumer inserts a verdict in the raw stage of the batch that decided it,
-- before the batch's offsets are committed, and reads verdicts back at start and with a server
-- version's stored listing, so that a schema is never checked or compiled again after a
-- restart (misuse.SchemaVerdict). A verdict decided again (the limits changed) replaces the
-- older one: the latest decided_at wins.
CREATE TABLE IF NOT EXISTS mcpulse.schema_verdicts
(
    schema_sha256 String,
    verdict String,
    limit_name String,
    limit_max UInt64,
    limit_seen UInt64,
    decided_at DateTime('UTC')
)
ENGINE = ReplacingMergeTree(decided_at)
ORDER BY schema_sha256;
