-- Drops one block of rollup_batches (PARTITION BY intDiv(epoch, 1024): migration 0035), whose
-- markers are more than 1,024 generations old.
-- Parameters: the block (UInt64).
ALTER TABLE mcpulse.rollup_batches DROP PARTITION ?
