-- Schema ratchet history (issue 4): one row per check run of one MCP server, one row per tool
-- per run. A run that could not reach its server is recorded with ok = 0 and its error, never
-- as a run with zero tools.
CREATE TABLE IF NOT EXISTS mcpulse.schema_check_runs
(
    run_id String,
    server String,
    started_at DateTime('UTC'),
    duration_ms UInt32,
    reached UInt8,
    error String,
    ok UInt8,
    tools UInt32,
    char_limit UInt32,
    oversized UInt32,
    max_oversized UInt32,
    nested_properties UInt32,
    described_nested_properties UInt32,
    nested_description_coverage Float64,
    min_nested_coverage Float64,
    full_nested_description_coverage Float64,
    name_failures UInt32,
    violations Array(String),
    notes Array(String)
)
ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(started_at)
ORDER BY (server, started_at, run_id);

CREATE TABLE IF NOT EXISTS mcpulse.schema_check_tools
(
    run_id String,
    server String,
    started_at DateTime('UTC'),
    tool_name String,
    schema_chars UInt32,
    oversized UInt8,
    nested UInt32,
    described UInt32,
    full_nested UInt32,
    full_described UInt32,
    name_ok UInt8,
    name_warnings Array(String),
    problems Array(String)
)
ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(started_at)
ORDER BY (server, tool_name, started_at, run_id);
