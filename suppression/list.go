package suppression

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ListScanCount is the SCAN COUNT List uses when ListOptions.ScanCount is 0.
const ListScanCount = 500

// ListOptions selects the records List streams.
type ListOptions struct {
	// Redis holds the records. Required. On a *redis.ClusterClient every master is scanned.
	Redis redis.UniversalClient
	// State keeps only records in this state: "accepted", "declined" or "cooldown" (or the
	// stored value: StateAccepted, ...). "" keeps all.
	State string
	// Campaign keeps only records of this campaign_id. "" keeps all.
	Campaign string
	// ScanCount is the SCAN COUNT hint. Default: ListScanCount.
	ScanCount int64
}

// ListEntry is one suppression record.
type ListEntry struct {
	IdentityHash string `json:"identity_hash"`
	State        string `json:"state"` // the record's response: booking_link_accepted, do_not_ask_again, cooldown
	CampaignID   string `json:"campaign_id"`
	RespondedAt  string `json:"responded_at"`
	DistinctID   string `json:"distinct_id"`
	// TTLMillis is the record key's PTTL in milliseconds: -1 when it has none.
	TTLMillis int64 `json:"ttl_ms"`
	// Error is set (and the record fields empty) when the stored value is not a JSON record;
	// such entries are only listed when no filter is set.
	Error string `json:"error,omitempty"`
}

// Text is the entry's one-line terminal form: hash, state, campaign, responded_at, ttl, with
// the untrusted strings quoted.
func (e ListEntry) Text() string {
	if e.Error != "" {
		return fmt.Sprintf("%s  unreadable: %s", e.IdentityHash, e.Error)
	}
	ttl := "-"
	if e.TTLMillis >= 0 {
		ttl = opsFormatDuration(time.Duration(e.TTLMillis) * time.Millisecond)
	}
	return fmt.Sprintf("%s  %-21s  %s  %s  %s", e.IdentityHash, opsQuoteIfNeeded(e.State), opsQuote(e.CampaignID),
		opsQuoteIfNeeded(e.RespondedAt), ttl)
}

// ListStats counts what List saw.
type ListStats struct {
	Scanned    int `json:"scanned"`    // :response records read
	Listed     int `json:"listed"`     // entries passed to emit
	Unreadable int `json:"unreadable"` // values that are not a JSON record
}

// ListState maps a --state value (accepted, declined, cooldown, or a stored value) to the
// stored value; "" stays "".
func ListState(name string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "":
		return "", nil
	case "accepted", StateAccepted:
		return StateAccepted, nil
	case "declined", StateDeclined:
		return StateDeclined, nil
	case "cooldown":
		return StateCooldown, nil
	}
	return "", fmt.Errorf("state %s: want accepted, declined or cooldown", opsQuoteCut(name, 40))
}

// List streams the suppression records: SCAN MATCH ResponseKeyPattern with a bounded
// COUNT (on a cluster, on every master), GET and PTTL of each batch in one pipeline, and emit
// for each record passing the filters, as it goes. emit is never called concurrently; an
// error from it stops the listing and is returned. Keys that vanish between SCAN and GET are
// skipped. Memory stays bounded (nothing is remembered between SCAN batches), so a key SCAN
// returns twice (possible while Redis rehashes) is listed twice.
func List(ctx context.Context, opts ListOptions, emit func(ListEntry) error) (ListStats, error) {
	var stats ListStats
	if opts.Redis == nil {
		return stats, errors.New("suppression list: no Redis client")
	}
	state, err := ListState(opts.State)
	if err != nil {
		return stats, err
	}
	count := opts.ScanCount
	if count <= 0 {
		count = ListScanCount
	}
	var mu sync.Mutex // serializes emit and stats across the masters' goroutines
	scanNode := func(ctx context.Context, node redis.Cmdable) error {
		var cursor uint64
		for {
			keys, next, err := node.Scan(ctx, cursor, ResponseKeyPattern, count).Result()
			if err != nil {
				return opsRedisErr(fmt.Sprintf("scanning %s", ResponseKeyPattern), err)
			}
			var hashes []string
			for _, k := range keys {
				if h, ok := IdentityOfResponseKey(k); ok {
					hashes = append(hashes, h)
				}
			}
			if len(hashes) > 0 {
				if err := listBatch(ctx, node, hashes, state, opts.Campaign, &mu, &stats, emit); err != nil {
					return err
				}
			}
			if next == 0 {
				return nil
			}
			cursor = next
		}
	}
	if cc, ok := opts.Redis.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			if err := scanNode(ctx, node); err != nil {
				return fmt.Errorf("node %s: %w", node.Options().Addr, err)
			}
			return nil
		})
	} else {
		err = scanNode(ctx, opts.Redis)
	}
	return stats, err
}

func listBatch(ctx context.Context, node redis.Cmdable, hashes []string, state, campaign string,
	mu *sync.Mutex, stats *ListStats, emit func(ListEntry) error) error {
	pipe := node.Pipeline()
	gets := make([]*redis.StringCmd, len(hashes))
	ttls := make([]*redis.DurationCmd, len(hashes))
	for i, h := range hashes {
		gets[i] = pipe.Get(ctx, ResponseKey(h))
		ttls[i] = pipe.PTTL(ctx, ResponseKey(h))
	}
	_, _ = pipe.Exec(ctx) // each command's error is checked below
	for i, h := range hashes {
		raw, err := gets[i].Result()
		if errors.Is(err, redis.Nil) {
			continue // gone since SCAN (an expired cooldown, a reset)
		}
		if err != nil {
			return opsRedisErr(fmt.Sprintf("reading %s", ResponseKey(h)), err)
		}
		ttl, err := ttls[i].Result()
		if err != nil {
			return opsRedisErr(fmt.Sprintf("reading the TTL of %s", ResponseKey(h)), err)
		}
		if ttl == -2 {
			continue // expired between GET and PTTL
		}
		e := ListEntry{IdentityHash: h, TTLMillis: -1}
		if ttl >= 0 {
			e.TTLMillis = ttl.Milliseconds()
		}
		rec, why := opsParseRecord(raw)
		if rec != nil {
			e.State, e.CampaignID, e.RespondedAt, e.DistinctID = rec.Response, rec.CampaignID, rec.RespondedAt, rec.DistinctID
		} else {
			e.Error = why
		}
		mu.Lock()
		stats.Scanned++
		if rec == nil {
			stats.Unreadable++
		}
		keep := (rec != nil || (state == "" && campaign == "")) &&
			(state == "" || e.State == state) && (campaign == "" || e.CampaignID == campaign)
		if keep {
			stats.Listed++
			err = emit(e)
		}
		mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}
