-- Tool input schemas over a schema limit, as the consumer judged them (schema_verdicts, by the
-- schema's content hash): never compiled, so the calls of the tool while a listing served it
-- are stored as not measured with reason schema_over_limit. One row per server, version and
-- tool that served such a schema last seen in the range: the limit it passed (bytes,
-- properties of one object, members of all objects, nesting depth, or another the consumer
-- names), the limit's value when it was judged, how far the text went (for bytes its length;
-- for the others the scan stops one past the limit), and when the schema was first and last
-- served. Parameters, in order: from, to (DateTime UTC: schemas last seen from..to, both
-- included), limit (UInt64: how many rows).
SELECT
    server_name,
    server_version,
    tool_name,
    limit_name AS schema_limit,
    limit_max AS schema_limit_max,
    limit_seen AS schema_limit_seen,
    first_seen,
    last_seen
FROM
(
    SELECT
        server_name,
        server_version,
        tool_name,
        schema_sha256,
        minMerge(first_seen) AS first_seen,
        maxMerge(last_seen) AS last_seen
    FROM mcpulse.served_tool_schemas
    WHERE schema_sha256 IN (SELECT schema_sha256 FROM mcpulse.schema_verdicts FINAL WHERE verdict = 'over_limit')
    GROUP BY server_name, server_version, tool_name, schema_sha256
    HAVING last_seen >= ? AND last_seen <= ?
) AS served
ALL INNER JOIN
(
    SELECT schema_sha256, limit_name, limit_max, limit_seen
    FROM mcpulse.schema_verdicts FINAL
    WHERE verdict = 'over_limit'
) AS verdicts USING schema_sha256
ORDER BY last_seen DESC, server_name, server_version, tool_name
LIMIT ?
