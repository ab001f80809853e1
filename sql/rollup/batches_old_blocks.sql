-- The blocks of rollup_batches (PARTITION BY intDiv(epoch, 1024): migration 0035) older than
-- the given one, which a member drops: their markers are more than 1,024 generations old.
-- {parts} is system.parts, or on the sharded layout the cluster table function over it
-- (migrations.Target.System: one replica of every shard), filled by package rollup.
-- Parameters, in order: the database and table of the parts (String, String: mcpulse and
-- rollup_batches, or the local table on the sharded layout), the oldest block to keep (UInt64).
SELECT DISTINCT partition
FROM {parts}
WHERE database = ? AND table = ? AND active AND toUInt64(partition) < ?
