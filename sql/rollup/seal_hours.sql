-- Records sealed hours (migration 0037), one row per hour: its deduplicated raw tool calls as the
-- seal counted them, the tool calls the rollups counted in it when the seal began and the sum
-- of those rollup rows' versions, and the seal's time. The seal inserts the rows as a batch,
-- after the hours' cells.
INSERT INTO mcpulse.rollup_sealed_hours (hour, tool_calls, rollup_calls, rollup_versions, sealed_at)
