package suppression_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/stack"
	"github.com/mcpulse/mcpulse/suppression"
	"github.com/mcpulse/mcpulse/testkit/testenv"
)

// ---- helpers of the show/reset/list tests (prefixed ops*: reconcile_test.go has its own) ----

const opsInstance = ingest.DefaultInstanceURL

// opsStack is a migrated embedded stack with clients, one per test.
type opsStack struct {
	t       *testing.T
	brokers []string
	ch      driver.Conn
	rdb     redis.UniversalClient
	pub     *ingest.Publisher
}

func newOpsStack(t *testing.T) *opsStack {
	t.Helper()
	e := testenv.New(t, testenv.Options{})
	return &opsStack{t: t, brokers: e.Stack.KafkaBrokers, ch: e.ClickHouse, rdb: e.Redis, pub: e.Publisher}
}

func (s *opsStack) resetOptions(distinctID string) suppression.ResetOptions {
	return suppression.ResetOptions{
		Redis: s.rdb, ClickHouse: s.ch, Publisher: s.pub,
		DistinctID: distinctID, InstanceURL: opsInstance,
		Actor: "alice", Reason: "ticket 1234",
	}
}

func opsHash(distinctID string) string { return ingest.IdentityHash(opsInstance, distinctID) }

func opsPendingKey(hash, id string) string {
	return suppression.ResponseKey(hash) + ":mcp-interview:" + id
}

