package stack

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Stopping and starting the embedded services, for fault-injection tests. A stop is
// a real one: the server gets SIGTERM and its process exits (SIGKILL after the same bounds as
// Close); a start runs a new process on the same port and data directory, so clients keep
// their addresses and find the data the server had persisted: Redis its append-only file,
// ClickHouse its tables. The Kafka broker restarts in place (RestartKafka).
//
// Each method returns an error for a service that is external (Config.UseEnv), after Close,
// or when the service is not in the state the method expects (StartRedis on a running Redis).

// ErrExternalService is returned by the stop, start and restart methods for a service the
// stack did not start (replaced through Config.UseEnv).
var ErrExternalService = errors.New("devstack: service is external; the stack cannot stop or start it")

// ErrClickHouseCluster is returned by StopClickHouse, StartClickHouse, FreezeClickHouse and
// ThawClickHouse on a stack whose ClickHouse is a cluster (Config.Shards, Config.Replicas).
var ErrClickHouseCluster = errors.New("devstack: ClickHouse is a cluster; stop and start its hosts through Stack.ClickHouseCluster (KillHost, StartHost)")

// ErrClosed is returned by the stop, start and restart methods after Close.
var ErrClosed = errors.New("devstack: stack is closed")

// StopRedis stops the embedded redis-server (SIGTERM; it writes and fsyncs its append-only
// file and exits; SIGKILL after 10 s, reported as an error).
func (s *Stack) StopRedis() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(s.redis != nil); err != nil {
		return err
	}
	if s.redis.exited() {
		return errors.New("devstack: redis-server is not running")
	}
	began := time.Now()
	err := s.redis.stop(10 * time.Second)
	s.log.Info("devstack: redis stopped", "took", time.Since(began).Round(time.Millisecond), "err", err)
	return err
}

// StartRedis starts redis-server again after StopRedis, on the same port and data directory
// (it replays its append-only file), and waits for PING as Start does (20 s) or until ctx is
// done. Errors: the server is running, the port was taken meanwhile, or it did not become
// healthy (with the tail of its log).
func (s *Stack) StartRedis(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(s.redis != nil); err != nil {
		return err
	}
	if !s.redis.exited() {
		return errors.New("devstack: redis-server is already running")
	}
	return s.startRedis(ctx, s.redisBin, s.redisPort)
}

// StopClickHouse stops the embedded clickhouse-server (SIGTERM; SIGKILL after 20 s, reported
// as an error). Its tables stay in the data directory.
func (s *Stack) StopClickHouse() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableClickHouse(); err != nil {
		return err
	}
	if s.ch.exited() {
		return errors.New("devstack: clickhouse-server is not running")
	}
	began := time.Now()
	err := s.ch.stop(20 * time.Second)
	s.log.Info("devstack: clickhouse stopped", "took", time.Since(began).Round(time.Millisecond), "err", err)
	return err
}

// StartClickHouse starts clickhouse-server again after StopClickHouse, on the same ports and
// data directory, and waits for a native-protocol ping as Start does (60 s) or until ctx is
// done. Errors: the server is running, a port was taken meanwhile, or it did not become
// healthy (with the tail of its logs).
func (s *Stack) StartClickHouse(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableClickHouse(); err != nil {
		return err
	}
	if !s.ch.exited() {
		return errors.New("devstack: clickhouse-server is already running")
	}
	return s.startClickHouse(ctx, s.chArgv, s.chPorts)
}

// RestartKafka restarts the embedded Kafka cluster: the cluster is closed (its listeners
// close, so every client connection drops; with persistence it first writes its state) and
// a new one is created on the same ports from the same data directory, every broker running
// again (one stopped with StopKafkaBroker included). It needs Config.PersistKafka: without it
// a restart would come back empty, which is not a restart. down is how long the cluster stays
// down between the two (0 for an immediate restart).
//
// The new cluster serves every record acknowledged before the restart: kfake appends each
// produced batch to its segment file before acknowledging it, Close saves the partition
// snapshots inside the cluster's request loop, and NewCluster reloads the segments from the
// data directory (kfake persist.go persistBatchToSegment and loadPartition, cluster.go Close). A
// consumer-group stall seen after a restart in testkit/faults is not the broker's (see
// TestKafkaBrokerRestartedMidRun... there).
func (s *Stack) RestartKafka(down time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(s.kafka != nil); err != nil {
		return err
	}
	if !s.kafkaPersist {
		return errors.New("devstack: RestartKafka needs Config.PersistKafka (an in-memory broker would restart empty)")
	}
	began := time.Now()
	s.kafka.Close()
	time.Sleep(down)
	c, err := kfake.NewCluster(append(append([]kfake.Opt(nil), s.kafkaOpts...), kfake.Ports(s.kafkaPorts...))...)
	if err != nil {
		s.kafka = nil
		return fmt.Errorf("devstack: restarting embedded kafka (kfake) on ports %v: %w", s.kafkaPorts, err)
	}
	s.kafka = c
	clear(s.kafkaDown)
	s.log.Info("devstack: kafka restarted", "brokers", s.KafkaBrokers, "took", time.Since(began).Round(time.Millisecond))
	return nil
}

// usableClickHouse is usable for the single clickhouse-server, with ErrClickHouseCluster on
// a cluster.
func (s *Stack) usableClickHouse() error {
	if !s.closed && s.ClickHouseCluster != nil {
		return ErrClickHouseCluster
	}
	return s.usable(s.ch != nil)
}

// usable reports why a service cannot be stopped or started: the stack is closed, or the
// service is not embedded (embedded false).
func (s *Stack) usable(embedded bool) error {
	if s.closed {
		return ErrClosed
	}
	if !embedded {
		return ErrExternalService
	}
	return nil
}

// FreezeClickHouse stops the embedded clickhouse-server's process where it stands (SIGSTOP):
// its connections stay open and nothing is answered, as with a server that hangs, until
// ThawClickHouse. Tests that freeze it must thaw it before Close (a frozen server would take
// Close's SIGKILL bound to stop).
func (s *Stack) FreezeClickHouse() error { return s.signalClickHouse(syscall.SIGSTOP) }

// ThawClickHouse lets a frozen clickhouse-server run again (SIGCONT).
func (s *Stack) ThawClickHouse() error { return s.signalClickHouse(syscall.SIGCONT) }

func (s *Stack) signalClickHouse(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableClickHouse(); err != nil {
		return err
	}
	if s.ch.exited() {
		return errors.New("devstack: clickhouse-server is not running")
	}
	return s.ch.cmd.Process.Signal(sig)
}
