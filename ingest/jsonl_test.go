package ingest_test

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/mcpulse/mcpulse/ingest"
)

func TestPublishFileMixed(t *testing.T) {
	_, addr := startKafka(t)
	p := newTestPublisher(t, ingest.PublisherConfig{Brokers: []string{addr}})

	tool := envelope(t, ingest.KindToolCall, map[string]any{"uuid": withUUID(1)}, nil)
	overlong := `{"uuid":"` + strings.Repeat("x", ingest.MaxLineBytes) + `"}`
	lines := []string{
		"\uFEFF" + string(tool),  // 1: valid, after a byte order mark
		"",                       // 2: blank
		`{"uuid": "x", bad json`, // 3: bad JSON
		string(envelope(t, ingest.KindInvitationSent, map[string]any{"uuid": withUUID(4)}, nil)),                 // 4: valid
		string(envelope(t, ingest.KindToolCall, map[string]any{"uuid": nil, "timestamp": "later"}, nil)),         // 5: two problems
		string(envelope(t, ingest.KindToolCall, map[string]any{"uuid": withUUID(6), "properties": "none"}, nil)), // 6: properties not an object
		string(tool), // 7: exact duplicate of line 1
		" \t\r",      // 8: blank (CRLF)
		overlong,     // 9: longer than MaxLineBytes
		string(envelope(t, ingest.KindInvitationResponse, map[string]any{"uuid": withUUID(10)}, map[string]any{"instance_url": "https://eu.posthog.com"})) + "\r", // 10: valid, CRLF
		string(envelope(t, ingest.KindBookingLinkOpened, map[string]any{"uuid": withUUID(11), "distinct_id": "d\u2028x"}, nil)),                                   // 11: valid, no final newline
	}
	input := strings.Join(lines, "\n")

	var progress []ingest.Progress
	st, err := ingest.PublishFile(context.Background(), p, strings.NewReader(input), "mixed.jsonl", func(pr ingest.Progress) { progress = append(progress, pr) })
	if err != nil {
		t.Fatalf("PublishFile: %v", err)
	}
	wantStats := ingest.Stats{Lines: 11, Published: 5, DeadLettered: 4, Blank: 2}
	gotCounts := st
	gotCounts.BadLines = nil
	if !reflect.DeepEqual(gotCounts, wantStats) {
		t.Fatalf("stats %+v, want %+v", gotCounts, wantStats)
	}
	if len(progress) == 0 || progress[len(progress)-1] != (ingest.Progress{Lines: 11, Published: 5, DeadLettered: 4, Blank: 2}) {
		t.Fatalf("progress %+v", progress)
	}
	var badLines []int
	for _, b := range st.BadLines {
		badLines = append(badLines, b.Line)
	}
	if !reflect.DeepEqual(badLines, []int{3, 5, 6, 9}) {
		t.Fatalf("bad lines %v (%+v)", badLines, st.BadLines)
	}
	wantReason := map[int]string{
		3: "bad JSON: ",
		5: "uuid: required; timestamp: not RFC 3339",
		6: "properties: must be a JSON object",
		9: fmt.Sprintf("line is %d bytes, longer than the %d-byte limit", len(overlong), ingest.MaxLineBytes),
	}
	for _, b := range st.BadLines {
		if !strings.HasPrefix(b.Reason, wantReason[b.Line]) {
			t.Errorf("line %d: reason %q, want prefix %q", b.Line, b.Reason, wantReason[b.Line])
		}
		if !b.DeadLettered {
			t.Errorf("line %d: reported as not dead-lettered", b.Line)
		}
	}

	// Dead letters: keyed and identified by publish:<name>:<line>, reason "line N: ...".
	dlq := map[string]string{}
	for _, m := range readTopic(t, addr, ingest.TopicDeadLetters) {
		id, _ := header(m, ingest.HeaderDeadLetterID)
		reason, _ := header(m, ingest.HeaderError)
		src, _ := header(m, ingest.HeaderSourceTopic)
		if string(m.Key) != id || src != ingest.SourcePublish {
			t.Errorf("dead letter key %q id %q source %q", m.Key, id, src)
		}
		dlq[id] = reason
		var line int
		if _, err := fmt.Sscanf(id, "publish:mixed.jsonl:%d", &line); err != nil {
			t.Fatalf("dead letter id %q", id)
		}
		if !strings.HasPrefix(reason, fmt.Sprintf("line %d: %s", line, wantReason[line])) {
			t.Errorf("dead letter %s: reason %q", id, reason)
		}
		switch line {
		case 9:
			if len(m.Value) != ingest.MaxDeadLetterPayloadBytes || !bytes.HasPrefix([]byte(overlong), m.Value) {
				t.Errorf("overlong line payload: %d bytes", len(m.Value))
			}
		default:
			if string(m.Value) != lines[line-1] {
				t.Errorf("line %d payload %q, want %q", line, m.Value, lines[line-1])
			}
			if want := ingest.DeadLetterIDForLine("mixed.jsonl", line, []byte(lines[line-1])); id != want {
				t.Errorf("line %d: dead letter id %q, want %q", line, id, want)
			}
		}
	}
	if len(dlq) != 4 {
		t.Fatalf("dead letters %v", dlq)
	}

	// The valid neighbours are published (the duplicate too: consumers deduplicate).
	var uuids []string
	for _, topic := range []string{ingest.TopicToolCalls, ingest.TopicRecruitment} {
		for _, m := range readTopic(t, addr, topic) {
			uuids = append(uuids, mustParse(t, m.Value).UUID.String())
		}
	}
	count := map[string]int{}
	for _, u := range uuids {
		count[u]++
	}
	want := map[string]int{withUUID(1): 2, withUUID(4): 1, withUUID(10): 1, withUUID(11): 1}
	if !reflect.DeepEqual(count, want) {
		t.Fatalf("published uuids %v, want %v", count, want)
	}
}

