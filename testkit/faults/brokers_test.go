//go:build linux

package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/mcpulse/mcpulse/consumers"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/stack"
)

// clusterBrokers is the broker count of the multi-broker runs: the embedded Kafka then gives
// every topic replication factor 3, as docker-compose.yml's three brokers do.
const clusterBrokers = 3

// On a Kafka of three brokers with replication factor 3, a group of three consumer processes
// loses and doubles nothing while the cluster changes under it: the partitions' leaders are
// laid out anew over the brokers (most of them move), the broker coordinating the group goes
// away (its listener and every connection to it closed) while a fourth member joins and a
// part of the corpus is published without it, it comes back on its port and leads partitions
// again while the first member leaves, and the leaders are laid out anew once more as a member
// is SIGKILLed. Each change comes once the stored rows pass a seeded threshold inside the part
// being consumed; each membership change forces a rebalance, and the test waits for the group
// to be stable in a later generation with every member holding partitions. Leaders are
// placed by a fixed rule (placeLeaders), not kfake's random elections.
func TestLeadersMovingAndABrokerLostAndBackWhileThreeMembersRebalanceLoseAndDoubleNothing(t *testing.T) {
	p := newPipeline(t, 30000, 23, 5, func(c *stack.Config) { c.Brokers = clusterBrokers })
	cluster := p.stack.KafkaCluster()
	p.requireReplicas(clusterBrokers)
	rng := rand.New(rand.NewPCG(23, 1))
	step := func(i int, what string) {
		t.Helper()
		at := p.threshold(rng, i)
		n := p.waitRows(what, func(n int64) bool { return n >= at })
		t.Logf("%s at %d stored rows (threshold %d)", what, n, at)
	}
	nodes := []int32{0, 1, 2}

	p.publishNext()
	a, b := p.start(), p.start()
	p.start()
	gen := p.waitGroup(3)
	step(0, "the leaders move")
	p.placeLeaders(nodes, 1)

	p.publishNext()
	step(1, "the group's coordinator stops and member-04 joins")
	lost := cluster.CoordinatorFor(consumers.DefaultGroupID)
	if err := p.stack.StopKafkaBroker(lost); err != nil {
		t.Fatal(err)
	}
	live := slices.DeleteFunc(slices.Clone(nodes), func(n int32) bool { return n == lost })
	p.placeLeaders(live, 0)
	p.start()
	coordinator := cluster.CoordinatorFor(consumers.DefaultGroupID)
	if coordinator == lost || p.ledBy(lost) != 0 {
		t.Fatalf("with broker %d stopped, the group's coordinator is broker %d and it leads %d partitions", lost, coordinator, p.ledBy(lost))
	}
	t.Logf("broker %d (%s) stopped; the group's coordinator is now broker %d", lost, p.stack.KafkaBrokers[lost], coordinator)
	p.publishNext() // published with a broker down
	gen = p.waitGroupAfter(gen, 4)

	step(2, "the lost broker returns and leads again, and member-01 leaves (SIGTERM)")
	if err := p.stack.StartKafkaBroker(lost); err != nil {
		t.Fatal(err)
	}
	p.placeLeaders(nodes, 2)
	if led := p.ledBy(lost); led == 0 {
		t.Fatalf("broker %d leads no partition after its return", lost)
	}
	p.stop(a)
	p.publishNext()
	gen = p.waitGroupAfter(gen, 3)

	step(3, "member-02 dies (SIGKILL) and the leaders move again")
	p.kill(b)
	p.placeLeaders(nodes, 0)
	p.publishNext()
	p.waitGroupAfter(gen, 2) // after the session timeout

	p.drain()
	p.verify()
}

