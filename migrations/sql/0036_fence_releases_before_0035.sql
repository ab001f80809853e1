-- A consumer of a release from before migration 0035 that runs after it (a rolling upgrade, or
-- a rollback) writes its batch markers into rollup_writes and rollup rows whose versions lack
-- bit 63 (epoch << 32 | sequence): every row the new release writes for a cell supersedes
-- them, whatever was written later, so their counts are silently lost (docs/pipeline.md,
-- "Upgrading across migration 0035"). Such a release applies the migrations it knows, finds
-- them recorded and ignores the ones it does not know, so it cannot tell it is too old.
--
-- So the two tables only that release's consumer names change names, and it fails on them,
-- logging ClickHouse's "Table mcpulse.rollup_... doesn't exist" and retrying without
-- committing: nothing it stored is counted, and the new release consumes its partitions
-- again.
--
--   - rollup_epochs becomes rollup_epochs_taken: the first statement of that release's Begin
--     (once per consumer-group generation) reads the newest epoch from it. Failing there, it
--     takes no epoch: one taken at every retry (every 5 s per member, at the default longest
--     backoff) would wear down the 23 bits of epoch of the versions, and move the epochs on by
--     more than the 1,024 for which a generation's batch markers are kept while another
--     member has yet to begin.
--   - rollup_writes becomes rollup_writes_before_0035: that release writes a batch's marker
--     there before the batch's rollup rows, so a member that began before this migration
--     (during a rolling upgrade) stores the rows of no batch whose marker comes after it.
--     Releases from 0035 on read the markers written before it from there
--     (sql/rollup/writes.sql) and write none.
--
-- RENAME keeps a table's parts, and on a cluster its Keeper path (written out in the engine,
-- not taken from the table's name), ON CLUSTER on every host. It has no IF EXISTS on 18.16: a
-- run that renamed a table but stopped before the migration was recorded runs it again, and
-- the runner takes a RENAME that fails with its source gone and its target there as done
-- (migrations.Up); hence one statement per table.

RENAME TABLE mcpulse.rollup_epochs TO mcpulse.rollup_epochs_taken;

RENAME TABLE mcpulse.rollup_writes TO mcpulse.rollup_writes_before_0035;
