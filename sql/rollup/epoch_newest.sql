-- The newest epoch any consumer took (0 before the first).
SELECT max(epoch) FROM mcpulse.rollup_epochs
