-- Deletes the per-partition rows of the given sealed hours from one rollup table (migration
-- 0037): readers take those hours from the sealed tables or the raw rows from then on. {table}
-- is where the rollup table's mutations run (migrations.Target.Name: the table, or on the
-- sharded layout its local table ON CLUSTER), filled by package rollup, never from input.
-- Parameters: the hours (Array(UInt32), Unix seconds).
ALTER TABLE {table} DELETE WHERE has(?, toUInt32(hour))
