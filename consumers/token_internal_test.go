package consumers

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/mcpulse/mcpulse/testkit/testenv"
)

// A record reads back with its nonce, and a record without one (an earlier release's, or a
// batch stored without a token) reads back as before, with none; a malformed nonce is refused.
func TestBatchRecordsCarryTheirNonce(t *testing.T) {
	ranges := map[topicPartition]batchRange{{"mcp_tool_calls", 3}: {120345, 130000}, {"mcp_recruitment", 0}: {7, 9}}
	nonce := newNonce()
	if !validNonce(nonce) {
		t.Fatalf("newNonce() = %q: not a valid nonce", nonce)
	}
	if other := newNonce(); other == nonce {
		t.Fatalf("newNonce() twice gave %q", nonce)
	}
	v := encodeRecord(ranges, nonce)
	got, gotNonce, err := decodeRecord(v)
	if err != nil || gotNonce != nonce || len(got) != 2 || got[topicPartition{"mcp_tool_calls", 3}] != (batchRange{120345, 130000}) {
		t.Fatalf("decodeRecord(%q) = %v, %q, %v", v, got, gotNonce, err)
	}
	old := encodeRanges(ranges) // what an earlier release wrote
	if encodeRecord(ranges, "") != old {
		t.Errorf("a record without a nonce is %q, want the earlier release's %q", encodeRecord(ranges, ""), old)
	}
	got, gotNonce, err = decodeRecord(old)
	if err != nil || gotNonce != "" || len(got) != 2 {
		t.Fatalf("decodeRecord(%q) = %v, %q, %v: want its ranges and no nonce", old, got, gotNonce, err)
	}
	for _, bad := range []string{old + ";", old + ";xyz", old + ";" + strings.ToUpper(nonce), old + ";" + nonce + ";" + nonce, "t/1;" + nonce} {
		if _, _, err := decodeRecord(bad); err == nil {
			t.Errorf("decodeRecord(%q): no error", bad)
		}
	}
}

// A member replaying a record reuses its nonce only when it holds every range of it: a
// part of a batch replayed under the first attempt's tokens could be dropped although the
// first attempt never stored it.
func TestOnlyAWholeReplayReusesItsRecordsNonce(t *testing.T) {
	a, b := topicPartition{"t", 0}, topicPartition{"t", 1}
	recorded := map[topicPartition]batchRange{a: {10, 20}, b: {5, 9}}
	nonce := newNonce()
	if got := reusableNonce(recorded, map[topicPartition]batchRange{a: {10, 20}, b: {5, 9}}, nonce); got != nonce {
		t.Errorf("every range held: nonce %q, want the record's", got)
	}
	if got := reusableNonce(recorded, map[topicPartition]batchRange{a: {10, 20}}, nonce); got != "" {
		t.Errorf("one range of two held: nonce %q, want none", got)
	}
	if got := reusableNonce(recorded, recorded, ""); got != "" {
		t.Errorf("a record without a nonce: nonce %q, want none", got)
	}
}

func chunk(msgs ...kafka.Message) *prepared { return &prepared{msgs: msgs} }

func msg(tp topicPartition, offset int64) kafka.Message {
	return kafka.Message{Topic: tp.topic, Partition: tp.partition, Offset: offset}
}