// opsPutRecord writes a :response record as the consumers would (ttl 0: none).
func opsPutRecord(t *testing.T, rdb redis.Cmdable, distinctID string, rec suppression.Record, ttl time.Duration) string {
	t.Helper()
	rec.DistinctID = distinctID
	data, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(context.Background(), suppression.ResponseKey(opsHash(distinctID)), data, ttl).Err(); err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// opsPutPending writes pending continuation keys of an identity (10 minutes, as the MCP server).
func opsPutPending(t *testing.T, rdb redis.Cmdable, distinctID string, ids ...string) []string {
	t.Helper()
	var keys []string
	for _, id := range ids {
		k := opsPendingKey(opsHash(distinctID), id)
		if err := rdb.Set(context.Background(), k, `{"step":1}`, 10*time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	return keys
}

func opsExists(t *testing.T, rdb redis.Cmdable, key string) bool {
	t.Helper()
	n, err := rdb.Exists(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// opsHistory inserts one recruitment_events row for distinctID.
func opsHistory(t *testing.T, ch driver.Conn, distinctID, kind, campaign, invitation, response string, at time.Time, respondedAt *time.Time) {
	t.Helper()
	ctx := context.Background()
	b, err := ch.PrepareBatch(ctx, `INSERT INTO mcpulse.recruitment_events (uuid, timestamp, kind, distinct_id,
identity_hash, instance_url, campaign_id, invitation_id, response, responded_at)`)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Append(uuid.New(), at, kind, distinctID, opsHash(distinctID), opsInstance, campaign, invitation, response, respondedAt); err != nil {
		t.Fatal(err)
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
}

// opsAuditMessages reads every message of the audit topic.
func opsAuditMessages(t *testing.T, brokers []string) []kafka.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := kafka.DialContext(ctx, "tcp", brokers[0])
	if err != nil {
		t.Fatal(err)
	}
	parts, err := conn.ReadPartitions(ingest.TopicAudit)
	conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	var all []kafka.Message
	for _, p := range parts {
		pc, err := kafka.DialLeader(ctx, "tcp", brokers[0], ingest.TopicAudit, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		first, last, err := pc.ReadOffsets()
		pc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if last <= first {
			continue
		}
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: ingest.TopicAudit, Partition: p.ID, MaxWait: 50 * time.Millisecond})
		if err := r.SetOffset(first); err != nil {
			t.Fatal(err)
		}
		for {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				r.Close()
				t.Fatalf("reading %s/%d: %v", ingest.TopicAudit, p.ID, err)
			}
			all = append(all, m)
			if m.Offset >= last-1 {
				break
			}
		}
		r.Close()
	}
	return all
}

// ---- tests ----

func TestResetDeletesRecordAndOwnPendingKeysWritesWatermarkAndPublishesAudit(t *testing.T) {
	s := newOpsStack(t)
	ctx := context.Background()
	const alice, bob = "user-alice", "user-bob"
	hash := opsHash(alice)
	recJSON := opsPutRecord(t, s.rdb, alice, suppression.Record{CampaignID: "onboarding", Response: suppression.StateDeclined,
		RespondedAt: "2026-11-20T10:00:00.000Z"}, 0)
	pending := opsPutPending(t, s.rdb, alice, "inv-1", "inv-2")
	opsPutRecord(t, s.rdb, bob, suppression.Record{CampaignID: "onboarding", Response: suppression.StateAccepted, RespondedAt: "2026-11-21T10:00:00.000Z"}, 0)
	bobPending := opsPutPending(t, s.rdb, bob, "inv-9")

	opts := s.resetOptions(alice)
	opts.ScanCount = 2                                  // several SCAN round trips
	opts.Reason = "ticket \"1234\"\n</script> \u2028 é" // JSON-escaped into the watermark by the script
	// The reset instant is the Redis server's clock, which on this machine is the test's.
	before := time.Now().Truncate(time.Millisecond)
	rep, err := suppression.Reset(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now()

	wantDeleted := append([]string{suppression.ResponseKey(hash)}, pending...)
	slices.Sort(wantDeleted)
	got := slices.Clone(rep.DeletedKeys)
	slices.Sort(got)
	if !slices.Equal(got, wantDeleted) {
		t.Errorf("DeletedKeys = %q, want %q", got, wantDeleted)
	}
	if !rep.HadRecord || rep.PreviousRecord != recJSON {
		t.Errorf("previous record = %v %q, want %q", rep.HadRecord, rep.PreviousRecord, recJSON)
	}
	for _, k := range wantDeleted {
		if opsExists(t, s.rdb, k) {
			t.Errorf("%s still exists", k)
		}
	}
	for _, k := range append(bobPending, suppression.ResponseKey(opsHash(bob))) {
		if !opsExists(t, s.rdb, k) {
			t.Errorf("another identity's key %s was deleted", k)
		}
	}

	// The watermark: reset_at from the server's clock, the JSON Go would write, no TTL.
	resetAt, ok := suppression.ParseTime(rep.Watermark.ResetAt)
	if !ok || resetAt.Before(before) || resetAt.After(after) {
		t.Errorf("reset_at %q, want a time between %s and %s", rep.Watermark.ResetAt, before, after)
	}
	raw, err := s.rdb.Get(ctx, suppression.ResetKey(hash)).Result()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(suppression.ResetWatermark{ResetAt: suppression.FormatTime(resetAt), Actor: "alice", Reason: opts.Reason})
	if raw != string(want) {
		t.Errorf("watermark = %s, want %s", raw, want)
	}
	if ttl := s.rdb.PTTL(ctx, suppression.ResetKey(hash)).Val(); ttl != -1 {
		t.Errorf("watermark PTTL = %v, want none", ttl)
	}

	// The audit event, keyed by the identity hash.
	msgs := opsAuditMessages(t, s.brokers)
	if len(msgs) != 1 {
		t.Fatalf("%d audit messages, want 1", len(msgs))
	}
	if string(msgs[0].Key) != hash {
		t.Errorf("audit key = %q, want %s", msgs[0].Key, hash)
	}
	ev, err := ingest.ParseAuditEvent(msgs[0].Value)
	if err != nil {
		t.Fatalf("audit event %s: %v", msgs[0].Value, err)
	}
	id, err := uuid.Parse(ev.UUID)
	if err != nil || id.Version() != 7 {
		t.Errorf("audit uuid %s: want a UUIDv7", ev.UUID)
	}
	if ev.Action != ingest.AuditActionReset || !ev.At.Equal(resetAt) || ev.IdentityHash != hash || ev.DistinctID != alice ||
		ev.InstanceURL != opsInstance || ev.Actor != "alice" || ev.Reason != opts.Reason {
		t.Errorf("audit event = %+v", ev)
	}
	evDeleted := slices.Clone(ev.DeletedKeys)
	slices.Sort(evDeleted)
	if !slices.Equal(evDeleted, wantDeleted) {
		t.Errorf("audit deleted_keys = %q, want %q", ev.DeletedKeys, wantDeleted)
	}
	if string(ev.PreviousRecord) != recJSON {
		t.Errorf("audit previous_record = %s, want %s", ev.PreviousRecord, recJSON)
	}
	if rep.Audit == nil || rep.Audit.UUID != ev.UUID {
		t.Errorf("report audit = %+v, want uuid %s", rep.Audit, ev.UUID)
	}

	// A response dated before the watermark, or up to the clock rule's margin after it, is now
	// ignored by the consumers' script; one dated later is not.
	for _, c := range []struct {
		at   time.Time
		want suppression.Outcome
	}{
		{time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC), suppression.BeforeReset},
		{resetAt.Add(suppression.ResetMargin), suppression.BeforeReset},
		{resetAt.Add(suppression.ResetMargin + time.Millisecond), suppression.Written},
	} {
		out, err := suppression.ApplyResponse(ctx, s.rdb, hash, suppression.NewResponse(alice, "onboarding", ingest.ResponseDecline, c.at), after)
		if err != nil || out != c.want {
			t.Errorf("decline dated %s after a reset at %s: %q, %v; want %q", suppression.FormatTime(c.at), rep.Watermark.ResetAt, out, err, c.want)
		}
	}

	var text strings.Builder
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "published audit event "+ev.UUID) {
		t.Errorf("report text:\n%s", text.String())
	}
}

func TestResetDryRunWritesNothing(t *testing.T) {
	s := newOpsStack(t)
	ctx := context.Background()
	const alice = "user-alice"
	hash := opsHash(alice)
	opsPutRecord(t, s.rdb, alice, suppression.Record{CampaignID: "onboarding", Response: suppression.StateCooldown,
		RespondedAt: suppression.FormatTime(time.Now().Add(-time.Hour))}, 167*time.Hour)
	pending := opsPutPending(t, s.rdb, alice, "inv-1")

	opts := s.resetOptions(alice)
	opts.DryRun = true
	opts.Publisher = nil // a dry run needs no Kafka at all
	rep, err := suppression.Reset(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{suppression.ResponseKey(hash), pending[0]}
	if !rep.DryRun || !slices.Equal(rep.DeletedKeys, want) || rep.Audit != nil {
		t.Errorf("dry run report: DryRun %v, DeletedKeys %q (want %q), Audit %v", rep.DryRun, rep.DeletedKeys, want, rep.Audit)
	}
	for _, k := range want {
		if !opsExists(t, s.rdb, k) {
			t.Errorf("dry run deleted %s", k)
		}
	}
	if opsExists(t, s.rdb, suppression.ResetKey(hash)) {
		t.Error("dry run wrote the watermark")
	}
	if ttl := s.rdb.PTTL(ctx, suppression.ResponseKey(hash)).Val(); ttl <= 166*time.Hour {
		t.Errorf("dry run changed the record's TTL: %v", ttl)
	}
	if n := s.rdb.DBSize(ctx).Val(); n != 2 {
		t.Errorf("%d keys in Redis after a dry run, want 2", n)
	}

	// With a publisher given, a dry run still publishes nothing.
	opts.Publisher = s.pub
	if _, err := suppression.Reset(ctx, opts); err != nil {
		t.Fatal(err)
	}
	if msgs := opsAuditMessages(t, s.brokers); len(msgs) != 0 {
		t.Errorf("dry run published %d audit messages", len(msgs))
	}
	var text strings.Builder
	_ = rep.WriteText(&text)
	if !strings.Contains(text.String(), "would delete") || !strings.Contains(text.String(), "nothing was written") {
		t.Errorf("dry run text:\n%s", text.String())
	}
}

func TestResetUnknownIdentityWritesNothing(t *testing.T) {
	s := newOpsStack(t)
	ctx := context.Background()
	// Someone else has state; the unknown identity has only a look-alike key of another hash.
	opsPutRecord(t, s.rdb, "user-known", suppression.Record{CampaignID: "c", Response: suppression.StateDeclined, RespondedAt: "2026-11-20T10:00:00.000Z"}, 0)

	_, err := suppression.Reset(ctx, s.resetOptions("user-nobody\x1b[2J"))
	if !errors.Is(err, suppression.ErrResetUnknownIdentity) {
		t.Fatalf("err = %v, want ErrResetUnknownIdentity", err)
	}
	var unknown *suppression.ResetUnknownIdentityError
	if !errors.As(err, &unknown) || unknown.IdentityHash != opsHash("user-nobody\x1b[2J") {
		t.Errorf("err = %#v", err)
	}
	wantMsg := fmt.Sprintf(`no suppression state or history for identity %s (distinct_id "user-nobody\x1b[2J")`, opsHash("user-nobody\x1b[2J"))
	if err.Error() != wantMsg {
		t.Errorf("message = %q, want %q", err.Error(), wantMsg)
	}
	if opsExists(t, s.rdb, suppression.ResetKey(opsHash("user-nobody\x1b[2J"))) {
		t.Error("watermark written for an unknown identity")
	}
	if n := s.rdb.DBSize(ctx).Val(); n != 1 {
		t.Errorf("%d keys in Redis, want 1", n)
	}
	// By hash too.
	opts := s.resetOptions("")
	opts.IdentityHash = strings.Repeat("ab", 32)
	if _, err := suppression.Reset(ctx, opts); !errors.Is(err, suppression.ErrResetUnknownIdentity) ||
		err.Error() != "no suppression state or history for identity "+strings.Repeat("ab", 32) {
		t.Errorf("by hash: %v", err)
	}
	if msgs := opsAuditMessages(t, s.brokers); len(msgs) != 0 {
		t.Errorf("%d audit messages for an unknown identity", len(msgs))
	}
}

func TestResetIdentityWithHistoryOnlyWritesWatermark(t *testing.T) {
	s := newOpsStack(t)
	ctx := context.Background()
	const carol = "user-carol"
	at := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	opsHistory(t, s.ch, carol, "response", "onboarding", "inv-1", "decline", at, &at)

	opts := s.resetOptions("")
	opts.IdentityHash = strings.ToUpper(opsHash(carol)) // given by hash, in upper case
	rep, err := suppression.Reset(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if rep.HadRecord || len(rep.DeletedKeys) != 0 || rep.HistoryEvents != 1 {
		t.Errorf("report = %+v", rep)
	}
	if !opsExists(t, s.rdb, suppression.ResetKey(opsHash(carol))) {
		t.Error("no watermark")
	}
	msgs := opsAuditMessages(t, s.brokers)
	if len(msgs) != 1 {
		t.Fatalf("%d audit messages, want 1", len(msgs))
	}
	var ev map[string]any
	if err := json.Unmarshal(msgs[0].Value, &ev); err != nil {
		t.Fatal(err)
	}
	if ev["previous_record"] != nil || ev["distinct_id"] != "" || ev["instance_url"] != "" || fmt.Sprint(ev["deleted_keys"]) != "[]" {
		t.Errorf("audit event %s", msgs[0].Value)
	}
}

func TestResetNeedsReasonAndActor(t *testing.T) {
	s := newOpsStack(t)
	ctx := context.Background()
	opsPutRecord(t, s.rdb, "user-a", suppression.Record{CampaignID: "c", Response: suppression.StateDeclined, RespondedAt: "2026-11-20T10:00:00.000Z"}, 0)
	opts := s.resetOptions("user-a")
	opts.Reason, opts.Actor = " ", ""
	_, err := suppression.Reset(ctx, opts)
	if err == nil || !strings.Contains(err.Error(), "reason is required") || !strings.Contains(err.Error(), "actor is required") {
		t.Errorf("err = %v", err)
	}
	if !opsExists(t, s.rdb, suppression.ResponseKey(opsHash("user-a"))) || opsExists(t, s.rdb, suppression.ResetKey(opsHash("user-a"))) {
		t.Error("Redis changed by a refused reset")
	}
}

// opsFailingPublisher refuses every message.
type opsFailingPublisher struct{}

func (opsFailingPublisher) PublishRaw(context.Context, string, []byte, []byte, ...kafka.Header) error {
	return errors.New("broker down")
}

func TestResetAuditFailureReturnsTheEventToRepublish(t *testing.T) {
	s := newOpsStack(t)
	ctx := context.Background()
	opsPutRecord(t, s.rdb, "user-a", suppression.Record{CampaignID: "c", Response: suppression.StateDeclined, RespondedAt: "2026-11-20T10:00:00.000Z"}, 0)
	opts := s.resetOptions("user-a")
	opts.Publisher = opsFailingPublisher{}
	rep, err := suppression.Reset(ctx, opts)
	var auditErr *suppression.ResetAuditError
	if !errors.As(err, &auditErr) {
		t.Fatalf("err = %v, want a *ResetAuditError", err)
	}
	if rep == nil || len(rep.DeletedKeys) != 1 || rep.Audit != nil || len(rep.AuditJSON) == 0 {
		t.Errorf("report = %+v", rep)
	}
	if opsExists(t, s.rdb, suppression.ResponseKey(opsHash("user-a"))) {
		t.Error("record not deleted")
	}
	var text strings.Builder
	_ = rep.WriteText(&text)
	if !strings.Contains(text.String(), "NOT published") {
		t.Errorf("text:\n%s", text.String())
	}
	ev, perr := ingest.ParseAuditEvent(auditErr.Event)
	if perr != nil || ev.IdentityHash != opsHash("user-a") || len(ev.DeletedKeys) != 1 {
		t.Errorf("event to re-publish %s: %v", auditErr.Event, perr)
	}
	if !strings.Contains(err.Error(), "NOT published") || !strings.Contains(err.Error(), "broker down") {
		t.Errorf("message = %q", err)
	}
}

func TestParseResetTargets(t *testing.T) {
	h := strings.Repeat("0f", 32)
	in := "# ops list\n\nuser-1\n  user 2  \r\nhash:" + strings.ToUpper(h) + "\n#hash:zz\n"
	got, err := suppression.ParseResetTargets(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []suppression.ResetTarget{{Line: 3, DistinctID: "user-1"}, {Line: 4, DistinctID: "user 2"}, {Line: 5, IdentityHash: h}}
	if !slices.Equal(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if _, err := suppression.ParseResetTargets(strings.NewReader("user-1\nhash:abc\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("bad hash line: %v", err)
	}
}

func TestResetBatchRefusesMoreThanTheLimitWithoutYes(t *testing.T) {
	s := newOpsStack(t)
	ctx := context.Background()
	var targets []suppression.ResetTarget
	for i := range suppression.ResetBatchLimit + 1 {
		id := fmt.Sprintf("user-%d", i)
		opsPutRecord(t, s.rdb, id, suppression.Record{CampaignID: "c", Response: suppression.StateDeclined, RespondedAt: "2026-11-20T10:00:00.000Z"}, 0)
		targets = append(targets, suppression.ResetTarget{Line: i + 1, DistinctID: id})
	}
	called := 0
	_, err := suppression.ResetBatch(ctx, s.resetOptions(""), targets, false, func(suppression.ResetBatchOutcome) { called++ })
	if !errors.Is(err, suppression.ErrResetTooMany) {
		t.Fatalf("err = %v, want ErrResetTooMany", err)
	}
	if called != 0 {
		t.Errorf("%d identities processed", called)
	}
	if n := s.rdb.DBSize(ctx).Val(); n != int64(len(targets)) {
		t.Errorf("%d keys in Redis, want the %d records untouched", n, len(targets))
	}
	if msgs := opsAuditMessages(t, s.brokers); len(msgs) != 0 {
		t.Errorf("%d audit messages", len(msgs))
	}

	// Exactly the limit needs no --yes; a dry run of them writes nothing.
	opts := s.resetOptions("")
	opts.DryRun = true
	failed, err := suppression.ResetBatch(ctx, opts, targets[:suppression.ResetBatchLimit], false, nil)
	if err != nil || failed != 0 {
		t.Errorf("batch of %d: failed %d, %v", suppression.ResetBatchLimit, failed, err)
	}
}

func TestResetBatchCarriesOnPastUnknownIdentities(t *testing.T) {
	s := newOpsStack(t)
	ctx := context.Background()
	opsPutRecord(t, s.rdb, "user-a", suppression.Record{CampaignID: "c", Response: suppression.StateDeclined, RespondedAt: "2026-11-20T10:00:00.000Z"}, 0)
	opsPutPending(t, s.rdb, "user-b", "inv-1")
	targets, err := suppression.ParseResetTargets(strings.NewReader("user-a\nuser-unknown\nhash:" + opsHash("user-b") + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	var outcomes []suppression.ResetBatchOutcome
	failed, err := suppression.ResetBatch(ctx, s.resetOptions(""), targets, false, func(o suppression.ResetBatchOutcome) { outcomes = append(outcomes, o) })
	if err != nil || failed != 1 || len(outcomes) != 3 {
		t.Fatalf("failed %d, err %v, %d outcomes", failed, err, len(outcomes))
	}
	if !errors.Is(outcomes[1].Err, suppression.ErrResetUnknownIdentity) || outcomes[0].Err != nil || outcomes[2].Err != nil {
		t.Errorf("outcomes: %v / %v / %v", outcomes[0].Err, outcomes[1].Err, outcomes[2].Err)
	}
	for _, id := range []string{"user-a", "user-b"} {
		if !opsExists(t, s.rdb, suppression.ResetKey(opsHash(id))) {
			t.Errorf("%s not reset", id)
		}
	}
	if n := s.rdb.DBSize(ctx).Val(); n != 2 {
		t.Errorf("%d keys in Redis, want the 2 watermarks", n)
	}
	if msgs := opsAuditMessages(t, s.brokers); len(msgs) != 2 {
		t.Errorf("%d audit messages, want 2", len(msgs))
	}
}

func TestResetAndListOnRedisCluster(t *testing.T) {
	s := newOpsStack(t)
	ctx := context.Background()
	rc := stack.RedisClusterForTest(t)
	rdb, err := stores.OpenRedis(ctx, rc.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })

	// Enough identities to land on every master.
	var ids []string
	for i := range 30 {
		id := fmt.Sprintf("cluster-user-%d", i)
		ids = append(ids, id)
		opsPutRecord(t, rdb, id, suppression.Record{CampaignID: "cluster", Response: suppression.StateDeclined, RespondedAt: "2026-11-20T10:00:00.000Z"}, 0)
		opsPutPending(t, rdb, id, "inv-a", "inv-b")
	}
	masters := map[string]bool{}
	for _, id := range ids {
		node, err := rdb.(*redis.ClusterClient).MasterForKey(ctx, suppression.ResponseKey(opsHash(id)))
		if err != nil {
			t.Fatal(err)
		}
		masters[node.Options().Addr] = true
	}
	if len(masters) != 3 {
		t.Fatalf("the identities live on %d masters, want 3", len(masters))
	}
	listed := map[string]bool{}
	stats, err := suppression.List(ctx, suppression.ListOptions{Redis: rdb, Campaign: "cluster", ScanCount: 7}, func(e suppression.ListEntry) error {
		listed[e.IdentityHash] = true
		return nil
	})
	if err != nil || stats.Listed != 30 || len(listed) != 30 {
		t.Fatalf("list on cluster: %+v, %d distinct, %v", stats, len(listed), err)
	}

	opts := s.resetOptions(ids[7])
	opts.Redis = rdb
	rep, err := suppression.Reset(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.DeletedKeys) != 3 {
		t.Errorf("deleted %q, want the record and 2 pending keys", rep.DeletedKeys)
	}
	for _, k := range rep.DeletedKeys {
		if opsExists(t, rdb, k) {
			t.Errorf("%s still exists", k)
		}
	}
	if !opsExists(t, rdb, suppression.ResetKey(opsHash(ids[7]))) || !opsExists(t, rdb, opsPendingKey(opsHash(ids[8]), "inv-a")) {
		t.Error("watermark missing or another identity's pending key deleted")
	}
	show, err := suppression.Show(ctx, suppression.ShowOptions{Redis: rdb, DistinctID: ids[8], InstanceURL: opsInstance})
	if err != nil || len(show.PendingKeys) != 2 || show.Record == nil {
		t.Errorf("show on cluster: %+v, %v", show, err)
	}
}

func TestResetCheckKafka(t *testing.T) {
	s := newOpsStack(t)
	ctx := context.Background()
	if err := suppression.ResetCheckKafka(ctx, s.brokers); err != nil {
		t.Errorf("reachable brokers: %v", err)
	}
	if err := suppression.ResetCheckKafka(ctx, []string{"127.0.0.1:1"}); err == nil || !strings.Contains(err.Error(), "nothing was changed") {
		t.Errorf("unreachable brokers: %v", err)
	}
}

// A distinct id the pipeline refuses (invalid UTF-8, a UTF-16 surrogate encoded on its own)
// hashes as U+FFFD, which names another person: show and reset refuse it, and touch nothing,
// even when that other person has state.
func TestShowAndResetRefuseIdentitiesThePipelineRefuses(t *testing.T) {
	s := newOpsStack(t)
	ctx := context.Background()
	for _, c := range []struct{ given, lookalike string }{
		{"a\xffb", "a\ufffdb"},
		{"a\xed\xa0\x80b", "a\ufffd\ufffd\ufffdb"}, // a lone high surrogate, as WTF-8 writes it
	} {
		if opsHash(c.given) != opsHash(c.lookalike) {
			t.Fatalf("%q and %q hash apart: the case shows nothing", c.given, c.lookalike)
		}
		opsPutRecord(t, s.rdb, c.lookalike, suppression.Record{CampaignID: "c", Response: suppression.StateDeclined, RespondedAt: "2026-11-20T10:00:00.000Z"}, 0)

		if rep, err := suppression.Show(ctx, suppression.ShowOptions{Redis: s.rdb, ClickHouse: s.ch, DistinctID: c.given}); !errors.Is(err, suppression.ErrBadIdentity) ||
			!strings.Contains(err.Error(), "invalid UTF-8 or an unpaired UTF-16 surrogate") {
			t.Errorf("show %q: %+v, %v; want ErrBadIdentity naming invalid UTF-8", c.given, rep, err)
		}
		if err := suppression.CheckIdentityArgs(c.given, "", ""); !errors.Is(err, suppression.ErrBadIdentity) {
			t.Errorf("CheckIdentityArgs(%q): %v", c.given, err)
		}
		if _, err := suppression.Reset(ctx, s.resetOptions(c.given)); !errors.Is(err, suppression.ErrBadIdentity) {
			t.Errorf("reset %q: %v, want ErrBadIdentity", c.given, err)
		}
		opts := s.resetOptions("ok")
		opts.InstanceURL = "https://x\xed\xbf\xbf"
		if _, err := suppression.Reset(ctx, opts); !errors.Is(err, suppression.ErrBadIdentity) || !strings.Contains(err.Error(), "instance_url") {
			t.Errorf("reset with a bad instance URL: %v, want ErrBadIdentity naming instance_url", err)
		}
		if !opsExists(t, s.rdb, suppression.ResponseKey(opsHash(c.lookalike))) || opsExists(t, s.rdb, suppression.ResetKey(opsHash(c.lookalike))) {
			t.Errorf("reset %q touched %q's state", c.given, c.lookalike)
		}
	}
	if msgs := opsAuditMessages(t, s.brokers); len(msgs) != 0 {
		t.Errorf("%d audit messages", len(msgs))
	}
	// A reset file names every bad line before anything is done.
	_, err := suppression.ParseResetTargets(strings.NewReader("fine\nbad \xff\nalso fine\n" + strings.Repeat("x", 201) + "\n"))
	if !errors.Is(err, suppression.ErrBadIdentity) || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), "line 4") {
		t.Errorf("reset file with bad lines: %v", err)
	}
}
