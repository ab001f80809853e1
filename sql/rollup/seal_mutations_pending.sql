-- How many mutations of the given tables are not done yet: the seal waits for its deletes
-- (migration 0037). {mutations} is system.mutations, or on the sharded layout the cluster
-- table function over it (migrations.Target.System), filled by package rollup.
-- Parameters, in order: the database of the tables' parts (String: mcpulse, or mcpulse_local on
-- the sharded layout), the table names without the database (Array(String)).
SELECT count()
FROM {mutations}
WHERE database = ? AND has(?, table) AND is_done = 0
