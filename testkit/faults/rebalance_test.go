//go:build linux

package faults

import (
	"math/rand/v2"
	"testing"
)

// Three consumer processes share the group while members join and leave mid-run: a member
// leaving cleanly (SIGTERM: LeaveGroup, its batch uncommitted) and one vanishing (SIGKILL:
// its partitions move after the session timeout), each replaced, with up to three members at
// once. Every change comes once the stored rows pass a seeded threshold inside the part being
// consumed, and each forces a rebalance that hands uncommitted batches to other members.
// Nothing is lost or doubled.
func TestMembersJoiningAndLeavingMidRunLoseAndDoubleNothing(t *testing.T) {
	p := newPipeline(t, 60000, 19, 7)
	rng := rand.New(rand.NewPCG(19, 1))
	step := func(i int, what string) {
		t.Helper()
		at := p.threshold(rng, i)
		n := p.waitRows(what, func(n int64) bool { return n >= at })
		t.Logf("%s at %d stored rows (threshold %d)", what, n, at)
	}

	p.publishNext()
	a := p.start()
	step(0, "member-02 joins")
	p.publishNext()
	b := p.start()
	step(1, "member-03 joins")
	p.publishNext()
	c := p.start()
	step(2, "member-01 leaves (SIGTERM)")
	p.publishNext()
	p.stop(a)
	step(3, "member-04 joins")
	p.publishNext()
	p.start()
	step(4, "member-02 dies (SIGKILL)")
	p.publishNext()
	p.kill(b)
	step(5, "member-03 leaves (SIGTERM) and member-05 joins")
	p.publishNext()
	p.stop(c)
	p.start()
	p.drain()
	p.verify()
}
