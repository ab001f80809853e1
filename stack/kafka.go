package stack

import (
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kfake"
)

// MaxBrokers is the most brokers the embedded Kafka runs (Config.Brokers): enough for any
// failure a test can stage, few enough that a typo does not open hundreds of ports.
const MaxBrokers = 16

// startKafka starts an in-process kfake cluster of cfg.Brokers brokers, each on a free
// 127.0.0.1 port, with the configured topics. kfake listens on 127.0.0.1 itself and picks the
// ports while holding the listeners, so there is no port race. Its data lives in memory, or in
// <DataDir>/kafka with Config.PersistKafka (kfake then seeds the topics only when the
// directory holds no state). Seeded topics get kfake's default replication factor, min(3,
// brokers), and a leader per partition spread over the brokers.
//
// No extra options are needed for kafka-go: kfake speaks the classic consumer-group protocol
// (JoinGroup/SyncGroup/Heartbeat/OffsetCommit) that kafka-go's Reader uses, and its default
// session-timeout bounds (6 s – 5 min) admit kafka-go's default of 30 s.
func (s *Stack) startKafka(cfg Config) error {
	s.kafkaConns = &brokerListeners{byAddr: map[string]*trackedListener{}}
	opts := []kfake.Opt{
		kfake.NumBrokers(cfg.Brokers),
		kfake.SeedTopics(int32(cfg.Partitions), cfg.Topics...),
		kfake.DefaultNumPartitions(cfg.Partitions),
		kfake.ClusterID("mcpulse-devstack"),
		kfake.GroupMinSessionTimeout(cfg.GroupMinSessionTimeout),
		kfake.WithLogger(kfakeLogger{s.log}),
		kfake.ListenFn(s.kafkaConns.listen),
	}
	if cfg.PersistKafka {
		opts = append(opts, kfake.DataDir(filepath.Join(s.DataDir, "kafka")))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return fmt.Errorf("devstack: starting embedded kafka (kfake): %w", err)
	}
	s.kafka, s.kafkaOpts, s.kafkaPersist = c, opts, cfg.PersistKafka
	s.KafkaBrokers = c.ListenAddrs() // node i is the i-th broker kfake creates
	s.kafkaDown = map[int32]bool{}
	for _, addr := range s.KafkaBrokers {
		port, err := addrPort(addr)
		if err != nil {
			c.Close()
			return err
		}
		s.kafkaPorts = append(s.kafkaPorts, port)
	}
	s.log.Info("devstack: kafka ready", "brokers", s.KafkaBrokers, "topics", cfg.Topics, "partitions", cfg.Partitions)
	return nil
}

// addrPort returns the port of a "host:port" address kfake listens on.
func addrPort(addr string) (int, error) {
	_, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, fmt.Errorf("devstack: BUG: broker address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return 0, fmt.Errorf("devstack: BUG: broker address %q: %w", addr, err)
	}
	return port, nil
}

// StopKafkaBroker takes broker node (0 to Config.Brokers-1) out of the embedded Kafka as a
// crashed broker leaves a real cluster: its listener closes and so does every client
// connection it had accepted, so requests in flight to it fail and clients must find the
// partitions' new leaders and the group's coordinator elsewhere. kfake elects a new leader for
// every partition at random among the remaining brokers (kfake.Cluster.RemoveNode) and may move
// group coordinators; place leaders with KafkaCluster().MoveTopicPartition for a fixed layout.
// The records stay: kfake holds one copy for the whole cluster, as replication factor 3 with
// every replica in sync would. StartKafkaBroker brings the broker back.
//
// Errors: the Kafka is external or the stack closed; node is not a broker of the stack, is
// already stopped, or is the last one running.
func (s *Stack) StopKafkaBroker(node int32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(s.kafka != nil); err != nil {
		return err
	}
	if node < 0 || int(node) >= len(s.kafkaPorts) {
		return fmt.Errorf("devstack: no kafka broker %d (brokers 0 to %d)", node, len(s.kafkaPorts)-1)
	}
	if s.kafkaDown[node] {
		return fmt.Errorf("devstack: kafka broker %d is already stopped", node)
	}
	if len(s.kafkaDown)+1 == len(s.kafkaPorts) {
		return fmt.Errorf("devstack: kafka broker %d is the last one running", node)
	}
	if err := s.kafka.RemoveNode(node); err != nil {
		return fmt.Errorf("devstack: stopping kafka broker %d: %w", node, err)
	}
	dropped := s.kafkaConns.dropConns(s.KafkaBrokers[node])
	s.kafkaDown[node] = true
	s.log.Info("devstack: kafka broker stopped", "node", node, "broker", s.KafkaBrokers[node], "connections_closed", dropped)
	return nil
}

