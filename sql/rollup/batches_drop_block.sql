-- Drops one block of rollup_batches (PARTITION BY intDiv(epoch, 1024): migration 0035), whose
-- markers are more than 1,024 generations old. {table} is where rollup_batches' partitions are
-- (migrations.Target.Name: the table, or on the sharded layout its local table ON CLUSTER),
-- filled by package rollup.
-- Parameters: the block (UInt64).
ALTER TABLE {table} DROP PARTITION ?
