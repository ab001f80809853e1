//go:build linux

package faults

import (
	"math/rand/v2"
	"testing"
	"time"
)

// A consumer SIGKILLed at 20 points of a 200,000-event run and restarted each time loses and
// doubles nothing. Each kill comes once the stored rows pass a threshold drawn from a seeded
// generator inside the part of the corpus being consumed, and once the current process has
// stored something itself, so it lands mid-batch: between dedup claims and inserts, between
// the inserts of one batch, or between the inserts and the offset commit. After each kill the
// closed hours are sealed, as the scheduler's seal job would while the consumer is down, so
// the next member's batches (replays included) land in sealed hours.
func TestSIGKILLedConsumerRestartedTwentyTimesLosesAndDoublesNothing(t *testing.T) {
	const kills = 20
	p := newPipeline(t, 200000, 7, kills+1)
	rng := rand.New(rand.NewPCG(7, 20))
	for i := range kills {
		began := time.Now()
		p.publishNext()
		published := time.Now()
		m := p.start()
		startRows := p.waitRows("the count before "+m.name+" stores", func(int64) bool { return true })
		first := p.waitRows(m.name+" storing", func(n int64) bool { return n > startRows })
		stored := time.Now()
		at := p.threshold(rng, i)
		n := p.waitRows(m.name+" storing past its kill threshold", func(n int64) bool { return n >= at })
		p.kill(m)
		sealed := p.seal()
		t.Logf("kill %2d: %s SIGKILLed at %d stored rows (threshold %d; first store %d after %s; publishing took %s, then %s); %d hours sealed", i+1, m.name, n, at,
			first, stored.Sub(published).Round(time.Millisecond), published.Sub(began).Round(time.Millisecond), time.Since(stored).Round(time.Millisecond), sealed)
	}
	p.publishNext()
	p.start()
	p.drain()
	p.verify()
}
