-- The most recently decided schema verdicts (migration 0039), by hash: what a consumer reads at
-- start so that a schema it sees again is neither checked nor, over a limit, compiled.
-- Parameters, in order: limit (UInt64: how many verdicts, the newest).
SELECT schema_sha256, verdict, limit_name, limit_max, limit_seen
FROM
(
    SELECT schema_sha256, verdict, limit_name, limit_max, limit_seen
    FROM mcpulse.schema_verdicts FINAL
    ORDER BY decided_at DESC, schema_sha256
    LIMIT ?
)
ORDER BY schema_sha256
