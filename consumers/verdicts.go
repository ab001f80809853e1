package consumers

import (
	"context"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/mcpulse/mcpulse/misuse"
	mcsql "github.com/mcpulse/mcpulse/sql"
)

// Schema verdicts (misuse.SchemaVerdict) live with the served-schema registry, in table
// schema_verdicts (migration 0039), keyed by the schema text's SHA-256 like
// served_tool_schemas. The raw stage of a batch stores the verdicts decided since the last
// batch stored them before the batch's offsets are committed (storeVerdicts); a consumer reads
// the most recent Config.VerdictsAtStart verdicts when it first runs (loadRecentVerdicts) and,
// for every schema text a batch or a stored listing brings that it holds no verdict on, the
// stored ones (lookupVerdicts), before it judges calls by them. A schema over a limit is thus
// checked once, ever, and never compiled. The table is optional: without it (migrations not
// run) verdicts are neither read nor stored, and a schema is checked once per process.

const schemaVerdictsTable = "mcpulse.schema_verdicts"

const insertVerdicts = `INSERT INTO mcpulse.schema_verdicts (schema_sha256, verdict, limit_name, limit_max, limit_seen, decided_at)`

// verdictsPerLookup bounds the hashes one lookup query lists: 1,000 of 67 bytes keep the query
// well under ClickHouse's max_query_size (256 KiB).
const verdictsPerLookup = 1000

// storeVerdicts inserts the verdicts the listing state decided and has not stored yet, then
// marks them stored. A failed insert leaves them pending and fails the batch's raw stage
// (retried like the other raw inserts).
func (c *Consumer) storeVerdicts(ctx context.Context) error {
	vs := c.listings.PendingVerdicts()
	if len(vs) == 0 {
		return nil
	}
	if ok, err := c.optionalTableExists(ctx, schemaVerdictsTable); err != nil {
		return err
	} else if !ok {
		c.cfg.Logger.Warn("table missing: schema verdicts not stored, schemas are checked again after a restart (run mcpulse migrate up)",
			"table", schemaVerdictsTable, "verdicts", len(vs))
		c.listings.VerdictsStored(vs)
		return nil
	}
	rows := make([]row, len(vs))
	for i, v := range vs {
		rows[i] = row{hex.EncodeToString(v.Sum[:]), string(v.Kind), string(v.Over.Limit), uint64(max(v.Over.Max, 0)),
			uint64(max(v.Over.Seen, 0)), v.At.UTC().Truncate(time.Second)}
	}
	if err := insertRows(ctx, c.cfg.ClickHouse, insertVerdicts, rows); err != nil {
		return fmt.Errorf("insert %s: %w", schemaVerdictsTable, err)
	}
	c.listings.VerdictsStored(vs)
	return nil
}

// loadRecentVerdicts reads the most recent Config.VerdictsAtStart stored verdicts into the
// listing state, once per Consumer. A failure is logged and not retried: the schemas are then
// looked up as batches bring them (lookupVerdicts).
func (c *Consumer) loadRecentVerdicts(ctx context.Context) {
	if !c.verdictsLoaded.CompareAndSwap(false, true) {
		return
	}
	if ok, err := c.optionalTableExists(ctx, schemaVerdictsTable); err != nil || !ok {
		return
	}
	vs, err := c.readVerdicts(ctx, mcsql.Query("schema_verdicts_recent"), uint64(c.cfg.VerdictsAtStart))
	if err != nil {
		c.cfg.Logger.Warn("reading the stored schema verdicts failed; schemas are looked up as they are seen", "err", err)
		return
	}
	c.listings.PutVerdicts(vs)
	c.cfg.Logger.Info("schema verdicts read", "verdicts", len(vs))
}

// lookupVerdicts reads the stored verdicts on the schema texts the listing state took in
// without one (misuse.Listings.UnjudgedSchemas). A failure is logged, not returned: such a
// schema is checked again (time linear in its length), not lost.
func (c *Consumer) lookupVerdicts(ctx context.Context) {
	sums := c.listings.UnjudgedSchemas()
	if len(sums) == 0 {
		return
	}
	if ok, err := c.optionalTableExists(ctx, schemaVerdictsTable); err != nil || !ok {
		return
	}
	for start := 0; start < len(sums); start += verdictsPerLookup {
		part := sums[start:min(start+verdictsPerLookup, len(sums))]
		hashes := make([]string, len(part))
		for i, s := range part {
			hashes[i] = hex.EncodeToString(s[:])
		}
		vs, err := c.readVerdicts(ctx, mcsql.Query("schema_verdicts_by_hash"), hashes)
		if err != nil {
			c.cfg.Logger.Warn("looking up stored schema verdicts failed; the schemas are checked again", "schemas", len(part), "err", err)
			return
		}
		c.listings.PutVerdicts(vs)
	}
}

// readVerdicts runs a query returning schema_verdicts rows (without decided_at: a verdict read
// back is only reused, never stored again).
func (c *Consumer) readVerdicts(ctx context.Context, query string, args ...any) ([]misuse.SchemaVerdict, error) {
	rows, err := c.cfg.ClickHouse.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []misuse.SchemaVerdict
	for rows.Next() {
		var (
			sha, verdict, limit string
			maxV, seen          uint64
		)
		if err := rows.Scan(&sha, &verdict, &limit, &maxV, &seen); err != nil {
			return nil, err
		}
		sum, err := misuse.ParseSchemaSum(sha)
		if err != nil {
			continue // not one of ours: nothing to reuse
		}
		out = append(out, misuse.SchemaVerdict{Sum: sum, Kind: misuse.VerdictKind(verdict),
			Over: misuse.OverLimit{Limit: misuse.Limit(limit), Max: clampInt(maxV), Seen: clampInt(seen)}})
	}
	return out, rows.Err()
}

func clampInt(v uint64) int { return int(min(v, 1<<62)) }
