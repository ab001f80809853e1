-- Records that a consumer took an epoch.
-- Parameters: the epoch.
INSERT INTO mcpulse.rollup_epochs (name, epoch, taken_at) SELECT 'rollups', ?, now()
