-- Rollups (DESIGN.md §4), filled by materialized views from the raw tables. Every measure is a
-- uniqExact state over the event uuid (or distinct_id / invitation_id), never a plain count:
-- a block the consumer inserts twice (a replay after a crash, a retried insert) adds nothing,
-- so each rollup equals a recomputation from the deduplicated raw tables.
-- Nullable columns cannot be in a sorting key on ClickHouse 18.16, so the capability flags are
-- stored as 0 = no, 1 = yes, 2 = unknown (null) and the views turn 2 back into NULL.

CREATE TABLE IF NOT EXISTS mcpulse.ignored_key_rates_hourly
(
    hour DateTime('UTC'),
    tool_name String,
    client_name String,
    successful_calls AggregateFunction(uniqExact, UUID),
    calls_with_ignored_keys AggregateFunction(uniqExact, UUID)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, tool_name, client_name);

-- Filtered measures use the StateIf combinator order: its state type is the plain
-- uniqExact state on ClickHouse 18.16 and on current releases (IfState is not: 18.16 gives it
-- a type of its own that the rollup column cannot hold).
CREATE MATERIALIZED VIEW IF NOT EXISTS mcpulse.ignored_key_rates_hourly_mv
TO mcpulse.ignored_key_rates_hourly
AS SELECT
    toStartOfHour(timestamp) AS hour,
    tool_name,
    client_name,
    uniqExactStateIf(uuid, is_error = 0) AS successful_calls,
    uniqExactStateIf(uuid, is_error = 0 AND notEmpty(counted_ignored_keys)) AS calls_with_ignored_keys
FROM mcpulse.tool_calls
GROUP BY hour, tool_name, client_name;

CREATE TABLE IF NOT EXISTS mcpulse.ignored_keys_hourly
(
    hour DateTime('UTC'),
    tool_name String,
    key_path String,
    occurrences AggregateFunction(uniqExact, UUID)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, tool_name, key_path);

CREATE MATERIALIZED VIEW IF NOT EXISTS mcpulse.ignored_keys_hourly_mv
TO mcpulse.ignored_keys_hourly
AS SELECT
    toStartOfHour(timestamp) AS hour,
    tool_name,
    key_path,
    uniqExactState(uuid) AS occurrences
FROM mcpulse.tool_calls
ARRAY JOIN counted_ignored_keys AS key_path
WHERE is_error = 0
GROUP BY hour, tool_name, key_path;

CREATE TABLE IF NOT EXISTS mcpulse.gate_reasons_hourly
(
    hour DateTime('UTC'),
    campaign_id String,
    reason String,
    client_name String,
    url_support UInt8,
    form_support UInt8,
    calls AggregateFunction(uniqExact, UUID),
    people AggregateFunction(uniqExact, String)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, campaign_id, reason, client_name, url_support, form_support);

CREATE MATERIALIZED VIEW IF NOT EXISTS mcpulse.gate_reasons_hourly_mv
TO mcpulse.gate_reasons_hourly
AS SELECT
    toStartOfHour(timestamp) AS hour,
    campaign_id,
    recruitment_reason AS reason,
    client_name,
    ifNull(url_supported, 2) AS url_support,
    ifNull(form_supported, 2) AS form_support,
    uniqExactState(uuid) AS calls,
    uniqExactState(distinct_id) AS people
FROM mcpulse.tool_calls
WHERE recruitment_reason != ''
GROUP BY hour, campaign_id, reason, client_name, url_support, form_support;

-- The funnel is a cohort by the day the invitation was sent: opens and responses are
-- attributed to their invitation's day through invitation_sent_at, which the consumer fills.
-- answered holds the invitations with a response within 10 minutes of sending; the rest are
-- unanswered (PostHog's MCP guide: pending replies expire after ten minutes).
CREATE TABLE IF NOT EXISTS mcpulse.recruitment_funnel_daily
(
    day Date,
    campaign_id String,
    feature_flag String,
    invitations AggregateFunction(uniqExact, String),
    people AggregateFunction(uniqExact, String),
    first_opens AggregateFunction(uniqExact, String),
    accepted AggregateFunction(uniqExact, String),
    declined AggregateFunction(uniqExact, String),
    cancelled AggregateFunction(uniqExact, String),
    answered AggregateFunction(uniqExact, String)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(day)
ORDER BY (day, campaign_id, feature_flag);

CREATE MATERIALIZED VIEW IF NOT EXISTS mcpulse.recruitment_funnel_daily_mv
TO mcpulse.recruitment_funnel_daily
AS SELECT
    toDate(ifNull(invitation_sent_at, timestamp)) AS day,
    campaign_id,
    feature_flag,
    uniqExactStateIf(invitation_id, kind = 'invitation_sent') AS invitations,
    uniqExactStateIf(distinct_id, kind = 'invitation_sent') AS people,
    uniqExactStateIf(invitation_id, kind = 'link_opened') AS first_opens,
    uniqExactStateIf(invitation_id, kind = 'response' AND response = 'accept') AS accepted,
    uniqExactStateIf(invitation_id, kind = 'response' AND response = 'decline') AS declined,
    uniqExactStateIf(invitation_id, kind = 'response' AND response = 'cancel') AS cancelled,
    uniqExactStateIf(invitation_id, kind = 'response'
        AND isNotNull(invitation_sent_at)
        AND ifNull(responded_at, timestamp) <= ifNull(invitation_sent_at, timestamp) + 600) AS answered
FROM mcpulse.recruitment_events
GROUP BY day, campaign_id, feature_flag;
