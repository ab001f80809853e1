-- The stored verdicts on the given schemas (migration 0039), by content hash: what a consumer
-- reads for the schema texts a batch brings (its tool listings, a server version's stored
-- listing) that it holds no verdict on. Parameters, in order: hashes (Array(String): lowercase
-- hex SHA-256 of the schema texts; the subquery keeps the lookup on the table's sort key).
SELECT schema_sha256, verdict, limit_name, limit_max, limit_seen
FROM mcpulse.schema_verdicts FINAL
WHERE schema_sha256 IN (SELECT arrayJoin(?))
ORDER BY schema_sha256
