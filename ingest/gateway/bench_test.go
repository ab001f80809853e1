package gateway_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkBatch50 posts batches of 50 tool calls over loopback to the gateway (kfake Kafka,
// acks awaited) and, in the same run, to a bare handler that only reads and discards the same
// bodies. It reports events/s and p50/p99 latency of both and the gateway/bare throughput ratio.
//
//	go test -run '^$' -bench Batch50 -benchtime 200x ./ingest/gateway/
func BenchmarkBatch50(b *testing.B) {
	f := newFixture(b, nil)
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"status":"ok"}`))
	}))
	defer bare.Close()
	bodies := make([][]byte, b.N)
	for i := range bodies {
		events := make([]map[string]any, 50)
		for j := range events {
			events[j] = toolCall(i*50 + j)
		}
		bodies[i] = batchBody(b, "", events...)
	}
	run := func(url string) (eventsPerSec float64, p50, p99 time.Duration) {
		lat := make([]time.Duration, len(bodies))
		start := time.Now()
		for i, body := range bodies {
			t0 := time.Now()
			res, err := http.Post(url, "application/json", bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				b.Fatalf("%s: %d", url, res.StatusCode)
			}
			lat[i] = time.Since(t0)
		}
		total := time.Since(start)
		slices.Sort(lat)
		return float64(len(bodies)*50) / total.Seconds(), lat[len(lat)*50/100], lat[min(len(lat)-1, len(lat)*99/100)]
	}
	b.ResetTimer()
	gwRate, gwP50, gwP99 := run(f.srv.URL + "/batch/")
	b.StopTimer()
	bareRate, bareP50, bareP99 := run(bare.URL + "/batch/")
	b.ReportMetric(gwRate, "events/s")
	b.ReportMetric(float64(gwP50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(gwP99.Microseconds()), "p99-µs")
	b.ReportMetric(bareRate, "bare-events/s")
	b.ReportMetric(gwRate/bareRate, "ratio")
	b.Logf("gateway %.0f events/s p50 %s p99 %s; bare %.0f events/s p50 %s p99 %s; ratio %.3f",
		gwRate, gwP50, gwP99, bareRate, bareP50, bareP99, gwRate/bareRate)
}

// BenchmarkWrongKey posts, through the handler (no network), gzipped bodies that inflate to
// about 10 MB with one unknown API key, where SDKs put keys: first in the body (posthog-node,
// posthog-go), last in the body (posthog-python), and in the properties of the last event only
// (posthog-js; every other event has a known key, the worst case), and reports the CPU spent
// per 401.
//
//	go test -run '^$' -bench WrongKey -benchtime 20x ./ingest/gateway/
func BenchmarkWrongKey(b *testing.B) {
	f := newFixture(b, nil)
	const n = 8000
	events := func(token func(i int) string) []byte {
		batch := make([]map[string]any, n)
		for i := range batch {
			ev := toolCall(i)
			ev["properties"].(map[string]any)["payload"] = strings.Repeat("x", 1000)
			if tok := token(i); tok != "" {
				ev["properties"].(map[string]any)["token"] = tok
			}
			batch[i] = ev
		}
		data, _ := json.Marshal(batch)
		return data
	}
	plain := events(func(int) string { return "" })
	shapes := map[string][]byte{
		"key_first": append(append([]byte(`{"api_key":"phc_wrong","batch":`), plain...), '}'),
		"key_last":  append(append([]byte(`{"batch":`), plain...), []byte(`,"api_key":"phc_wrong"}`)...),
		"last_event_token": events(func(i int) string {
			if i == n-1 {
				return "phc_wrong"
			}
			return testKey
		}),
	}
	for _, name := range []string{"key_first", "key_last", "last_event_token"} {
		body := gzipBytes(b, shapes[name])
		b.Run(name, func(b *testing.B) {
			b.ReportMetric(float64(len(shapes[name]))/1e6, "inflated-MB")
			cpu0 := cpuTime()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "/batch/", bytes.NewReader(body))
				req.Header.Set("Content-Encoding", "gzip")
				rec := httptest.NewRecorder()
				f.gw.Handler().ServeHTTP(rec, req)
				if rec.Code != http.StatusUnauthorized {
					b.Fatalf("%d %s", rec.Code, rec.Body)
				}
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// cpuTime is the process's user + system CPU time so far (the benchmark's CPU cost, unlike wall
// time, does not depend on what else the machine runs).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
