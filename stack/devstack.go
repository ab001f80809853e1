// Package devstack starts the embedded stack that tests, "mcpulse demo", "mcpulse stack" and
// benchmarks share (DESIGN.md §7): an in-process Kafka cluster (franz-go kfake, reached over
// loopback like any broker) and real redis-server and clickhouse-server child processes on
// free 127.0.0.1 ports with their own data directories.
//
// Any of the three can be replaced by an external service through the same environment
// variables the rest of mcpulse reads (EnvKafkaBrokers, EnvRedisURL, EnvClickHouseDSN) when
// Config.UseEnv is set, so CI can point the same tests at real infrastructure.
package stack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/mcpulse/mcpulse/ingest"
)

// Environment variables naming external services. They are the same variables every mcpulse
// command reads, so Stack.Env can be exported into a shell as is.
const (
	// EnvKafkaBrokers is a comma-separated host:port list of Kafka bootstrap brokers.
	EnvKafkaBrokers = "MCPULSE_KAFKA_BROKERS"
	// EnvRedisURL is a redis://host:port/db URL.
	EnvRedisURL = "MCPULSE_REDIS_URL"
	// EnvClickHouseDSN is a clickhouse://user:pass@host:port/db DSN for the native protocol.
	EnvClickHouseDSN = "MCPULSE_CLICKHOUSE_DSN"
)

// Config configures Start. The zero value is valid: a throw-away stack in a temporary
// directory with every service embedded.
type Config struct {
	// DataDir holds the services' data and logs (redis/ and clickhouse/ subdirectories hold
	// their files and logs; kafka/ the embedded Kafka's log when PersistKafka is set). It is
	// created if missing and kept on Close, so a stack restarted on the same directory keeps
	// its ClickHouse tables and its Redis data (AOF).
	// Default: "" — a fresh temporary directory, removed on Close.
	DataDir string

	// PersistKafka keeps the embedded Kafka's topics, records, committed offsets and group
	// state in <DataDir>/kafka (kfake.DataDir) instead of memory, so RestartKafka is a real
	// broker restart and a stack started again on the same DataDir finds its topics. Writes
	// go through the page cache (no fsync per batch), like Kafka's default flush policy.
	// Default: false (in memory).
	PersistKafka bool

	// GroupMinSessionTimeout is the smallest consumer-group session timeout the embedded
	// Kafka accepts (kfake.GroupMinSessionTimeout). Lower it so a test can run consumers with
	// a short session timeout, making a killed member's partitions move quickly.
	// Default: 6s (Kafka's group.min.session.timeout.ms).
	GroupMinSessionTimeout time.Duration

	// Partitions is the partition count of every topic created on the embedded Kafka.
	// Default: 4.
	Partitions int

	// Brokers is the number of brokers of the embedded Kafka (node ids 0 to Brokers-1, each on
	// its own 127.0.0.1 port; Stack.KafkaBrokers lists them in node order). Topics are
	// created with replication factor min(3, Brokers) and their leaders spread over the
	// brokers; kfake keeps one copy of the data, so a broker stopped with StopKafkaBroker takes
	// its connections and its leaderships away, not its records. Between 1 and 16.
	// Default: 1.
	Brokers int

	// Topics are created on the embedded Kafka at start. They are not created on an external
	// Kafka chosen through EnvKafkaBrokers. Default: ingest.AllTopics.
	Topics []string

	// Logger receives start/stop progress at Info and the embedded Kafka's warnings and
	// errors. Default: a logger that discards everything.
	Logger *slog.Logger

	// Shards and Replicas, when either is above 1, replace the single clickhouse-server by a
	// ClickHouseCluster of Shards × Replicas servers and a ZooKeeper in <DataDir>/clickhouse-cluster
	// (StartClickHouseCluster); ClickHouseDSN is then its first host's. The schema is the
	// caller's to create, ON CLUSTER ClusterName (migrations.Options.Cluster).
	// Default: 1 and 1, one server.
	Shards, Replicas int

	// UseEnv, when true, makes each of EnvKafkaBrokers, EnvRedisURL and EnvClickHouseDSN that
	// is set to a non-empty value replace the corresponding embedded service: that service is
	// not started and the variable's value is used as is (not health-checked). Default: false.
	UseEnv bool
}

