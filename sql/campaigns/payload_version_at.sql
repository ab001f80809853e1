-- The payload version of one flag variant in force at a time: the stored version with the
-- greatest first_seen at or before it (migration 0041). No row: no version was seen by then. A
-- row with removed = 1: the variant had been removed (its payload is empty). Parameters, in
-- order: flag_key (String), variant (String; for mcp-interview-recruitment the campaign id),
-- at (DateTime UTC).
SELECT
    flag_key,
    variant,
    first_seen,
    last_seen,
    payload_sha256,
    payload,
    removed
FROM mcpulse.flag_payload_versions FINAL
WHERE flag_key = ? AND variant = ? AND first_seen <= ?
ORDER BY first_seen DESC
LIMIT 1
