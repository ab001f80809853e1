//go:build linux

package faults

import (
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/internal/shutdown"
)

// SIGTERM while ClickHouse hangs (its process stopped with its connections open, so a write
// neither fails nor returns): the member exits within shutdown.Deadline of the signal, having
// committed no offset of a batch ClickHouse did not store; once ClickHouse runs again a new
// member consumes the rest, and every figure equals the corpus's (nothing lost or doubled).
func TestSIGTERMWhileClickHouseHangsExitsWithin10sAndLosesNothing(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, 20000, 23, 2)
	rng := rand.New(rand.NewPCG(23, 1))
	p.publishNext()
	m := p.start()
	at := p.threshold(rng, 0)
	n := p.waitRows("the freeze threshold", func(n int64) bool { return n >= at })
	if err := p.stack.FreezeClickHouse(); err != nil {
		t.Fatal(err)
	}
	thawed := false
	t.Cleanup(func() {
		if !thawed {
			_ = p.stack.ThawClickHouse()
		}
	})
	t.Logf("clickhouse frozen at %d stored rows (threshold %d)", n, at)
	p.publishNext()             // a backlog: the member is mid-batch when the signal comes
	time.Sleep(2 * time.Second) // the fault's length before the signal, not a synchronization
	m.stopping = true
	signalled := time.Now()
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.done
		t.Fatalf("%s ignored SIGTERM for 30 s while ClickHouse hung%s", m.name, p.logTails())
	}
	took := time.Since(signalled)
	t.Logf("%s exited %s after SIGTERM (%v)", m.name, took.Round(time.Millisecond), m.waitErr)
	if took > shutdown.Deadline+time.Second { // the second: the process's own start of the watch
		t.Errorf("%s took %s to exit after SIGTERM, want within %s", m.name, took, shutdown.Deadline)
	}
	if err := p.stack.ThawClickHouse(); err != nil {
		t.Fatal(err)
	}
	thawed = true
	p.start()
	p.drain()
	p.verify()
}
