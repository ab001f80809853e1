-- The blocks of rollup_batches (PARTITION BY intDiv(epoch, 1024): migration 0035) older than
-- the given one, which a member drops: their markers are more than 1,024 generations old.
-- Parameters: the oldest block to keep (UInt64).
SELECT DISTINCT partition
FROM system.parts
WHERE database = 'mcpulse' AND table = 'rollup_batches' AND active AND toUInt64(partition) < ?
