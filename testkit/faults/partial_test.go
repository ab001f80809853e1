//go:build linux

package faults

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// faultExitStatus is consumers.FaultExitStatus (faultinject build only): the status of a member
// the fault hook stopped right after an insert.
const faultExitStatus = 86

// A consumer that dies between two ClickHouse inserts of one batch — the raw rows stored, the
// rollups' write markers and rows in part, nothing committed — at 12 points of a run, and is
// replaced each time by a member with another batch size, so each replay cuts the log into
// other batches than the attempt it repeats, loses and doubles nothing: every figure equals
// the corpus's expected outcome, and every rollup its recomputation from the raw tables.
//
// Each member exits through the consumer's fault hook (MCPULSE_FAULT_EXIT_AFTER_INSERTS=N:
// exit right after the N-th successful batch insert, N drawn from a seeded generator), so the
// crash lands between inserts however fast the machine is.
func TestConsumerDyingBetweenTheInsertsOfABatchLosesAndDoublesNothing(t *testing.T) {
	const rounds = 12
	p := newPipeline(t, 100000, 11, rounds+1)
	rng := rand.New(rand.NewPCG(11, 12))
	batchSizes := []int{700, 2000, 5000, 20000}
	for i := range rounds {
		p.publishNext()
		inserts := 2 + rng.IntN(8) // within its first batches: a part of the corpus is a few of them
		size := batchSizes[rng.IntN(len(batchSizes))]
		p.crashAt(i+1, "MCPULSE_FAULT_EXIT_AFTER_INSERTS", "insert", inserts, "--batch-size", strconv.Itoa(size))
	}
	p.publishNext()
	p.start()
	p.drain()
	counts := p.verify()
	if counts["rollups: reset cells of a batch stored but not committed"] == 0 {
		t.Error("no member reset the cells of a batch stored in part: the test proved nothing about it")
	}
}

// A consumer that dies while a streamed batch's INSERTs are open — some chunks' blocks sent,
// none of the INSERTs ended, nothing of the batch committed; ClickHouse may still store the
// blocks it received — at 8 points of a run, each member with small chunks (--batch-bytes
// 64 KiB: about 90 events) and its own batch size, loses and doubles nothing: every figure
// equals the corpus's expected outcome, and every rollup its recomputation from the raw
// tables. Each member exits through the consumer's fault hook
// (MCPULSE_FAULT_EXIT_AFTER_FLUSHES=N: right after the N-th block sent into an open INSERT).
func TestConsumerDyingWhileAStreamedBatchIsOpenLosesAndDoublesNothing(t *testing.T) {
	const rounds = 8
	p := newPipeline(t, 60000, 13, rounds+1)
	rng := rand.New(rand.NewPCG(13, 14))
	batchSizes := []int{2000, 5000, 20000}
	for i := range rounds {
		p.publishNext()
		flushes := 3 + rng.IntN(30)
		size := batchSizes[rng.IntN(len(batchSizes))]
		p.crashAt(i+1, "MCPULSE_FAULT_EXIT_AFTER_FLUSHES", "block", flushes, "--batch-size", strconv.Itoa(size), "--batch-bytes", "65536")
	}
	p.publishNext()
	p.start()
	p.drain()
	p.verify()
}

// crashAt runs round's member with args until the fault hook stops it right after its n-th
// event of the kind what names (hook: the hook's environment variable), and fails the test
// unless it ended that way.
func (p *pipeline) crashAt(round int, hook, what string, n int, args ...string) {
	p.t.Helper()
	m := p.startWith(args, []string{fmt.Sprintf("%s=%d", hook, n)})
	m.stopping = true // it is meant to exit
	select {
	case <-m.done:
	case <-time.After(stepTimeout):
		p.t.Fatalf("%s did not reach its %s %d within %s%s", m.name, what, n, stepTimeout, p.logTails())
	}
	var exit *exec.ExitError
	if !errors.As(m.waitErr, &exit) || exit.ExitCode() != faultExitStatus {
		p.t.Fatalf("%s (%s) ended with %v, want the fault hook's exit status %d%s", m.name, strings.Join(args, " "), m.waitErr, faultExitStatus, p.logTails())
	}
	rows, _ := p.rows()
	p.t.Logf("round %2d: %s (%s) exited right after its %s %2d; %d raw rows stored", round, m.name, strings.Join(args, " "), what, n, rows)
}
