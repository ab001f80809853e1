-- The most recently decided schema verdicts (migration 0039), newest first: what a consumer reads
-- at start so that a schema it sees again is neither checked nor, over a limit, compiled.
-- Parameters, in order: limit (UInt64: how many verdicts).
SELECT schema_sha256, verdict, limit_name, limit_max, limit_seen, decided_at
FROM mcpulse.schema_verdicts FINAL
ORDER BY decided_at DESC, schema_sha256
LIMIT ?