func (c *Config) setDefaults() {
	if c.Partitions == 0 {
		c.Partitions = 4
	}
	if c.Brokers == 0 {
		c.Brokers = 1
	}
	if len(c.Topics) == 0 {
		c.Topics = append([]string(nil), ingest.AllTopics...)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.GroupMinSessionTimeout == 0 {
		c.GroupMinSessionTimeout = 6 * time.Second
	}
	if c.Shards == 0 {
		c.Shards = 1
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
}

// clustered reports whether the configuration asks for a ClickHouse cluster.
func (c Config) clustered() bool { return c.Shards > 1 || c.Replicas > 1 }

// Validate reports every problem with the configuration at once (after defaults are applied,
// as Start does).
func (c Config) Validate() error {
	var errs []error
	if c.Partitions < 1 || c.Partitions > 10000 {
		errs = append(errs, fmt.Errorf("devstack: Partitions must be between 1 and 10000, got %d", c.Partitions))
	}
	if c.Brokers < 1 || c.Brokers > MaxBrokers {
		errs = append(errs, fmt.Errorf("devstack: Brokers must be between 1 and %d, got %d", MaxBrokers, c.Brokers))
	}
	for i, t := range c.Topics {
		if t == "" {
			errs = append(errs, fmt.Errorf("devstack: Topics[%d] is empty", i))
		}
	}
	if c.GroupMinSessionTimeout < 0 {
		errs = append(errs, fmt.Errorf("devstack: GroupMinSessionTimeout must not be negative, got %s", c.GroupMinSessionTimeout))
	}
	if err := (ClusterConfig{Shards: c.Shards, Replicas: c.Replicas}).Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Stack is a running embedded stack. Its exported fields are what clients need to connect;
// they are set by Start and must not be modified. Call Close when done.
type Stack struct {
	// KafkaBrokers are the bootstrap broker addresses: for the embedded cluster one
	// "127.0.0.1:PORT" per broker, in node id order (Config.Brokers; one by default). A broker
	// stopped with StopKafkaBroker stays listed, as it would in a client's configuration.
	KafkaBrokers []string
	// RedisURL is redis://127.0.0.1:PORT/0 for the embedded redis-server.
	RedisURL string
	// ClickHouseDSN is clickhouse://default@127.0.0.1:PORT/default?dial_timeout=5s for the
	// embedded clickhouse-server's native (TCP) protocol port.
	ClickHouseDSN string
	// DataDir is the directory holding the embedded services' data and logs.
	DataDir string
	// ClickHouseCluster is the embedded ClickHouse cluster when Config.Shards or
	// Config.Replicas asked for one, else nil. Stack.StopClickHouse and the other single-server
	// controls return ErrClickHouseCluster on a cluster; use its KillHost and StartHost.
	ClickHouseCluster *ClickHouseCluster

	log     *slog.Logger
	tempDir bool

	// mu guards the service handles below against a stop, start or restart (restart.go)
	// running concurrently with another or with Close.
	mu           sync.Mutex
	closed       bool
	kafka        *kfake.Cluster
	kafkaOpts    []kfake.Opt // NewCluster options, kept for RestartKafka (with the port fixed)
	kafkaPersist bool
	kafkaPorts   []int            // by node id
	kafkaDown    map[int32]bool   // brokers stopped with StopKafkaBroker
	kafkaConns   *brokerListeners // every broker's listener and accepted connections
	redis        *child
	redisBin     string
	redisPort    int
	ch           *child
	chArgv       []string
	chPorts      []int // native (TCP) and HTTP ports
	closeOnce    sync.Once
	closeErr     error
}

// Start starts every service the configuration asks for and waits until each answers
// as itself (redis: PING and INFO naming its process within 20 s; ClickHouse: a query of its
// identity macro within 60 s, so a server that lost its port to another stack's fails
// instead of passing that one off as its own; a cluster's servers: that, and reading
// ZooKeeper). ctx bounds the start-up only: cancelling it later does not stop the stack; Close
// does.
//
// Errors: an invalid Config; a *MissingBinaryError when redis-server or clickhouse-server is
// not installed, or java or the ZooKeeper jar for a cluster; otherwise an error carrying the tail of the failing server's log. On error
// everything already started is stopped.
func Start(ctx context.Context, cfg Config) (*Stack, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	began := time.Now()
	s := &Stack{log: cfg.Logger}

	env := func(name string) string {
		if !cfg.UseEnv {
			return ""
		}
		return strings.TrimSpace(os.Getenv(name))
	}
	extKafka, extRedis, extCH := env(EnvKafkaBrokers), env(EnvRedisURL), env(EnvClickHouseDSN)

	// Look the binaries up before creating anything, so a machine without them fails fast
	// with the install hint and leaves nothing behind.
	var redisBin string
	var chCmd []string
	var err error
	if extRedis == "" {
		if redisBin, err = findRedis(); err != nil {
			return nil, err
		}
	}
	if extCH == "" {
		if chCmd, err = findClickHouse(); err != nil {
			return nil, err
		}
		if cfg.clustered() {
			if _, _, err := findZooKeeper(); err != nil {
				return nil, err
			}
		}
	}

	s.redisBin, s.chArgv = redisBin, chCmd

	if extRedis == "" || extCH == "" || (extKafka == "" && cfg.PersistKafka) {
		if err := s.makeDataDir(cfg.DataDir); err != nil {
			return nil, err
		}
	}

	if extKafka != "" {
		for _, b := range strings.Split(extKafka, ",") {
			if b = strings.TrimSpace(b); b != "" {
				s.KafkaBrokers = append(s.KafkaBrokers, b)
			}
		}
		s.log.Info("devstack: using external kafka", "brokers", s.KafkaBrokers)
	} else if err := s.startKafka(cfg); err != nil {
		s.Close()
		return nil, err
	}

	// redis and ClickHouse start in parallel: ClickHouse dominates start-up time.
	var wg sync.WaitGroup
	var redisErr, chErr error
	if extRedis != "" {
		s.RedisURL = extRedis
		s.log.Info("devstack: using external redis", "url", extRedis)
	} else {
		wg.Go(func() { redisErr = s.startRedis(ctx, redisBin, 0) })
	}
	if extCH != "" {
		s.ClickHouseDSN = extCH
		s.log.Info("devstack: using external clickhouse", "dsn", extCH)
	} else if cfg.clustered() {
		wg.Go(func() {
			cc, err := StartClickHouseCluster(ctx, ClusterConfig{Shards: cfg.Shards, Replicas: cfg.Replicas,
				Dir: filepath.Join(s.DataDir, "clickhouse-cluster"), Logger: s.log})
			if err != nil {
				chErr = err
				return
			}
			s.ClickHouseCluster, s.ClickHouseDSN = cc, cc.Hosts[0].DSN
		})
	} else {
		wg.Go(func() { chErr = s.startClickHouse(ctx, chCmd, nil) })
	}
	wg.Wait()
	if err := errors.Join(redisErr, chErr); err != nil {
		s.Close()
		return nil, err
	}
	s.log.Info("devstack: started", "took", time.Since(began).Round(time.Millisecond),
		"kafka", s.KafkaBrokers, "redis", s.RedisURL, "clickhouse", s.ClickHouseDSN, "data_dir", s.DataDir)
	return s, nil
}

func (s *Stack) makeDataDir(dir string) error {
	if dir == "" {
		d, err := os.MkdirTemp("", "mcpulse-devstack-")
		if err != nil {
			return fmt.Errorf("devstack: creating temporary data dir: %w", err)
		}
		s.DataDir, s.tempDir = d, true
		return nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("devstack: data dir %q: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return fmt.Errorf("devstack: creating data dir: %w", err)
	}
	s.DataDir = abs
	return nil
}

// Env returns the three variables that point mcpulse at this stack, as NAME=value strings
// in the order EnvKafkaBrokers, EnvRedisURL, EnvClickHouseDSN; ready for exec.Cmd.Env.
func (s *Stack) Env() []string {
	return []string{
		EnvKafkaBrokers + "=" + strings.Join(s.KafkaBrokers, ","),
		EnvRedisURL + "=" + s.RedisURL,
		EnvClickHouseDSN + "=" + s.ClickHouseDSN,
	}
}

// Close stops the embedded services: each child process gets SIGTERM, then SIGKILL if it has
// not exited within its bound (ClickHouse 20 s, redis 10 s); a child already stopped with
// StopRedis or StopClickHouse is left as it is; the Kafka cluster is closed;
// a temporary data directory is removed. External services are left alone. Close is
// idempotent and safe for concurrent use; later calls return the first call's result.
func (s *Stack) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeOnce.Do(func() {
		s.closed = true
		var wg sync.WaitGroup
		var errCH, errRedis error
		if s.ch != nil {
			wg.Go(func() { errCH = s.ch.stop(20 * time.Second) })
		}
		if s.ClickHouseCluster != nil {
			wg.Go(func() { errCH = s.ClickHouseCluster.Close() })
		}
		if s.redis != nil {
			wg.Go(func() { errRedis = s.redis.stop(10 * time.Second) })
		}
		wg.Wait()
		if s.kafka != nil {
			s.kafka.Close()
		}
		var errDir error
		if s.tempDir {
			errDir = os.RemoveAll(s.DataDir)
		}
		s.closeErr = errors.Join(errCH, errRedis, errDir)
		s.log.Info("devstack: stopped", "err", s.closeErr)
	})
	return s.closeErr
}

// MissingBinaryError is returned by Start when a server binary is not installed.
type MissingBinaryError struct {
	// Binary is the executable that was looked for, e.g. "redis-server".
	Binary string
	// Package is the Debian package that provides it, e.g. "redis-server".
	Package string
}

// Error names the binary and how to install it, e.g. "redis-server not found on PATH:
// install Debian package redis-server (apt-get install redis-server)".
// A file looked for at a fixed path (the ZooKeeper jar) reads "... not found: install ...".
func (e *MissingBinaryError) Error() string {
	where := " on PATH"
	if strings.HasPrefix(e.Binary, "/") {
		where = ""
	}
	return fmt.Sprintf("%s not found%s: install Debian package %s (apt-get install %s)",
		e.Binary, where, e.Package, e.Package)
}

// extraBinDirs are searched after PATH. A variable so tests can simulate a bare machine.
var extraBinDirs = []string{"/usr/sbin", "/usr/local/sbin", "/sbin", "/usr/local/bin", "/usr/bin"}

// lookBinary finds name on PATH, then in the sbin directories that a non-root PATH on
// Debian omits (clickhouse-server lives in /usr/sbin).
func lookBinary(name string) (string, bool) {
	if p, err := exec.LookPath(name); err == nil {
		return p, true
	}
	for _, dir := range extraBinDirs {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, true
		}
	}
	return "", false
}

// freePorts returns n distinct loopback ports that were free a moment ago. All listeners are
// held until every port is chosen, so the n ports differ; a child may still lose a port to
// another process before binding it, which the callers handle by retrying.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("devstack: choosing a free port: %w", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// startAttempts is how many times a child server is started on freshly chosen ports when it
// loses a port race.
const startAttempts = 3

// child is a server process started by the stack.
type child struct {
	name    string // "redis-server" or "clickhouse-server", for messages
	cmd     *exec.Cmd
	logPath string   // the file capturing stdout and stderr
	extra   []string // further log files whose tails explain failures
	done    chan struct{}
	waitErr error // valid after done is closed
}

// startChild starts argv with stdout and stderr written to logPath (truncated first, so a
// retry's log holds only that attempt). The process is killed by the kernel if the parent
// dies (Linux), so an interrupted test leaves no orphan.
func startChild(name string, argv []string, dir, logPath string, env []string) (*child, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("devstack: %s log: %w", name, err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = childSysProcAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("devstack: starting %s: %w", name, err)
	}
	// The child has its own copy of the descriptor.
	logf.Close()
	c := &child{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		c.waitErr = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// pid is the child's process id.
func (c *child) pid() int { return c.cmd.Process.Pid }

// exited reports whether the child has exited.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM, waits up to grace, then SIGKILLs. A clean exit after SIGTERM is not an
// error; being killed is.
func (c *child) stop(grace time.Duration) error {
	if c.exited() {
		return nil
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-c.done:
		return nil
	case <-t.C:
	}
	_ = c.cmd.Process.Kill()
	<-c.done
	return fmt.Errorf("devstack: %s (pid %d) ignored SIGTERM for %s and was killed", c.name, c.pid(), grace)
}

// failure wraps err with the tails of the child's logs, for start-up errors.
func (c *child) failure(err error) error {
	var b strings.Builder
	fmt.Fprintf(&b, "devstack: %s (pid %d): %v", c.name, c.pid(), err)
	if c.exited() && c.waitErr != nil {
		fmt.Fprintf(&b, " (process exited: %v)", c.waitErr)
	}
	for _, p := range append([]string{c.logPath}, c.extra...) {
		if tail := logTail(p, 20, 4096); tail != "" {
			fmt.Fprintf(&b, "\n--- tail of %s ---\n%s", p, tail)
		}
	}
	return errors.New(b.String())
}

// logMentions reports whether any of the child's logs contain s (case-insensitive).
func (c *child) logMentions(s string) bool {
	for _, p := range append([]string{c.logPath}, c.extra...) {
		if strings.Contains(strings.ToLower(logTail(p, 50, 16384)), strings.ToLower(s)) {
			return true
		}
	}
	return false
}

// logTail returns at most the last lines lines and maxBytes bytes of the file at path, or ""
// if it cannot be read.
func logTail(path string, lines, maxBytes int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(fi.Size()-int64(maxBytes), 0)
	buf, err := io.ReadAll(io.NewSectionReader(f, off, fi.Size()-off))
	if err != nil {
		return ""
	}
	buf = bytes.TrimRight(buf, "\n")
	parts := bytes.Split(buf, []byte("\n"))
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return string(bytes.Join(parts, []byte("\n")))
}

// waitHealthy calls probe every 100 ms until it succeeds, the child exits, timeout passes or
// ctx is done, and returns the last probe error in the latter cases.
func waitHealthy(ctx context.Context, c *child, timeout time.Duration, probe func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		last = probe(pctx)
		pcancel()
		if last == nil {
			return nil
		}
		select {
		case <-c.done:
			return errors.New("exited during start-up")
		case <-ctx.Done():
			return fmt.Errorf("not healthy within %s: %w (last probe error: %v)", timeout, ctx.Err(), last)
		case <-tick.C:
		}
	}
}