// A streamed batch draws a fresh nonce unless it replays a recorded batch whose nonce it may
// reuse, starting within its ranges; a server without tokens gets none. A batch that reuses
// one admits no chunk outside the recorded ranges, and may close with it only holding the
// recorded batch whole while that is still the one replayed.
func TestAStreamedBatchReusesANonceOnlyForAWholeRecordedBatch(t *testing.T) {
	a, b := topicPartition{"t", 0}, topicPartition{"t", 1}
	recorded := map[topicPartition]batchRange{a: {10, 14}, b: {3, 5}}
	nonce := newNonce()
	known := &tokenServer{known: true, minRows: 1 << 20, minBytes: 256 << 20}

	var batch openBatch
	batch.drawNonce(nil, nil, chunk(msg(a, 10)))
	if batch.nonce != "" {
		t.Errorf("tokens unknown: nonce %q, want none", batch.nonce)
	}
	batch.drawNonce(&tokenServer{}, nil, chunk(msg(a, 10)))
	if batch.nonce != "" {
		t.Errorf("a server without tokens: nonce %q, want none", batch.nonce)
	}
	batch.drawNonce(known, nil, chunk(msg(a, 10)))
	first := batch.nonce
	batch.drawNonce(known, nil, chunk(msg(a, 10)))
	if !validNonce(first) || batch.nonce == first || batch.replays != nil {
		t.Errorf("first attempts: nonces %q then %q, want two fresh ones", first, batch.nonce)
	}

	rp := newReplay(recorded)
	rp.nonces = []string{""}
	batch.drawNonce(known, rp, chunk(msg(a, 10)))
	if batch.nonce == "" || batch.replays != nil {
		t.Errorf("a recorded batch without a reusable nonce: nonce %q (reused %v), want a fresh one", batch.nonce, batch.replays != nil)
	}

	rp = newReplay(recorded, map[topicPartition]batchRange{a: {14, 16}})
	rp.nonces = []string{nonce, newNonce()}
	batch.drawNonce(known, rp, chunk(msg(a, 13), msg(a, 14)))
	if batch.nonce == nonce {
		t.Error("a first chunk reaching past the recorded ranges reused the record's nonce")
	}
	var replay openBatch
	replay.last = map[topicPartition]kafka.Message{}
	replay.drawNonce(known, rp, chunk(msg(a, 10), msg(b, 3)))
	if replay.nonce != nonce || replay.replays == nil {
		t.Fatalf("a whole recorded batch replayed: nonce %q, want the record's %q", replay.nonce, nonce)
	}
	if !replay.admits(chunk(msg(a, 13), msg(b, 4))) {
		t.Error("a chunk within the recorded ranges was not admitted")
	}
	if replay.admits(chunk(msg(a, 13), msg(a, 14))) || replay.admits(chunk(msg(topicPartition{"t", 2}, 0))) {
		t.Error("a chunk outside the recorded ranges was admitted")
	}
	replay.last[a] = msg(a, 13)
	if replay.wholeReplay(rp, false) {
		t.Error("a replay holding a part of the recorded batch may close with its nonce")
	}
	replay.last[b] = msg(b, 4)
	if !replay.wholeReplay(rp, false) {
		t.Error("a replay holding the recorded batch whole may not close")
	}
	if replay.wholeReplay(rp, true) {
		t.Error("a replay whose chunk failed may close with its nonce")
	}
	rp.next()
	if replay.wholeReplay(rp, false) {
		t.Error("a replay may close with its nonce after the replay moved on")
	}
	var fresh openBatch
	fresh.drawNonce(known, rp, chunk(msg(a, 16))) // past the next recorded batch
	if fresh.wholeReplay(rp, true) != true || !fresh.admits(chunk(msg(a, 99))) {
		t.Error("a batch with its own nonce is held to the recorded ranges")
	}
}

// A record carries the batch's nonce only when the server stores each of its INSERTs all or
// nothing: below min_insert_block_size_rows and half min_insert_block_size_bytes.
func TestARecordCarriesTheNonceOnlyOfInsertsStoredWhole(t *testing.T) {
	ts := tokenServer{known: true, minRows: 1000, minBytes: 1 << 20}
	for _, tc := range []struct {
		rows, bytes int64
		want        bool
	}{
		{999, 1<<19 - 1, true},
		{1000, 10, false},
		{10, 1 << 19, false},
	} {
		if got := ts.onePiece(tc.rows, tc.bytes); got != tc.want {
			t.Errorf("onePiece(%d rows, %d bytes) = %t, want %t", tc.rows, tc.bytes, got, tc.want)
		}
	}
	if (tokenServer{known: true}).onePiece(1, 1) {
		t.Error("a server that squashes nothing stores an INSERT whole")
	}
	if !(tokenServer{known: true, minRows: 1000}).onePiece(999, 1<<40) {
		t.Error("no bytes bound: an INSERT below the rows bound is not stored whole")
	}
	b := openBatch{nonce: newNonce(), inserts: []rawInsert{nil, fakeInsert{rows: 10, bytes: 100}}}
	if got := b.recordNonce(&ts); got != b.nonce {
		t.Errorf("recordNonce = %q, want the batch's", got)
	}
	b.inserts = append(b.inserts, fakeInsert{rows: 1000, bytes: 100})
	if got := b.recordNonce(&ts); got != "" {
		t.Errorf("an INSERT at min_insert_block_size_rows: recordNonce = %q, want none", got)
	}
}

type fakeInsert struct {
	rawInsert
	rows, bytes int64
}

func (f fakeInsert) size() (int64, int64) { return f.rows, f.bytes }

// ClickHouse 18.16 does not know insert_deduplication_token (it would refuse an INSERT with
// it): its batches bear none.
func TestClickHouse1816KnowsNoInsertToken(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ts, err := loadTokenServer(ctx, env.ClickHouse)
	if err != nil {
		t.Fatal(err)
	}
	if ts.known {
		t.Errorf("18.16 knows %s: %+v", dedupTokenSetting, ts)
	}
	var b openBatch
	b.drawNonce(&ts, nil, chunk())
	if b.nonce != "" {
		t.Errorf("a batch on 18.16 bears nonce %q", b.nonce)
	}
}
