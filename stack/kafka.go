package stack

import (
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/twmb/franz-go/pkg/kfake"
)

// startKafka starts a one-broker in-process kfake cluster on a free 127.0.0.1 port with the
// configured topics. kfake listens on 127.0.0.1 itself and picks the port while holding the
// listener, so there is no port race. Its data lives in memory, or in <DataDir>/kafka with
// Config.PersistKafka (kfake then seeds the topics only when the directory holds no state).
//
// No extra options are needed for kafka-go: kfake speaks the classic consumer-group protocol
// (JoinGroup/SyncGroup/Heartbeat/OffsetCommit) that kafka-go's Reader uses, and its default
// session-timeout bounds (6 s – 5 min) admit kafka-go's default of 30 s.
func (s *Stack) startKafka(cfg Config) error {
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.SeedTopics(int32(cfg.Partitions), cfg.Topics...),
		kfake.DefaultNumPartitions(cfg.Partitions),
		kfake.ClusterID("mcpulse-devstack"),
		kfake.GroupMinSessionTimeout(cfg.GroupMinSessionTimeout),
		kfake.WithLogger(kfakeLogger{s.log}),
	}
	if cfg.PersistKafka {
		opts = append(opts, kfake.DataDir(filepath.Join(s.DataDir, "kafka")))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return fmt.Errorf("devstack: starting embedded kafka (kfake): %w", err)
	}
	s.kafka, s.kafkaOpts, s.kafkaPersist = c, opts, cfg.PersistKafka
	s.KafkaBrokers = c.ListenAddrs()
	s.log.Info("devstack: kafka ready", "brokers", s.KafkaBrokers, "topics", cfg.Topics, "partitions", cfg.Partitions)
	return nil
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
