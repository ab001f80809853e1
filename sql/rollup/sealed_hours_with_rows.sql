-- The sealed hours (migration 0037) that still have per-partition rows in one rollup table,
-- which the seal then deletes: those of the hours it just sealed, and any an earlier seal left
-- (one that failed between recording an hour and deleting its rows). {table} is the rollup
-- table, filled by package rollup from its table definitions, never from input.
-- Parameters: none.
SELECT DISTINCT toUInt32(hour)
FROM {table}
WHERE hour IN (SELECT hour FROM mcpulse.rollup_sealed_hours)
