package suppression

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/redis/go-redis/v9"

	"github.com/mcpulse/mcpulse/consumers"
	"github.com/mcpulse/mcpulse/ingest"
)

// ReconcileReport counts what a reconcile found and repaired. Every identity with a response
// or a reset in ClickHouse is counted in exactly one of Unchanged, Missing, Stale, KeptNewer
// and NotLive.
type ReconcileReport struct {
	DryRun bool `json:"dry_run"`
	// Identities is how many identities ClickHouse holds a response or a reset for.
	Identities int `json:"identities"`
	// Live is how many of them should hold a record now.
	Live int `json:"live"`
	// Unchanged records already matched ClickHouse.
	Unchanged int `json:"unchanged"`
	// Missing records were absent from Redis and written.
	Missing int `json:"missing"`
	// Stale records were older (or of lower precedence) than ClickHouse's and replaced.
	Stale int `json:"stale"`
	// KeptNewer records are newer than anything ClickHouse holds (the MCP server wrote them
	// before the consumers caught up) and were left alone.
	KeptNewer int `json:"kept_newer"`
	// NotLive identities should hold no record (expired cooldown, or reset after their last
	// response) and hold none.
	NotLive int `json:"not_live"`
	// Wrong records should not exist (they predate the identity's reset, or are cooldowns that
	// ended) and were deleted.
	Wrong int `json:"wrong"`
	// ResetsRestored are reset watermarks missing from (or older in) Redis and written back.
	ResetsRestored int `json:"resets_restored"`
	// UnknownToClickHouse records have no history in ClickHouse; they are left alone.
	UnknownToClickHouse int `json:"unknown_to_clickhouse"`
}

// Repairs is the number of writes a reconcile made (or would make with DryRun).
func (r ReconcileReport) Repairs() int { return r.Missing + r.Stale + r.Wrong + r.ResetsRestored }

type resetMark struct {
	at            time.Time
	actor, reason string
}

// liveResponse is the response that decides an identity's record: the precedence fold of
// DESIGN.md §3 over the responses after the identity's last reset.
type liveResponse struct {
	distinctID, campaignID, state string
	at                            time.Time
}

// Reconcile rebuilds every live suppression record from the ClickHouse response history
// (recruitment_events) and reset audit (suppression_audit), and repairs Redis: missing records
// and reset watermarks are written, stale ones replaced, records that should not exist deleted.
// Writes go through the consumers' precedence script, so a record newer than ClickHouse's view
// is never overwritten, and cooldowns get their remaining TTL from responded_at + 7 days. With
// dryRun nothing is written and the report says what would be.
func Reconcile(ctx context.Context, ch driver.Conn, rdb redis.UniversalClient, now time.Time, dryRun bool) (ReconcileReport, error) {
	rep := ReconcileReport{DryRun: dryRun}
	resets, err := readResets(ctx, ch)
	if err != nil {
		return rep, err
	}
	live, identities, err := foldResponses(ctx, ch, resets, now)
	if err != nil {
		return rep, err
	}
	for h := range resets {
		identities[h] = true
	}
	rep.Identities, rep.Live = len(identities), len(live)

	for h, mark := range resets {
		var cur struct {
			ResetAt string `json:"reset_at"`
		}
		raw, err := rdb.Get(ctx, consumers.ResetKey(h)).Bytes()
		if err != nil && err != redis.Nil {
			return rep, fmt.Errorf("read %s: %w", consumers.ResetKey(h), err)
		}
		if err == nil && json.Unmarshal(raw, &cur) == nil {
			if t, perr := time.Parse(time.RFC3339Nano, cur.ResetAt); perr == nil && !t.Before(mark.at) {
				continue
			}
		}
		rep.ResetsRestored++
		if !dryRun {
			value, _ := json.Marshal(map[string]string{"reset_at": consumers.FormatTime(mark.at), "actor": mark.actor, "reason": mark.reason})
			if err := rdb.Set(ctx, consumers.ResetKey(h), value, 0).Err(); err != nil {
				return rep, fmt.Errorf("write %s: %w", consumers.ResetKey(h), err)
			}
		}
	}

	// Records in Redis that ClickHouse says should not exist.
	held, err := ScanRecords(ctx, rdb)
	if err != nil {
		return rep, err
	}
	for h, rec := range held {
		if _, ok := live[h]; ok {
			continue
		}
		if !identities[h] {
			rep.UnknownToClickHouse++
			continue
		}
		at, perr := time.Parse(time.RFC3339Nano, rec.RespondedAt)
		mark, wasReset := resets[h]
		resurrected := wasReset && perr == nil && !at.After(mark.at)
		ended := rec.Response == consumers.StateCooldown && perr == nil && !at.Add(consumers.CooldownPeriod).After(now)
		if !resurrected && !ended {
			rep.KeptNewer++ // a response ClickHouse has not seen yet
			continue
		}
		rep.Wrong++
		if !dryRun {
			if err := rdb.Del(ctx, consumers.ResponseKey(h)).Err(); err != nil {
				return rep, fmt.Errorf("delete %s: %w", consumers.ResponseKey(h), err)
			}
		}
	}
	for h := range identities {
		if _, ok := live[h]; !ok {
			if _, isHeld := held[h]; !isHeld {
				rep.NotLive++
			}
		}
	}

	for h, want := range live {
		cur, isHeld := held[h]
		if isHeld && cur.Response == want.state && sameInstant(cur.RespondedAt, want.at) {
			rep.Unchanged++
			continue
		}
		if dryRun {
			if !isHeld {
				rep.Missing++
			} else if newer(cur, want) {
				rep.KeptNewer++
			} else {
				rep.Stale++
			}
			continue
		}
		rec := consumers.Record{DistinctID: want.distinctID, CampaignID: want.campaignID, Response: want.state, RespondedAt: consumers.FormatTime(want.at)}
		out, err := consumers.ApplyResponse(ctx, rdb, h, rec, want.at, now)
		if err != nil {
			return rep, fmt.Errorf("repair %s: %w", consumers.ResponseKey(h), err)
		}
		switch {
		case out != consumers.ApplyWritten:
			rep.KeptNewer++
		case isHeld:
			rep.Stale++
		default:
			rep.Missing++
		}
	}
	return rep, nil
}

