package consumers_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpulse/mcpulse/consumers"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/stack"
)

// Each case applies responses in arrival order to one identity and checks the final record
// and TTL against DESIGN.md §3. The same cases run on a Redis Cluster in cluster_test.go.
func TestSuppressionPrecedence(t *testing.T) {
	s := stack.ForTest(t)
	rdb, err := stores.OpenRedis(context.Background(), s.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	testSuppressionPrecedence(t, rdb)
}

// testSuppressionPrecedence runs the precedence cases against rdb (a single server or a
// cluster client). Each case uses its own identity, so the cases' keys hash to different slots.
// It returns the identity hashes the cases used.
func testSuppressionPrecedence(t *testing.T, rdb redis.UniversalClient) []string {
	ctx := context.Background()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return now.Add(d) }
	type resp struct {
		answer string
		at     time.Time
		want   string // ApplyResponse outcome
	}
	cases := []struct {
		name      string
		responses []resp
		resetAt   *time.Time
		want      string        // final state, "" = no record
		wantAt    time.Time     // final responded_at
		wantTTL   time.Duration // 0 = no TTL
	}{
		{name: "accept is permanent", responses: []resp{{"accept", at(-time.Hour), consumers.ApplyWritten}},
			want: consumers.StateAccepted, wantAt: at(-time.Hour)},
		{name: "decline is permanent", responses: []resp{{"decline", at(-time.Hour), consumers.ApplyWritten}},
			want: consumers.StateDeclined, wantAt: at(-time.Hour)},
		{name: "cancel starts a 7-day cooldown from responded_at", responses: []resp{{"cancel", at(-24 * time.Hour), consumers.ApplyWritten}},
			want: consumers.StateCooldown, wantAt: at(-24 * time.Hour), wantTTL: 6 * 24 * time.Hour},
		{name: "a late cancel after a decline keeps the decline", responses: []resp{
			{"decline", at(-2 * time.Hour), consumers.ApplyWritten}, {"cancel", at(-time.Hour), consumers.ApplyKeptPermanent}},
			want: consumers.StateDeclined, wantAt: at(-2 * time.Hour)},
		{name: "an older decline arriving after a newer cancel replaces the cooldown", responses: []resp{
			{"cancel", at(-time.Hour), consumers.ApplyWritten}, {"decline", at(-2 * time.Hour), consumers.ApplyWritten}},
			want: consumers.StateDeclined, wantAt: at(-2 * time.Hour)},
		{name: "a newer permanent state replaces an older one", responses: []resp{
			{"decline", at(-2 * time.Hour), consumers.ApplyWritten}, {"accept", at(-time.Hour), consumers.ApplyWritten}},
			want: consumers.StateAccepted, wantAt: at(-time.Hour)},
		{name: "an older permanent state arriving late changes nothing", responses: []resp{
			{"accept", at(-time.Hour), consumers.ApplyWritten}, {"decline", at(-2 * time.Hour), consumers.ApplyOlder}},
			want: consumers.StateAccepted, wantAt: at(-time.Hour)},
		{name: "a newer cooldown replaces an older cooldown", responses: []resp{
			{"cancel", at(-48 * time.Hour), consumers.ApplyWritten}, {"cancel", at(-24 * time.Hour), consumers.ApplyWritten}},
			want: consumers.StateCooldown, wantAt: at(-24 * time.Hour), wantTTL: 6 * 24 * time.Hour},
		{name: "a replayed response changes nothing", responses: []resp{
			{"cancel", at(-24 * time.Hour), consumers.ApplyWritten}, {"cancel", at(-24 * time.Hour), consumers.ApplyOlder}},
			want: consumers.StateCooldown, wantAt: at(-24 * time.Hour), wantTTL: 6 * 24 * time.Hour},
		{name: "a cooldown that already ended is not written", responses: []resp{{"cancel", at(-8 * 24 * time.Hour), consumers.ApplyExpired}}},
		{name: "responses at or before the reset are ignored, later ones apply",
			resetAt: ptr(at(-time.Hour)),
			responses: []resp{
				{"decline", at(-2 * time.Hour), consumers.ApplyBeforeReset},
				{"decline", at(-time.Hour), consumers.ApplyBeforeReset},
				{"cancel", at(-30 * time.Minute), consumers.ApplyWritten},
			},
			want: consumers.StateCooldown, wantAt: at(-30 * time.Minute), wantTTL: 7*24*time.Hour - 30*time.Minute},
	}
	var hashes []string
	for i, tc := range cases {
		hash := ingest.IdentityHash("https://us.posthog.com", "person-"+string(rune('a'+i)))
		hashes = append(hashes, hash)
		t.Run(tc.name, func(t *testing.T) {
			if tc.resetAt != nil {
				reset := `{"reset_at":"` + consumers.FormatTime(*tc.resetAt) + `","actor":"ops","reason":"asked"}`
				if err := rdb.Set(ctx, consumers.ResetKey(hash), reset, 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
			for _, r := range tc.responses {
				rec := consumers.Record{DistinctID: "d", CampaignID: "c", Response: consumers.StateFor(r.answer), RespondedAt: consumers.FormatTime(r.at)}
				got, err := consumers.ApplyResponse(ctx, rdb, hash, rec, r.at, now)
				if err != nil {
					t.Fatal(err)
				}
				if got != r.want {
					t.Errorf("%s at %s: outcome %q, want %q", r.answer, r.at, got, r.want)
				}
			}
			rec, err := consumers.ReadRecord(ctx, rdb, hash)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if rec != nil {
					t.Fatalf("record %+v, want none", rec)
				}
				return
			}
			if rec == nil {
				t.Fatalf("no record, want %s", tc.want)
			}
			if rec.Response != tc.want || rec.RespondedAt != consumers.FormatTime(tc.wantAt) {
				t.Errorf("record %+v, want %s at %s", rec, tc.want, consumers.FormatTime(tc.wantAt))
			}
			ttl, err := rdb.PTTL(ctx, consumers.ResponseKey(hash)).Result()
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantTTL == 0 && ttl >= 0 {
				t.Errorf("TTL %s, want none", ttl)
			}
			// The TTL is set from the pinned now; Redis counts down in real time meanwhile.
			if tc.wantTTL > 0 && (ttl > tc.wantTTL || ttl < tc.wantTTL-time.Minute) {
				t.Errorf("TTL %s, want %s", ttl, tc.wantTTL)
			}
		})
	}
	return hashes
}

func ptr[T any](v T) *T { return &v }

// The record format is shared with the MCP servers, which write responded_at as JavaScript's
// toISOString does; the script must read a record written with an offset too.
func TestSuppressionReadsRecordsWrittenWithOffsets(t *testing.T) {
	s := stack.ForTest(t)
	ctx := context.Background()
	rdb, err := stores.OpenRedis(ctx, s.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	hash := ingest.IdentityHash("https://eu.posthog.com", "x")
	// 2026-11-29T10:00:00+02:00 is 08:00Z: a cancel at 09:00Z is newer than this cooldown.
	if err := rdb.Set(ctx, consumers.ResponseKey(hash), `{"distinct_id":"x","campaign_id":"c","response":"cooldown","responded_at":"2026-11-29T10:00:00+02:00"}`, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	cancelAt := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	rec := consumers.Record{DistinctID: "x", CampaignID: "c", Response: consumers.StateCooldown, RespondedAt: consumers.FormatTime(cancelAt)}
	got, err := consumers.ApplyResponse(ctx, rdb, hash, rec, cancelAt, now)
	if err != nil || got != consumers.ApplyWritten {
		t.Fatalf("outcome %q, %v; want written", got, err)
	}
	older := time.Date(2026, 11, 29, 7, 59, 0, 0, time.UTC)
	rec.RespondedAt = consumers.FormatTime(older)
	if got, _ := consumers.ApplyResponse(ctx, rdb, hash, rec, older, now); got != consumers.ApplyOlder {
		t.Fatalf("outcome %q for an older cancel, want older", got)
	}
}