// StartKafkaBroker brings back broker node after StopKafkaBroker, on the same port, so
// clients reach it at the address they were configured with. kfake elects a new leader for
// every partition at random among the running brokers, the returning one included
// (kfake.Cluster.AddNode).
//
// Errors: the Kafka is external or the stack closed; node is not a stopped broker of the
// stack; its port was taken meanwhile.
func (s *Stack) StartKafkaBroker(node int32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(s.kafka != nil); err != nil {
		return err
	}
	if !s.kafkaDown[node] {
		return fmt.Errorf("devstack: kafka broker %d is not stopped", node)
	}
	if _, _, err := s.kafka.AddNode(node, s.kafkaPorts[node]); err != nil {
		return fmt.Errorf("devstack: starting kafka broker %d on port %d: %w", node, s.kafkaPorts[node], err)
	}
	delete(s.kafkaDown, node)
	s.log.Info("devstack: kafka broker started", "node", node, "broker", s.KafkaBrokers[node])
	return nil
}

// brokerListeners makes kfake's listeners (kfake.ListenFn) remember the connections they
// accept, so StopKafkaBroker can close them: kfake.Cluster.RemoveNode closes a broker's
// listener only, and a client connected to it would go on being served.
type brokerListeners struct {
	mu     sync.Mutex
	byAddr map[string]*trackedListener
}

func (b *brokerListeners) listen(network, address string) (net.Listener, error) {
	ln, err := net.Listen(network, address)
	if err != nil {
		return nil, err
	}
	tl := &trackedListener{Listener: ln, conns: map[*trackedConn]struct{}{}}
	b.mu.Lock()
	b.byAddr[ln.Addr().String()] = tl // a broker started again on its port replaces its old listener
	b.mu.Unlock()
	return tl, nil
}

// dropConns closes every connection the listener on addr accepted and returns how many.
func (b *brokerListeners) dropConns(addr string) int {
	b.mu.Lock()
	tl := b.byAddr[addr]
	b.mu.Unlock()
	if tl == nil {
		return 0
	}
	tl.mu.Lock()
	conns := tl.conns
	tl.conns = map[*trackedConn]struct{}{}
	tl.dropped = true
	tl.mu.Unlock()
	for c := range conns {
		_ = c.Conn.Close()
	}
	return len(conns)
}

type trackedListener struct {
	net.Listener
	mu      sync.Mutex
	conns   map[*trackedConn]struct{}
	dropped bool // its broker was stopped: a connection accepted just before is closed too
}

// Accept implements net.Listener.
func (l *trackedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, l: l}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dropped {
		_ = c.Close()
		return nil, net.ErrClosed
	}
	l.conns[tc] = struct{}{}
	return tc, nil
}

type trackedConn struct {
	net.Conn
	l *trackedListener
}

// Close implements net.Conn.
func (c *trackedConn) Close() error {
	c.l.mu.Lock()
	delete(c.l.conns, c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// kfakeLogger forwards kfake's warnings and errors to slog; its info and debug levels log
// every request and would drown everything else.
type kfakeLogger struct{ l *slog.Logger }

// Logf implements kfake.Logger.
func (k kfakeLogger) Logf(level kfake.LogLevel, format string, args ...any) {
	switch level {
	case kfake.LogLevelError:
		k.l.Error("kfake: " + fmt.Sprintf(format, args...))
	case kfake.LogLevelWarn:
		k.l.Warn("kfake: " + fmt.Sprintf(format, args...))
	}
}

// KafkaCluster returns the embedded kfake cluster, for tests that inject broker-side faults
// with its control functions (kfake.Cluster.ControlKey), or nil when the stack uses an
// external Kafka. After RestartKafka it is the new cluster.
func (s *Stack) KafkaCluster() *kfake.Cluster {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kafka
}
