package suppression

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/redis/go-redis/v9"

	sqlq "github.com/mcpulse/mcpulse/sql"
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

// Reconcile rebuilds every live suppression record from the ClickHouse response history
// (recruitment_events) and reset audit (suppression_audit) with Fold, and repairs Redis:
// missing records and reset watermarks are written, stale ones replaced, records that should
// not exist deleted. Writes go through the consumers' script (ApplyResponse), so a record
// above ClickHouse's view is never overwritten, and cooldowns get their remaining TTL from
// responded_at + 7 days. With dryRun nothing is written and the report says what would be.
func Reconcile(ctx context.Context, ch driver.Conn, rdb redis.UniversalClient, now time.Time, dryRun bool) (ReconcileReport, error) {
	rep := ReconcileReport{DryRun: dryRun}
	resets, err := readLastResets(ctx, ch)
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
		raw, err := rdb.Get(ctx, ResetKey(h)).Result()
		if err != nil && err != redis.Nil {
			return rep, fmt.Errorf("read %s: %w", ResetKey(h), err)
		}
		if err == nil {
			if cur := ParseResetValue(raw); cur != nil && !cur.Before(mark.at) {
				continue
			}
		}
		rep.ResetsRestored++
		if !dryRun {
			value, _ := json.Marshal(ResetWatermark{ResetAt: FormatTime(mark.at), Actor: mark.actor, Reason: mark.reason})
			if err := rdb.Set(ctx, ResetKey(h), value, 0).Err(); err != nil {
				return rep, fmt.Errorf("write %s: %w", ResetKey(h), err)
			}
		}
	}

	// Records in Redis that ClickHouse says should not exist.
	held, err := scanRecords(ctx, rdb)
	if err != nil {
		return rep, err
	}
	for h, raw := range held {
		if _, ok := live[h]; ok {
			continue
		}
		if !identities[h] {
			rep.UnknownToClickHouse++
			continue
		}
		state, at, readable := readHeld(raw)
		mark, wasReset := resets[h]
		resurrected := wasReset && readable && ResetCovers(mark.at, at)
		ended := readable && !Permanent(state) && CooldownEnded(at, now)
		if !resurrected && !ended {
			rep.KeptNewer++ // a response ClickHouse has not seen yet
			continue
		}
		rep.Wrong++
		if !dryRun {
			if err := rdb.Del(ctx, ResponseKey(h)).Err(); err != nil {
				return rep, fmt.Errorf("delete %s: %w", ResponseKey(h), err)
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
		if state, at, ok := readHeld(cur); isHeld && ok && state == want.Record.Response && at.Equal(want.At) {
			rep.Unchanged++
			continue
		}
		if dryRun {
			// What the script would do: the reset watermark is restored above, so it is
			// ClickHouse's.
			sim := Held{Record: cur}
			if mark, ok := resets[h]; ok {
				sim.ResetAt = &mark.at
			}
			switch {
			case sim.Apply(want, now) != Written:
				rep.KeptNewer++
			case isHeld:
				rep.Stale++
			default:
				rep.Missing++
			}
			continue
		}
		out, err := ApplyResponse(ctx, rdb, h, want, now)
		if err != nil {
			return rep, fmt.Errorf("repair %s: %w", ResponseKey(h), err)
		}
		switch {
		case out != Written:
			rep.KeptNewer++
		case isHeld:
			rep.Stale++
		default:
			rep.Missing++
		}
	}
	return rep, nil
}

// readLastResets returns each identity's last reset in the audit.
func readLastResets(ctx context.Context, ch driver.Conn) (map[string]resetMark, error) {
	out := map[string]resetMark{}
	err := eachReset(ctx, ch, func(h string, m resetMark) {
		if cur, ok := out[h]; !ok || m.at.After(cur.at) {
			out[h] = m
		}
	})
	return out, err
}

// eachReset calls f for every reset in suppression_audit (query suppression_resets).
func eachReset(ctx context.Context, ch driver.Conn, f func(identityHash string, m resetMark)) error {
	rows, err := ch.Query(ctx, sqlq.Query("suppression_resets"))
	if err != nil {
		return fmt.Errorf("read resets: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			h  string
			ms int64
			m  resetMark
		)
		if err := rows.Scan(&h, &ms, &m.actor, &m.reason); err != nil {
			return fmt.Errorf("read resets: %w", err)
		}
		m.at = time.UnixMilli(ms).UTC()
		f(h, m)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read resets: %w", err)
	}
	return nil
}

// eachResponse calls f for every invitation response in recruitment_events (query
// suppression_responses).
func eachResponse(ctx context.Context, ch driver.Conn, f func(identityHash string, r Response)) error {
	rows, err := ch.Query(ctx, sqlq.Query("suppression_responses"))
	if err != nil {
		return fmt.Errorf("read responses: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			h, distinctID, campaignID, response string
			ms                                  int64
		)
		if err := rows.Scan(&h, &distinctID, &campaignID, &response, &ms); err != nil {
			return fmt.Errorf("read responses: %w", err)
		}
		f(h, NewResponse(distinctID, campaignID, response, time.UnixMilli(ms)))
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read responses: %w", err)
	}
	return nil
}

// foldResponses folds every identity's responses (Fold, one response at a time, so memory
// holds one record per identity) under its last reset at now. It returns the live records
// and every identity with a response.
func foldResponses(ctx context.Context, ch driver.Conn, resets map[string]resetMark, now time.Time) (map[string]Response, map[string]bool, error) {
	type fold struct {
		held Held
		win  Response
		ok   bool
	}
	folds := map[string]*fold{}
	err := eachResponse(ctx, ch, func(h string, r Response) {
		f := folds[h]
		if f == nil {
			f = &fold{}
			if mark, ok := resets[h]; ok {
				f.held.ResetAt = &mark.at
			}
			folds[h] = f
		}
		if f.held.Apply(r, now) == Written {
			f.win, f.ok = r, true
		}
	})
	if err != nil {
		return nil, nil, err
	}
	live, identities := map[string]Response{}, make(map[string]bool, len(folds))
	for h, f := range folds {
		identities[h] = true
		if f.ok {
			live[h] = f.win
		}
	}
	return live, identities, nil
}

// ScanRecords reads every suppression record with SCAN (bounded COUNT; every master of a
// cluster), keyed by identity hash. Values that are not a JSON record are left out.
func ScanRecords(ctx context.Context, rdb redis.UniversalClient) (map[string]Record, error) {
	raw, err := scanRecords(ctx, rdb)
	if err != nil {
		return nil, err
	}
	out := make(map[string]Record, len(raw))
	for h, v := range raw {
		var rec Record
		if json.Unmarshal([]byte(v), &rec) == nil {
			out[h] = rec
		}
	}
	return out, nil
}

// scanRecords reads every :response value as stored, keyed by identity hash.
func scanRecords(ctx context.Context, rdb redis.UniversalClient) (map[string]string, error) {
	out := map[string]string{}
	var mu sync.Mutex
	scan := func(ctx context.Context, node *redis.Client) error {
		iter := node.Scan(ctx, 0, ResponseKeyPattern, 500).Iterator()
		for iter.Next(ctx) {
			h, ok := IdentityOfResponseKey(iter.Val())
			if !ok {
				continue
			}
			raw, err := node.Get(ctx, iter.Val()).Result()
			if err == redis.Nil {
				continue
			}
			if err != nil {
				return fmt.Errorf("read %s: %w", iter.Val(), err)
			}
			mu.Lock()
			out[h] = raw
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
