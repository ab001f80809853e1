package gateway_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/ingest/gateway"
)

// A small request of many bad events gets a bounded answer; too many events is 413.
func TestManyBadEventsGetABoundedAnswerAndTooManyEventsAre413(t *testing.T) {
	f := newFixture(t, func(c *gateway.Config) { c.MaxEvents = 500 })
	var events []map[string]any
	for i := 0; i < 300; i++ {
		bad := toolCall(i + 1)
		bad["uuid"] = "bad"
		events = append(events, bad)
	}
	res, r := f.post("/batch/", batchBody(t, "", events...))
	if res.StatusCode != http.StatusBadRequest || len(r.Errors) != gateway.MaxReportedErrors || r.ErrorsOmitted != 300-gateway.MaxReportedErrors {
		t.Errorf("%d, %d errors listed, %d omitted; want 400 with %d listed and the rest counted", res.StatusCode, len(r.Errors), r.ErrorsOmitted, gateway.MaxReportedErrors)
	}
	for i := 0; i < 201; i++ {
		events = append(events, toolCall(1000+i))
	}
	res, r = f.post("/batch/", batchBody(t, "", events...))
	if res.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(r.Error, "at most 500") {
		t.Errorf("%d %+v, want 413 naming the limit", res.StatusCode, r)
	}
	if n := len(f.messages(ingest.TopicToolCalls)); n != 0 {
		t.Errorf("%d events published from refused requests, want 0", n)
	}
}

// An event Kafka refuses for its size is that event's 400, not a 503 to retry forever; its
// neighbours are stored and counted as accepted.
func TestAnEventTooLargeForKafkaIsItsOwnErrorNotA503(t *testing.T) {
	f := newFixture(t, func(c *gateway.Config) { c.MaxBodyBytes = 8 << 20; c.MaxDecompressedBytes = 8 << 20 })
	big := toolCall(2)
	big["properties"].(map[string]any)["blob"] = strings.Repeat("x", 2<<20)
	res, r := f.post("/batch/", batchBody(t, "", toolCall(1), big, toolCall(3)))
	if res.StatusCode != http.StatusBadRequest || r.Accepted != 2 || len(r.Errors) != 1 || r.Errors[0].Index != 1 {
		t.Fatalf("%d %+v, want 400 with 2 accepted and index 1 refused", res.StatusCode, r)
	}
	if n := len(f.messages(ingest.TopicToolCalls)); n != 2 {
		t.Errorf("%d tool calls published, want 2", n)
	}
}

// A sent_at implausibly far from now is ignored instead of shifting valid timestamps.
func TestImplausibleSentAtIsIgnored(t *testing.T) {
	f := newFixture(t, nil)
	ev := toolCall(1)
	ev["timestamp"] = time.Now().UTC().Add(-time.Hour).Format(time.RFC3339)
	res, r := f.post("/batch/", batchBody(t, "0001-01-01T00:00:00Z", ev))
	if res.StatusCode != http.StatusOK || r.Accepted != 1 {
		t.Fatalf("%d %+v, want the event accepted unshifted", res.StatusCode, r)
	}
	msgs := f.messages(ingest.TopicToolCalls)
	if len(msgs) != 1 {
		t.Fatalf("%d messages", len(msgs))
	}
	if got := envelopeOf(t, msgs[0]).Timestamp; !strings.HasPrefix(got, ev["timestamp"].(string)[:13]) {
		t.Errorf("timestamp %s, want %s unshifted", got, ev["timestamp"])
	}

}

// A shutdown shorter than the Kafka wait would cut off a request's answer: refused up front.
func TestShutdownTimeoutMustExceedKafkaTimeout(t *testing.T) {
	_, err := gateway.New(gateway.Config{APIKeys: []string{"k"}, Brokers: []string{"127.0.0.1:9092"},
		KafkaTimeout: 20 * time.Second, ShutdownTimeout: 5 * time.Second}, &ingest.Publisher{})
	if err == nil || !strings.Contains(err.Error(), "ShutdownTimeout") {
		t.Fatalf("error %v, want ShutdownTimeout refused", err)
	}
}

// A 100 KB bad value is quoted in the answer by a short escaped prefix and its length, never
// whole, and the answer still names what is wrong; the valid neighbour is stored.
func TestGatewayQuotesBadValuesShort(t *testing.T) {
	f := newFixture(t, nil)
	long := "\u202e" + strings.Repeat("9", 100*1024)
	prefix := `"\u202e` + strings.Repeat("9", 63) + `"… (102403 bytes)`
	for _, field := range []string{"timestamp", "uuid"} {
		ev := toolCall(2)
		ev[field] = long
		res, r := f.post("/batch/", batchBody(t, "", toolCall(1), ev))
		if res.StatusCode != http.StatusBadRequest || r.Accepted != 1 || len(r.Errors) != 1 || len(r.Errors[0].Problems) != 1 {
			t.Fatalf("%s: %d %.300v, want 400 with 1 accepted and one problem", field, res.StatusCode, r)
		}
		p := r.Errors[0].Problems[0]
		if p.Path != field || !strings.Contains(p.Problem, prefix) || len(p.Problem) >= 512 {
			t.Errorf("%s: problem %q at %q (%d bytes), want one under 512 bytes quoting %s", field, p.Problem, p.Path, len(p.Problem), prefix)
		}
	}
	for _, c := range []struct{ path, header, want string }{
		{"/batch/?compression=" + url.QueryEscape(long), "", "unsupported compression " + prefix},
		{"/batch/", long, "unsupported Content-Encoding " + prefix},
	} {
		var headers []string
		if c.header != "" {
			headers = []string{"Content-Encoding", c.header}
		}
		res, r := f.post(c.path, batchBody(t, "", toolCall(3)), headers...)
		if res.StatusCode != http.StatusUnsupportedMediaType || !strings.Contains(r.Error, c.want) || len(r.Error) >= 512 {
			t.Errorf("%.40s: %d %q, want 415 under 512 bytes containing %q", c.path, res.StatusCode, r.Error, c.want)
		}
	}
	if n := len(f.messages(ingest.TopicToolCalls)); n != 2 {
		t.Errorf("%d tool calls published, want the 2 valid ones", n)
	}
}