// newer reports whether the held record wins over want under the precedence rules.
func newer(held consumers.Record, want liveResponse) bool {
	at, err := time.Parse(time.RFC3339Nano, held.RespondedAt)
	if err != nil {
		return false
	}
	heldPermanent, wantPermanent := held.Response != consumers.StateCooldown, want.state != consumers.StateCooldown
	if heldPermanent != wantPermanent {
		return heldPermanent
	}
	return at.After(want.at)
}

func sameInstant(a string, b time.Time) bool {
	t, err := time.Parse(time.RFC3339Nano, a)
	return err == nil && t.Equal(b)
}

// Millisecond times, as Redis compares them (migration 0006); rows written before that
// migration hold 0 / NULL there and fall back to the whole-second DateTime columns.
const (
	eventAtMs     = "if(timestamp_ms = 0, toInt64(toUInt32(timestamp)) * 1000, timestamp_ms)"
	respondedAtMs = "ifNull(responded_at_ms, ifNull(toInt64(toUInt32(responded_at)) * 1000, " + eventAtMs + "))"
	auditAtMs     = "if(at_ms = 0, toInt64(toUInt32(at)) * 1000, at_ms)"
)

func readResets(ctx context.Context, ch driver.Conn) (map[string]resetMark, error) {
	rows, err := ch.Query(ctx, `SELECT identity_hash, max(`+auditAtMs+`) AS last, argMax(actor, `+auditAtMs+`), argMax(reason, `+auditAtMs+`)
FROM mcpulse.suppression_audit FINAL WHERE action = ? GROUP BY identity_hash`, ingest.AuditActionReset)
	if err != nil {
		return nil, fmt.Errorf("read resets: %w", err)
	}
	defer rows.Close()
	out := map[string]resetMark{}
	for rows.Next() {
		var (
			h  string
			ms int64
			m  resetMark
		)
		if err := rows.Scan(&h, &ms, &m.actor, &m.reason); err != nil {
			return nil, err
		}
		m.at = time.UnixMilli(ms).UTC()
		out[h] = m
	}
	return out, rows.Err()
}

// foldResponses applies DESIGN.md §3's precedence to every identity's responses after its
// last reset: the latest permanent response wins; without one, the latest cancel, if its
// cooldown has not ended by now. It returns the live records and every identity with a response.
func foldResponses(ctx context.Context, ch driver.Conn, resets map[string]resetMark, now time.Time) (map[string]liveResponse, map[string]bool, error) {
	rows, err := ch.Query(ctx, `SELECT identity_hash, distinct_id, campaign_id, response, `+respondedAtMs+`
FROM mcpulse.recruitment_events FINAL WHERE kind = 'response'`)
	if err != nil {
		return nil, nil, fmt.Errorf("read responses: %w", err)
	}
	defer rows.Close()
	permanent, cooldown := map[string]liveResponse{}, map[string]liveResponse{}
	identities := map[string]bool{}
	for rows.Next() {
		var (
			h, response string
			ms          int64
			r           liveResponse
		)
		if err := rows.Scan(&h, &r.distinctID, &r.campaignID, &response, &ms); err != nil {
			return nil, nil, err
		}
		identities[h] = true
		r.at = time.UnixMilli(ms).UTC()
		if mark, ok := resets[h]; ok && !r.at.After(mark.at) {
			continue
		}
		r.state = consumers.StateFor(response)
		pick := cooldown
		if r.state != consumers.StateCooldown {
			pick = permanent
		}
		if cur, ok := pick[h]; !ok || r.at.After(cur.at) {
			pick[h] = r
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	live := permanent
	for h, r := range cooldown {
		if _, ok := live[h]; !ok && r.at.Add(consumers.CooldownPeriod).After(now) {
			live[h] = r
		}
	}
	return live, identities, nil
}

// ScanRecords reads every suppression record with SCAN (bounded COUNT; every master of a
// cluster), keyed by identity hash.
func ScanRecords(ctx context.Context, rdb redis.UniversalClient) (map[string]consumers.Record, error) {
	out := map[string]consumers.Record{}
	var mu sync.Mutex
	scan := func(ctx context.Context, node *redis.Client) error {
		iter := node.Scan(ctx, 0, "mcp:interview:*:response", 500).Iterator()
		for iter.Next(ctx) {
			key := iter.Val()
			open, close := strings.IndexByte(key, '{'), strings.IndexByte(key, '}')
			if open < 0 || close < open {
				continue
			}
			raw, err := node.Get(ctx, key).Bytes()
			if err == redis.Nil {
				continue
			}
			if err != nil {
				return fmt.Errorf("read %s: %w", key, err)
			}
			var rec consumers.Record
			if err := json.Unmarshal(raw, &rec); err != nil {
				continue // not a record this pipeline can judge; left alone
			}
			mu.Lock()
			out[key[open+1:close]] = rec
			mu.Unlock()
		}
		return iter.Err()
	}
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		return out, c.ForEachMaster(ctx, scan)
	case *redis.Client:
		return out, scan(ctx, c)
	}
	return nil, fmt.Errorf("unsupported Redis client %T", rdb)
}
