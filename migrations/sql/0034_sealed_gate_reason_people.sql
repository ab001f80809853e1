-- People per gate-reason cell, exact in a sealed hour (docs/pipeline.md, "People per gate
-- reason"). The uniq states of migration 0015 kept about 4 bytes per distinct (cell, person),
-- so their storage grew with the people, i.e. with the events. A sealed cell keeps two plain
-- counts instead, so this table grows with hours × dimensions:
--
-- The seal (consumers/rollup.SealGateReasonPeople, run by the scheduler) recomputes the cells
-- of closed hours from the deduplicated raw table: calls = count() and people =
-- uniqExact(distinct_id), stamped sealed_at. ReplacingMergeTree(sealed_at) keeps the newest
-- seal of each cell. A sealed cell is current while its calls equal the cell's calls in
-- gate_reason_calls_hourly (the consumer's cumulative counts): raw rows are stored before the
-- rollup rows of their batch, so equal counts mean the seal saw every call counted. A cell
-- whose calls differ (a late event, an hour not sealed yet) is read from the raw rows of its
-- hour instead (v_gate_reason_unsealed_hours), and sealed again by the next seal. Exact
-- either way; only unsealed hours cost a scan of their raw rows.

CREATE TABLE IF NOT EXISTS mcpulse.gate_reason_people_sealed
(
    hour DateTime('UTC'),
    campaign_id String,
    reason String,
    client_name String,
    url_support UInt8,
    form_support UInt8,
    calls UInt64,
    people UInt64,
    sealed_at DateTime('UTC')
)
ENGINE = ReplacingMergeTree(sealed_at)
ORDER BY (hour, campaign_id, reason, client_name, url_support, form_support);

-- The hours holding a gate-reason cell with calls whose seal is missing or out of date: the
-- readers take those hours' people from the raw rows, and the seal recomputes them.
CREATE VIEW IF NOT EXISTS mcpulse.v_gate_reason_unsealed_hours
AS SELECT DISTINCT hour
FROM
(
    SELECT hour, campaign_id, reason, client_name, url_support, form_support, sum(calls) AS calls
    FROM mcpulse.gate_reason_calls_hourly FINAL
    GROUP BY hour, campaign_id, reason, client_name, url_support, form_support
    HAVING calls > 0
) AS counted
ANY LEFT JOIN
(
    SELECT hour, campaign_id, reason, client_name, url_support, form_support, calls AS sealed_calls
    FROM mcpulse.gate_reason_people_sealed FINAL
) AS sealed USING (hour, campaign_id, reason, client_name, url_support, form_support)
WHERE sealed_calls != calls;

-- Today's people, sealed from the raw table (every hour: an hour still open is read from the
-- raw rows again as soon as its calls change). Stop the consumers while this migration runs,
-- as for 0015.
INSERT INTO mcpulse.gate_reason_people_sealed (hour, campaign_id, reason, client_name, url_support, form_support,
    calls, people, sealed_at)
SELECT toStartOfHour(timestamp) AS hour, campaign_id, recruitment_reason, client_name,
    ifNull(url_supported, 2) AS url_support, ifNull(form_supported, 2) AS form_support,
    count(), uniqExact(distinct_id), now()
FROM mcpulse.tool_calls FINAL
WHERE recruitment_reason != ''
GROUP BY hour, campaign_id, recruitment_reason, client_name, url_support, form_support;

-- The uniq sketches and their materialized view give way.
DROP TABLE IF EXISTS mcpulse.v_gate_reasons_hourly;
DROP TABLE IF EXISTS mcpulse.gate_reason_people_hourly_mv;
DROP TABLE IF EXISTS mcpulse.gate_reason_people_hourly;

-- Same columns as before (migrations 0003 and 0015). people: the sealed count where the seal
-- is current, else uniqExact over the raw rows of the cell's hour (distinct_id is the same in
-- every copy of a redelivered row, so no FINAL is needed for it).
CREATE VIEW IF NOT EXISTS mcpulse.v_gate_reasons_hourly
AS SELECT
    hour,
    campaign_id,
    reason,
    client_name,
    if(url_support = 2, NULL, url_support) AS url_supported,
    if(form_support = 2, NULL, form_support) AS form_supported,
    calls,
    if(sealed_calls = calls, sealed_people, raw_people) AS people
FROM
(
    SELECT hour, campaign_id, reason, client_name, url_support, form_support, calls, sealed_calls, sealed_people
    FROM
    (
        SELECT hour, campaign_id, reason, client_name, url_support, form_support, sum(calls) AS calls
        FROM mcpulse.gate_reason_calls_hourly FINAL
        GROUP BY hour, campaign_id, reason, client_name, url_support, form_support
        HAVING calls > 0
    ) AS counted
    ANY LEFT JOIN
    (
        SELECT hour, campaign_id, reason, client_name, url_support, form_support,
            calls AS sealed_calls, people AS sealed_people
        FROM mcpulse.gate_reason_people_sealed FINAL
    ) AS sealed USING (hour, campaign_id, reason, client_name, url_support, form_support)
) AS cells
ANY LEFT JOIN
(
    SELECT toStartOfHour(timestamp) AS hour, campaign_id, recruitment_reason AS reason, client_name,
        ifNull(url_supported, 2) AS url_support, ifNull(form_supported, 2) AS form_support,
        uniqExact(distinct_id) AS raw_people
    FROM mcpulse.tool_calls
    WHERE recruitment_reason != ''
        AND timestamp >= (SELECT min(hour) FROM mcpulse.v_gate_reason_unsealed_hours)
        AND timestamp < (SELECT max(hour) FROM mcpulse.v_gate_reason_unsealed_hours) + 3600
        AND toStartOfHour(timestamp) IN (SELECT hour FROM mcpulse.v_gate_reason_unsealed_hours)
    GROUP BY hour, campaign_id, reason, client_name, url_support, form_support
) AS unsealed USING (hour, campaign_id, reason, client_name, url_support, form_support);
