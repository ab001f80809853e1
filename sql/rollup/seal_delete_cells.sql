-- Deletes the per-partition rows of the given sealed hours from one rollup table (migration
-- 0037): readers take those hours from the sealed tables or the raw rows from then on. {table}
-- is the rollup table, filled by package rollup from its table definitions, never from input.
-- Parameters: the hours (Array(UInt32), Unix seconds).
ALTER TABLE {table} DELETE WHERE has(?, toUInt32(hour))