// TestPublishFileBatches crosses several PublishFile batches and checks the counts add up.
func TestPublishFileBatches(t *testing.T) {
	_, addr := startKafka(t)
	p := newTestPublisher(t, ingest.PublisherConfig{Brokers: []string{addr}})
	const n = 2*ingest.PublishFileBatch + 123
	var buf bytes.Buffer
	bad := 0
	for i := 1; i <= n; i++ {
		if i%500 == 0 {
			buf.WriteString("{\"event\":\"broken\"\n")
			bad++
			continue
		}
		buf.Write(envelope(t, ingest.KindToolCall, map[string]any{"uuid": withUUID(i), "distinct_id": fmt.Sprintf("user-%d", i%37)}, nil))
		buf.WriteByte('\n')
	}
	calls := 0
	st, err := ingest.PublishFile(context.Background(), p, &buf, "batches.jsonl", func(ingest.Progress) { calls++ })
	if err != nil {
		t.Fatal(err)
	}
	if st.Lines != n || st.Published != n-bad || st.DeadLettered != bad || st.Blank != 0 || len(st.BadLines) != ingest.MaxReportedBadLines {
		t.Fatalf("stats %+v (bad %d)", st, bad)
	}
	if st.BadLines[0].Line != 500 || st.BadLines[19].Line != 10000 {
		t.Fatalf("bad lines %+v", st.BadLines)
	}
	if calls < 3 {
		t.Fatalf("progress called %d times", calls)
	}
	if got := len(readTopic(t, addr, ingest.TopicToolCalls)); got != n-bad {
		t.Fatalf("%d tool calls in Kafka, want %d", got, n-bad)
	}
}

