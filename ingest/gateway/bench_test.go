package gateway_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
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
