//go:build linux

package faults

import (
	"math/rand/v2"
	"testing"
	"time"
)

// Log messages the outage tests look for (consumers/consumer.go).
const (
	msgStoreFailed    = "storing a batch failed; consumption paused, retrying"
	msgStoreRecovered = "store recovered; consumption resumes"
)

// Redis stopped for 30 s mid-run (a real stop: the process exits, and starts again on the
// same port from its append-only file) pauses consumption, loses nothing, and consumption
// resumes within 10 s of Redis answering again.
func TestRedisStoppedFor30sMidRunLosesNothingAndConsumptionResumesWithin10s(t *testing.T) {
	t.Parallel()
	testStoreOutage(t, 11, "redis",
		func(p *pipeline) error { return p.stack.StopRedis() },
		func(p *pipeline) error { return p.stack.StartRedis(p.ctx) })
}

// ClickHouse stopped for 30 s mid-run, then started on the same ports and data directory:
// same guarantees as for Redis.
func TestClickHouseStoppedFor30sMidRunLosesNothingAndConsumptionResumesWithin10s(t *testing.T) {
	t.Parallel()
	testStoreOutage(t, 13, "clickhouse",
		func(p *pipeline) error { return p.stack.StopClickHouse() },
		func(p *pipeline) error {
			if err := p.stack.StartClickHouse(p.ctx); err != nil {
				return err
			}
			p.openClickHouse() // the test's pool holds connections to the old process
			return nil
		})
}

// testStoreOutage runs a 40,000-event corpus through one member and stops a store once the
// stored rows pass a seeded threshold inside the first half; the second half is published
// during the outage, so the member has a backlog when the store returns.
func testStoreOutage(t *testing.T, seed uint64, store string, stop, start func(*pipeline) error) {
	p := newPipeline(t, 40000, int64(seed), 2)
	rng := rand.New(rand.NewPCG(seed, 1))
	p.publishNext()
	p.start()
	at := p.threshold(rng, 0)
	n := p.waitRows("the outage threshold", func(n int64) bool { return n >= at })
	stoppedAt := time.Now()
	if err := stop(p); err != nil {
		t.Fatalf("stopping %s: %v", store, err)
	}
	t.Logf("%s stopped at %d stored rows (threshold %d)", store, n, at)
	p.publishNext()
	time.Sleep(time.Until(stoppedAt.Add(outage))) // the fault's length, not a synchronization
	if err := start(p); err != nil {
		t.Fatalf("starting %s: %v", store, err)
	}
	back := time.Now()
	took := p.resumed(back)
	t.Logf("%s down for %s; consumption resumed %s after it was back", store, back.Sub(stoppedAt).Round(time.Millisecond), took.Round(time.Millisecond))
	if took > resumeLimit {
		t.Errorf("consumption resumed %s after %s returned, want within %s", took, store, resumeLimit)
	}
	p.drain()
	logs := p.verify()
	for _, rec := range p.records(msgStoreFailed, msgStoreRecovered) {
		t.Logf("%s", rec)
	}
	if logs[msgStoreFailed] == 0 || logs[msgStoreRecovered] == 0 {
		t.Errorf("the member logged %q %d times and %q %d times; the outage must show in both",
			msgStoreFailed, logs[msgStoreFailed], msgStoreRecovered, logs[msgStoreRecovered])
	}
}

// The Kafka broker restarted mid-run (closed, down for 5 s, started on the same port from its
// data directory) while two members consume: nothing is lost or doubled, consumption resumes
// within 10 s of the broker's return, and every partition's committed offset reaches its end
// with no traffic after the last two corpus parts, published right after the restart.
//
// That last point failed in about 1 run of 4 while the consumer used kafka-go's group-mode
// Reader: a member's commit that failed at the restart was queued across the rebalance and sent
// with the next generation, after the partition's new owner had committed further, so the
// group's offset for that partition went back by thousands of stored messages and stayed there
// until new traffic reached it. Commits now carry the generation their batch was fetched in
// (consumers/group.go); with no last publish, this test catches such a stall.
func TestKafkaBrokerRestartedMidRunLosesNothingAndConsumptionResumesWithin10s(t *testing.T) {
	p := newPipeline(t, 40000, 17, 4)
	rng := rand.New(rand.NewPCG(17, 1))
	p.publishNext()
	p.publishNext()
	p.start()
	p.start()
	at := p.threshold(rng, 0)
	n := p.waitRows("the restart threshold", func(n int64) bool { return n >= at })
	if err := p.stack.RestartKafka(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	t.Logf("broker restarted at %d stored rows (threshold %d)", n, at)
	p.publishNext() // a backlog for the members, however fast they were
	took := p.resumed(back)
	t.Logf("consumption resumed %s after the broker was back", took.Round(time.Millisecond))
	if took > resumeLimit {
		t.Errorf("consumption resumed %s after the broker returned, want within %s", took, resumeLimit)
	}
	p.publishNext() // the last traffic: from here on, only committing can bring the lag to zero
	p.drain()
	p.verify()
}