// With Kafka down, the stats account for every line read: the valid events as not published
// and the bad lines as refused but NOT dead-lettered (their dead letters were never written).
func TestPublishFileFailsWhenKafkaIsDown(t *testing.T) {
	c, addr := startKafka(t)
	p := newTestPublisher(t, ingest.PublisherConfig{Brokers: []string{addr}, MaxAttempts: 2})
	c.Close()
	in := string(envelope(t, ingest.KindToolCall, nil, nil)) + "\n" + "{not json\n\n"
	st, err := ingest.PublishFile(context.Background(), p, strings.NewReader(in), "down.jsonl", nil)
	if err == nil || !strings.Contains(err.Error(), "publishing failed: 1 event(s) not acknowledged by Kafka (lines 1)") {
		t.Fatalf("PublishFile with Kafka down: %+v, %v", st, err)
	}
	want := ingest.Stats{Lines: 3, Blank: 1, NotPublished: 1, NotDeadLettered: 1}
	if st.Published != 0 || st.DeadLettered != 0 || st.Lines != want.Lines || st.Blank != want.Blank ||
		st.NotPublished != want.NotPublished || st.NotDeadLettered != want.NotDeadLettered {
		t.Fatalf("stats %+v, want %+v", st, want)
	}
	if len(st.BadLines) != 1 || st.BadLines[0].Line != 2 || st.BadLines[0].DeadLettered {
		t.Fatalf("bad lines %+v: want line 2, not dead-lettered", st.BadLines)
	}
	if got := st.Published + st.DeadLettered + st.Blank + st.NotPublished + st.NotDeadLettered; got != st.Lines {
		t.Errorf("stats account for %d of %d lines", got, st.Lines)
	}
}

// A line that parses but cannot be encoded again (encoding/json stops at 10,000 levels of
// nesting) is dead-lettered as not published, not as refused by Kafka, which never saw it; its
// neighbour is published.
func TestPublishFileNamesALocalEncodingFailure(t *testing.T) {
	_, addr := startKafka(t)
	p := newTestPublisher(t, ingest.PublisherConfig{Brokers: []string{addr}})
	deep := strings.Repeat("[", 10001) + strings.Repeat("]", 10001)
	tool := string(envelope(t, ingest.KindToolCall, map[string]any{"uuid": withUUID(1)}, nil))
	deepLine := strings.Replace(string(envelope(t, ingest.KindToolCall, map[string]any{"uuid": withUUID(2)}, map[string]any{"nested": "X"})), `"X"`, deep, 1)
	st, err := ingest.PublishFile(context.Background(), p, strings.NewReader(tool+"\n"+deepLine+"\n"), "deep.jsonl", nil)
	if err != nil {
		t.Fatalf("PublishFile: %v", err)
	}
	if st.Published != 1 || st.DeadLettered != 1 || len(st.BadLines) != 1 || st.BadLines[0].Line != 2 {
		t.Fatalf("stats %+v, want line 1 published and line 2 dead-lettered", st)
	}
	if r := st.BadLines[0].Reason; !strings.HasPrefix(r, "could not be published: ") || !strings.Contains(r, "not encodable as JSON") {
		t.Errorf("reason %q, want a local encoding failure", r)
	}
}

// Two inputs of one name (two runs reading standard input) give their bad lines different
// dead-letter IDs unless the lines are the same, so one run's dead letter never replaces the
// other's; the same line of the same input keeps its ID.
func TestDeadLetterIDForLineTellsInputsOfOneNameApart(t *testing.T) {
	a := ingest.DeadLetterIDForLine("stdin", 1, []byte(`{"event":"a"}`))
	b := ingest.DeadLetterIDForLine("stdin", 1, []byte(`{"event":"b"}`))
	if a == b {
		t.Fatalf("two different first lines of stdin share the dead-letter id %q", a)
	}
	if again := ingest.DeadLetterIDForLine("stdin", 1, []byte(`{"event":"a"}`)); again != a {
		t.Errorf("the same line got id %q, then %q", a, again)
	}
	if !strings.HasPrefix(a, "publish:stdin:1:") {
		t.Errorf("id %q does not name the input and the line", a)
	}
}
