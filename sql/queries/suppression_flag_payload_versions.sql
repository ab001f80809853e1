-- Every stored payload version of every campaign flag variant (migration 0041), for the
-- contact-policy audit's warm-up thresholds: the version in force at t is the row of
-- (flag_key, variant) with the greatest first_seen <= t. first_seen_s is in seconds since the
-- epoch; payload is the variant's payload as the lint stored it; removed is 1 when the variant
-- had disappeared. No parameters.
SELECT
    flag_key,
    variant,
    toInt64(toUInt32(first_seen)) AS first_seen_s,
    payload,
    removed
FROM mcpulse.flag_payload_versions FINAL
