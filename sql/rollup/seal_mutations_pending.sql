-- How many mutations of the given tables of database mcpulse are not done yet: the seal waits
-- for its deletes (migration 0037).
-- Parameters: the table names without the database (Array(String)).
SELECT count()
FROM system.mutations
WHERE database = 'mcpulse' AND has(?, table) AND is_done = 0
