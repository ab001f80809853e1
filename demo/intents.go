package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/mcpulse/mcpulse/campaigns"
	"github.com/mcpulse/mcpulse/demo/gen"
)

// intentPromptVersions are the mcp-intent-prompt payloads the demo records, each with how long
// before the corpus's end the lint job first saw it: the first before the corpus begins (every
// client that lists tools in it gets it), the second halfway, so calls of clients that listed
// tools before it stay under the first (clients cache tool schemas).
var intentPromptVersions = []struct {
	before time.Duration
	prompt string
}{
	{gen.Window + time.Hour, "Explain why you are calling this tool in one abstract sentence. Never include names, emails, ids, keys, URLs or file paths."},
	{gen.Window / 2, "In one short sentence, state the task goal this call serves, abstractly; say if you are unsure. Do not include personal or identifying information."},
}

// RecordIntentPromptVersions stores, as the campaign-lint job does (flag_payload_versions,
// migration 0041), the demo's versions of the mcp-intent-prompt payload (boolean flag,
// variant "true"), dated before end (the corpus's end, gen.Config.End), so the intent trials
// page has versions to attribute the corpus's calls to. It returns how many it stored; an
// error is ClickHouse's.
func RecordIntentPromptVersions(ctx context.Context, ch driver.Conn, end time.Time) (int, error) {
	batch, err := ch.PrepareBatch(ctx, `INSERT INTO mcpulse.flag_payload_versions (flag_key, variant, first_seen, last_seen, payload_sha256, payload, removed)`)
	if err != nil {
		return 0, fmt.Errorf("demo intent prompt versions: %w", err)
	}
	for i, v := range intentPromptVersions {
		raw, err := json.Marshal(map[string]string{"prompt": v.prompt})
		if err != nil {
			_ = batch.Abort()
			return 0, fmt.Errorf("BUG: demo intent prompt versions: %w", err)
		}
		payload, sum := campaigns.CanonicalPayload(raw) // as the lint job stores it
		first := end.Add(-v.before).UTC().Truncate(time.Second)
		last := end.UTC().Truncate(time.Second)
		if i+1 < len(intentPromptVersions) {
			last = end.Add(-intentPromptVersions[i+1].before).UTC().Truncate(time.Second)
		}
		if err := batch.Append(campaigns.IntentPromptFlag, "true", first, last, sum, payload, uint8(0)); err != nil {
			_ = batch.Abort()
			return 0, fmt.Errorf("BUG: demo intent prompt versions: %w", err)
		}
	}
	if err := batch.Send(); err != nil {
		return 0, fmt.Errorf("demo intent prompt versions: %w", err)
	}
	return len(intentPromptVersions), nil
}