// requireReplicas fails the test unless every partition of every topic reports want replicas,
// all in sync, through kafka-go's metadata request, and the cluster lists want brokers.
func (p *pipeline) requireReplicas(want int) {
	p.t.Helper()
	transport := &kafka.Transport{} // kafka-go's default transport caches metadata
	defer transport.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(p.stack.KafkaBrokers...), Timeout: 10 * time.Second, Transport: transport}
	meta, err := client.Metadata(p.ctx, &kafka.MetadataRequest{Topics: ingest.AllTopics})
	if err != nil {
		p.t.Fatal(err)
	}
	if len(meta.Brokers) != want {
		p.t.Fatalf("the cluster lists %d brokers, want %d", len(meta.Brokers), want)
	}
	for _, topic := range meta.Topics {
		for _, pt := range topic.Partitions {
			if len(pt.Replicas) != want || len(pt.Isr) != want {
				p.t.Fatalf("%s/%d has %d replicas, %d in sync; want %d", topic.Name, pt.ID, len(pt.Replicas), len(pt.Isr), want)
			}
		}
	}
}

// placeLeaders moves the leader of partition i of the j-th topic (ingest.AllTopics) to
// nodes[(i+j+shift) % len(nodes)], a layout that spreads every topic over the nodes and
// differs for every shift modulo len(nodes). It logs how many leaders moved.
func (p *pipeline) placeLeaders(nodes []int32, shift int) {
	p.t.Helper()
	cluster := p.stack.KafkaCluster()
	moved := 0
	var layout []string
	for j, topic := range ingest.AllTopics {
		var leaders []string
		for i, info := range cluster.PartitionInfos(topic) {
			to := nodes[(i+j+shift)%len(nodes)]
			if cluster.LeaderFor(topic, info.Partition) != to {
				moved++
			}
			if err := cluster.MoveTopicPartition(topic, info.Partition, to); err != nil {
				p.t.Fatalf("moving %s/%d to broker %d: %v", topic, info.Partition, to, err)
			}
			if got := cluster.LeaderFor(topic, info.Partition); got != to {
				p.t.Fatalf("%s/%d is led by broker %d after the move to %d", topic, info.Partition, got, to)
			}
			leaders = append(leaders, fmt.Sprint(to))
		}
		layout = append(layout, topic+"="+strings.Join(leaders, ","))
	}
	p.t.Logf("leaders placed on brokers %v (%d moved): %s", nodes, moved, strings.Join(layout, " "))
}

// ledBy returns how many partitions broker node leads.
func (p *pipeline) ledBy(node int32) int {
	cluster := p.stack.KafkaCluster()
	n := 0
	for _, topic := range ingest.AllTopics {
		for _, info := range cluster.PartitionInfos(topic) {
			if cluster.LeaderFor(topic, info.Partition) == node {
				n++
			}
		}
	}
	return n
}

// waitGroup waits until the consumer group is stable with members members, each assigned a
// partition, and returns its generation.
func (p *pipeline) waitGroup(members int) int32 {
	p.t.Helper()
	return p.waitGroupAfter(-1, members)
}

// waitGroupAfter waits until the consumer group is stable in a generation after gen with
// members members, each assigned a partition, and returns that generation.
func (p *pipeline) waitGroupAfter(gen int32, members int) int32 {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, stepTimeout)
	defer cancel()
	g, err := p.stack.KafkaCluster().WaitGroupInfo(ctx, consumers.DefaultGroupID, func(g *kfake.GroupInfo) bool {
		p.checkMembers()
		if g == nil || g.State != "Stable" || g.Epoch <= gen || len(g.Members) != members {
			return false
		}
		for _, m := range g.Members {
			if m.NumAssigned() == 0 {
				return false
			}
		}
		return true
	})
	if err != nil {
		state := "none"
		if g != nil {
			state = fmt.Sprintf("%s, generation %d, %d members", g.State, g.Epoch, len(g.Members))
		}
		p.t.Fatalf("waiting for a stable group of %d members after generation %d: %v (group: %s)%s", members, gen, err, state, p.logTails())
	}
	p.t.Logf("group stable in generation %d with %d members", g.Epoch, len(g.Members))
	return g.Epoch
}
