//go:build linux

package faults

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/mcpulse/mcpulse/consumers"
	"github.com/mcpulse/mcpulse/consumers/rollup"
	"github.com/mcpulse/mcpulse/demo"
	"github.com/mcpulse/mcpulse/demo/gen"
	"github.com/mcpulse/mcpulse/demo/outcome"
	"github.com/mcpulse/mcpulse/demo/report"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/migrations"
	"github.com/mcpulse/mcpulse/stack"
)

// binary is the mcpulse command built once by TestMain; every consumer is a process of it.
var binary string

// binaryEnv names a prebuilt mcpulse binary to test instead of building cmd/mcpulse (for
// example a consumer built with other flags); unset in CI.
const binaryEnv = "MCPULSE_FAULTS_BINARY"

func TestMain(m *testing.M) {
	if binary = os.Getenv(binaryEnv); binary != "" {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "mcpulse-faults-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "mcpulse")
	// The faultinject build adds one hook, inert unless its environment variable is set
	// (consumers/faultinject.go): the partial-insert test uses it.
	build := exec.Command("go", "build", "-tags", "faultinject", "-o", binary, "github.com/mcpulse/mcpulse/cmd/mcpulse")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "faults: building cmd/mcpulse:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const (
	// sessionTimeout is the members' --session-timeout: a SIGKILLed member's partitions move
	// to the others (or to its replacement) this long after it died.
	sessionTimeout = 2 * time.Second
	// resumeLimit is the bound on how long consumption may stay paused once a store (or
	// the broker) is back.
	resumeLimit = 10 * time.Second
	// outage is how long Redis and ClickHouse stay stopped.
	outage = 30 * time.Second
	// stepTimeout bounds every wait for progress; a run that stalls fails instead of hanging.
	stepTimeout = 3 * time.Minute
	// memberBatchSize is the members' --batch-size (a later --batch-size in startWith's
	// arguments wins): batches smaller than a part of the corpus, so a member commits some of
	// a part before the fault the test injects in it. With the default (100,000), one batch
	// holds a whole part, and a member killed once its rows are stored is always killed
	// before its first commit.
	memberBatchSize = 5000
)

// pipeline is one test's run: an embedded stack with a persistent Kafka broker, a generated
// corpus split into parts that are published as the run advances, and the consumer processes.
type pipeline struct {
	t     *testing.T
	ctx   context.Context
	dir   string
	stack *stack.Stack
	dsn   string // the members' and the test's ClickHouse DSN (clusterDSN on a cluster)
	ch    driver.Conn
	rdb   redis.UniversalClient
	pub   *ingest.Publisher

	expected  *outcome.Outcome
	parts     [][]byte // the corpus, split at line boundaries
	validUpTo []int64  // distinct valid events in parts[0..i]
	published int      // parts published so far

	members []*member
	started int // members started so far, for names
}

// newPipeline starts a stack, migrates ClickHouse and generates a corpus of events lines
// (generator seed seed) split into nParts parts of equal line counts. Each of configure may
// change the stack's configuration first (for example its number of Kafka brokers, or
// ClickHouse replicas: a cluster is migrated ON CLUSTER, and the members and the test reach
// it through clusterDSN). A missing ZooKeeper skips a cluster's test unless CI is set
// (stack.SkipOrFail); any other start-up error fails it.
func newPipeline(t *testing.T, events int, seed int64, nParts int, configure ...func(*stack.Config)) *pipeline {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	t.Cleanup(cancel)
	p := &pipeline{t: t, ctx: ctx, dir: t.TempDir()}
	t.Cleanup(p.keepLogsOnFailure) // runs before the temporary directory is removed

	cfg := stack.Config{
		DataDir:                filepath.Join(p.dir, "stack"),
		PersistKafka:           true,
		GroupMinSessionTimeout: time.Second,
	}
	for _, f := range configure {
		f(&cfg)
	}
	st, err := stack.Start(ctx, cfg)
	if missing := (*stack.MissingBinaryError)(nil); errors.As(err, &missing) && missing.Package == "zookeeper" {
		stack.SkipOrFail(t, err)
	}
	if err != nil {
		t.Fatalf("devstack: %v", err)
	}
	p.stack, p.dsn = st, st.ClickHouseDSN
	var migrate migrations.Options
	if cc := st.ClickHouseCluster; cc != nil {
		p.dsn = clusterDSN(cc)
		migrate = migrations.Options{Cluster: cc.Name, Sharded: cc.Shards > 1, DDLTimeout: demo.EmbeddedDDLTimeout}
	}
	t.Cleanup(func() {
		p.stopAll()
		if err := st.Close(); err != nil {
			t.Errorf("devstack: close: %v", err)
		}
	})
	p.openClickHouse()
	migrated := time.Now()
	if _, err := migrations.UpWith(ctx, p.ch, nil, migrate); err != nil {
		t.Fatal(err)
	}
	if migrate.Cluster != "" {
		t.Logf("migrated ON CLUSTER %s (sharded: %t) in %s", migrate.Cluster, migrate.Sharded, time.Since(migrated).Round(time.Millisecond))
	}
	if p.rdb, err = stores.OpenRedis(ctx, st.RedisURL); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.rdb.Close() })
	if p.pub, err = ingest.NewPublisher(ingest.PublisherConfig{Brokers: st.KafkaBrokers, MaxAttempts: 30}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.pub.Close() })

	var corpus bytes.Buffer
	began := time.Now()
	p.expected, err = gen.Generate(gen.Config{Events: events, Seed: seed, End: time.Now().UTC().Truncate(time.Hour)}, &corpus)
	if err != nil {
		t.Fatal(err)
	}
	p.split(corpus.Bytes(), nParts)
	t.Logf("generated %d lines (seed %d, %d duplicates, %d malformed) in %s; %d parts",
		p.expected.Corpus.Lines, seed, p.expected.Corpus.Duplicates, p.expected.Corpus.Malformed,
		time.Since(began).Round(time.Millisecond), nParts)
	return p
}

// clusterDSN is the DSN of every replica of the cluster's first shard, in host order:
// clickhouse-go dials them in that order, so a process reaches the first that answers.
func clusterDSN(cc *stack.ClickHouseCluster) string {
	var addrs []string
	for _, h := range cc.Hosts {
		if h.Shard == 1 {
			addrs = append(addrs, "127.0.0.1:"+strconv.Itoa(h.TCPPort))
		}
	}
	return "clickhouse://default@" + strings.Join(addrs, ",") + "/default?dial_timeout=5s"
}

// split cuts the corpus into n parts of (nearly) equal line counts and counts the distinct
// valid events each prefix holds, which the stored-row thresholds are drawn from.
func (p *pipeline) split(corpus []byte, n int) {
	lines := bytes.SplitAfter(corpus, []byte("\n"))
	if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	seen := map[[16]byte]bool{}
	var valid int64
	for i := range n {
		from, to := i*len(lines)/n, (i+1)*len(lines)/n
		p.parts = append(p.parts, bytes.Join(lines[from:to], nil))
		for _, l := range lines[from:to] {
			if ev, err := ingest.Parse(bytes.TrimSpace(l)); err == nil && !seen[ev.UUID] {
				seen[ev.UUID] = true
				valid++
			}
		}
		p.validUpTo = append(p.validUpTo, valid)
	}
}

// publishNext publishes the next part of the corpus (its malformed lines to the dead-letter
// topic, as `mcpulse publish` does; each part under its own name, so their dead-letter ids
// differ).
func (p *pipeline) publishNext() {
	p.t.Helper()
	i := p.published
	name := fmt.Sprintf("events.part%02d.jsonl", i)
	if _, err := ingest.PublishFile(p.ctx, p.pub, bytes.NewReader(p.parts[i]), name, nil); err != nil {
		p.t.Fatalf("publishing %s: %v", name, err)
	}
	p.published++
}

// threshold is a stored-row count inside part i: the distinct valid events before it plus a
// share of its own drawn from rng in [0.1, 0.9). Raw rows (re-inserts included) reach it once
// that share of part i is stored, so a fault at the threshold lands while part i is consumed.
func (p *pipeline) threshold(rng *rand.Rand, i int) int64 {
	var before int64
	if i > 0 {
		before = p.validUpTo[i-1]
	}
	return before + int64((0.1+0.8*rng.Float64())*float64(p.validUpTo[i]-before))
}

// openClickHouse (re)opens the test's ClickHouse connection; after a ClickHouse restart the
// old pool holds dead connections.
func (p *pipeline) openClickHouse() {
	p.t.Helper()
	if p.ch != nil {
		p.ch.Close()
	}
	ch, err := stores.OpenClickHouse(p.ctx, p.dsn)
	if err != nil {
		p.t.Fatal(err)
	}
	p.ch = ch
	p.t.Cleanup(func() { ch.Close() })
}

// rows is the number of raw rows in tool_calls and recruitment_events, re-inserted rows
// included (no FINAL): it grows with every batch a member stores, so it measures progress.
func (p *pipeline) rows() (int64, error) {
	var n uint64
	err := p.ch.QueryRow(p.ctx, "SELECT (SELECT count() FROM mcpulse.tool_calls) + (SELECT count() FROM mcpulse.recruitment_events)").Scan(&n)
	return int64(n), err
}

// waitRows polls until rows() satisfies ok and returns the count; it fails the test after
// stepTimeout, or when a member exits on its own.
func (p *pipeline) waitRows(what string, ok func(int64) bool) int64 {
	p.t.Helper()
	deadline := time.Now().Add(stepTimeout)
	var last int64
	for {
		p.checkMembers()
		n, err := p.rows()
		if err == nil {
			if ok(n) {
				return n
			}
			last = n
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("waiting for %s: still %d rows after %s (last error %v)%s", what, last, stepTimeout, err, p.logTails())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// resumed waits for the row count to grow past its value now and returns how long that took
// from since (when the store or broker was back). Every increase after since is the consumer
// storing again: nothing could be stored while the store was down, and the members have a
// backlog (a part published during the fault), so the first increase is the resumption, or
// one batch after it (an upper bound).
func (p *pipeline) resumed(since time.Time) time.Duration {
	p.t.Helper()
	var base int64
	deadline := time.Now().Add(stepTimeout)
	for {
		n, err := p.rows()
		if err == nil {
			base = n
			break
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("counting rows after the store returned: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.waitRows(fmt.Sprintf("consumption to resume past %d rows", base), func(n int64) bool { return n > base })
	return time.Since(since)
}

// groupLag returns the partitions the consumer group has not committed to their end, as
// "topic/partition" → messages behind. It asks the broker directly: a consumers.Consumer
// would do it too, but its kafka-go Reader joins the group when created and would hold
// partitions without consuming them.
func (p *pipeline) groupLag(ctx context.Context) (map[string]int64, error) {
	client := &kafka.Client{Addr: kafka.TCP(p.stack.KafkaBrokers...), Timeout: 10 * time.Second}
	topics := []string{ingest.TopicToolCalls, ingest.TopicRecruitment, ingest.TopicDeadLetters, ingest.TopicAudit}
	meta, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: topics})
	if err != nil {
		return nil, err
	}
	parts := map[string][]int{}
	ends := map[string][]kafka.OffsetRequest{}
	for _, t := range meta.Topics {
		if t.Error != nil {
			return nil, t.Error
		}
		for _, pt := range t.Partitions {
			parts[t.Name] = append(parts[t.Name], pt.ID)
			ends[t.Name] = append(ends[t.Name], kafka.LastOffsetOf(pt.ID))
		}
	}
	committed, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: consumers.DefaultGroupID, Topics: parts})
	if err != nil {
		return nil, err
	}
	if committed.Error != nil {
		return nil, committed.Error
	}
	at := map[string]int64{}
	for topic, ps := range committed.Topics {
		for _, pt := range ps {
			if pt.Error != nil {
				return nil, pt.Error
			}
			at[fmt.Sprintf("%s/%d", topic, pt.Partition)] = max(pt.CommittedOffset, 0)
		}
	}
	listed, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: ends})
	if err != nil {
		return nil, err
	}
	lag := map[string]int64{}
	for topic, ps := range listed.Topics {
		for _, pt := range ps {
			if pt.Error != nil {
				return nil, pt.Error
			}
			key := fmt.Sprintf("%s/%d", topic, pt.Partition)
			if behind := pt.LastOffset - max(at[key], pt.FirstOffset); behind > 0 {
				lag[key] = behind
			}
		}
	}
	return lag, nil
}

// waitCommitted waits until the group has committed every partition to its end, checking the
// members meanwhile; past deadline the test fails, saying the group did not do what within
// stepTimeout.
func (p *pipeline) waitCommitted(deadline time.Time, what string) {
	p.t.Helper()
	for {
		p.checkMembers()
		lag, err := p.groupLag(p.ctx)
		if err == nil && len(lag) == 0 {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("the group did not %s within %s (last error %v)%s", what, stepTimeout, err, p.logTails())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// drain waits until the group has committed every partition to its end, then stops every
// running member with SIGTERM (each must exit 0).
func (p *pipeline) drain() {
	p.t.Helper()
	p.waitCommitted(time.Now().Add(stepTimeout), "drain")
	for _, m := range p.members {
		if !m.exited() {
			p.stop(m)
		}
	}
}

// verify compares every figure the stores hold with the corpus's expected outcome (the
// comparison `mcpulse demo` makes), seals every closed hour as the scheduler's seal job does
// and compares them again (readers then take those hours from the sealed cells), and checks
// the members' logs (checkLogs, whose message counts it returns).
func (p *pipeline) verify() map[string]int {
	p.t.Helper()
	p.compare("as consumed")
	if sealed := p.seal(); sealed == 0 {
		p.t.Errorf("the seal after the run sealed no hour; the readers' sealed cells go unchecked")
	}
	p.compare("once every closed hour is sealed")
	// The comparison is only as strong as the corpus: it must exercise every part.
	if p.expected.Corpus.Duplicates == 0 || p.expected.Corpus.Malformed == 0 || len(p.expected.Suppression) == 0 ||
		len(p.expected.Funnel) == 0 || len(p.expected.IgnoredKeys) == 0 || len(p.expected.GateReasons) == 0 {
		p.t.Errorf("the corpus lacks duplicates, malformed lines, suppression records or rollup rows")
	}
	counts := p.checkLogs()
	summary := map[string]int{}
	for msg, n := range counts {
		if strings.HasPrefix(msg, "kafka reader: ") {
			msg = "kafka reader: (any)" // their texts name partitions and offsets
		}
		summary[msg] += n
	}
	p.t.Logf("member log messages: %v", summary)
	return counts
}

// compare reports every difference between the stores and the corpus's expected outcome, and
// every rollup that differs from its recomputation from the raw tables, each prefixed by when.
func (p *pipeline) compare(when string) {
	p.t.Helper()
	observed, err := report.Observe(p.ctx, p.ch, p.rdb)
	if err != nil {
		p.t.Fatal(err)
	}
	mismatches := outcome.Compare(p.expected, observed, time.Now())
	for i, m := range mismatches {
		if i == 40 {
			p.t.Errorf("%s: ... and %d more mismatches", when, len(mismatches)-i)
			break
		}
		p.t.Errorf("%s: %s", when, m)
	}
	// Every rollup the generator does not predict must equal its recomputation from the raw
	// tables.
	rollupMismatches, err := report.RollupMismatches(p.ctx, p.ch)
	if err != nil {
		p.t.Fatal(err)
	}
	for i, m := range rollupMismatches {
		if i == 20 {
			p.t.Errorf("%s: ... and %d more rollup mismatches", when, len(rollupMismatches)-i)
			break
		}
		p.t.Errorf("%s: %s", when, m)
	}
	if len(mismatches) == 0 {
		p.t.Logf("%s: stores equal the expected outcome: %v rows by table, %d suppression records, %d funnel, %d ignored-key, %d gate-reason rows",
			when, observed.Tables, len(observed.Suppression), len(observed.Funnel), len(observed.IgnoredKeys), len(observed.GateReasons))
	}
}

// seal seals the closed hours that need it now, as the scheduler's seal job does, and returns
// how many it sealed.
func (p *pipeline) seal() int {
	p.t.Helper()
	res, err := rollup.SealClosedHours(p.ctx, p.ch, time.Now())
	if err != nil {
		p.t.Fatal(err)
	}
	return len(res.Hours)
}

// member is one `mcpulse consume` process.
type member struct {
	name     string
	cmd      *exec.Cmd
	logPath  string
	done     chan struct{}
	waitErr  error
	stopping bool // the test killed or stopped it: an exit is expected
}

// start runs a new member of the consumer group with JSON logs in its own file.
func (p *pipeline) start() *member {
	p.t.Helper()
	return p.startWith(nil, nil)
}

// startWith is start with extra arguments of `mcpulse consume` and extra environment.
func (p *pipeline) startWith(args, env []string) *member {
	p.t.Helper()
	p.started++
	m := &member{name: fmt.Sprintf("member-%02d", p.started), done: make(chan struct{})}
	m.logPath = filepath.Join(p.dir, m.name+".log")
	logf, err := os.Create(m.logPath)
	if err != nil {
		p.t.Fatal(err)
	}
	defer logf.Close()
	m.cmd = exec.Command(binary, append([]string{"consume", "--log-format", "json", "--session-timeout", sessionTimeout.String(),
		"--batch-size", strconv.Itoa(memberBatchSize)}, args...)...)
	// The last of a variable's values wins (os/exec): env overrides the DSN, which overrides
	// the stack's.
	m.cmd.Env = append(append(append(os.Environ(), p.stack.Env()...), stack.EnvClickHouseDSN+"="+p.dsn), env...)
	m.cmd.Stdout, m.cmd.Stderr = logf, logf
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // dies with the test
	if err := m.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	go func() {
		m.waitErr = m.cmd.Wait()
		close(m.done)
	}()
	p.members = append(p.members, m)
	return m
}

func (m *member) exited() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// kill SIGKILLs m and waits for it to die: no LeaveGroup, no flush, nothing.
func (p *pipeline) kill(m *member) {
	p.t.Helper()
	m.stopping = true
	_ = m.cmd.Process.Signal(syscall.SIGKILL)
	<-m.done
}

// stop sends SIGTERM (the member leaves the group) and requires exit status 0 within 30 s.
func (p *pipeline) stop(m *member) {
	p.t.Helper()
	m.stopping = true
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.done
		p.t.Errorf("%s ignored SIGTERM for 30s%s", m.name, p.logTails())
		return
	}
	if m.waitErr != nil {
		p.t.Errorf("%s exited with %v after SIGTERM%s", m.name, m.waitErr, p.logTails())
	}
}

// stopAll kills whatever still runs (cleanup after a failure).
func (p *pipeline) stopAll() {
	for _, m := range p.members {
		if !m.exited() {
			m.stopping = true
			_ = m.cmd.Process.Kill()
			<-m.done
		}
	}
}

// checkMembers fails the test when a member exited without being told to.
func (p *pipeline) checkMembers() {
	p.t.Helper()
	for _, m := range p.members {
		if !m.stopping && m.exited() {
			m.stopping = true
			p.t.Fatalf("%s exited on its own: %v%s", m.name, m.waitErr, p.logTails())
		}
	}
}

// logTails returns the last lines of every member's log, the group's members and its lag,
// for failure messages.
func (p *pipeline) logTails() string {
	var b strings.Builder
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	client := &kafka.Client{Addr: kafka.TCP(p.stack.KafkaBrokers...)}
	groups, err := client.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{consumers.DefaultGroupID}})
	if err != nil {
		fmt.Fprintf(&b, "\n--- group: %v", err)
	} else {
		for _, g := range groups.Groups {
			fmt.Fprintf(&b, "\n--- group %s: state %s, error %v", g.GroupID, g.GroupState, g.Error)
			for _, m := range g.Members {
				fmt.Fprintf(&b, "\n  member %s %s: %v", m.MemberID, m.ClientHost, m.MemberAssignments.Topics)
			}
		}
	}
	if lag, err := p.groupLag(ctx); err != nil {
		fmt.Fprintf(&b, "\n--- lag: %v", err)
	} else {
		fmt.Fprintf(&b, "\n--- lag: %v", lag)
	}
	for _, m := range p.members {
		data, _ := os.ReadFile(m.logPath)
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > 8 {
			lines = lines[len(lines)-8:]
		}
		fmt.Fprintf(&b, "\n--- %s (%s) ---\n%s", m.name, m.logPath, strings.Join(lines, "\n"))
	}
	return b.String()
}

// lossWords are what a log message reporting data loss would say.
var lossWords = regexp.MustCompile(`(?i)\b(lost|loss|losing|dropped|discarded|skipped)\b`)

// checkLogs holds every member's log to what a fault may produce. The consumer reports a
// store outage or a failed commit at WARN and retries (DESIGN §5: an outage pauses
// consumption and loses nothing), so the assertion is:
//   - every line is a JSON log record (a panic or an unexpected exit message is not);
//   - no record is at ERROR level: nothing the consumer gave up on;
//   - no record's message speaks of lost, dropped, discarded or skipped data. Only the
//     message is checked, the consumer's own words; "err" attributes quote the drivers
//     (e.g. "connection reset"), which describe the fault, not the data.
//
// It returns how many records each message had across all members.
func (p *pipeline) checkLogs() map[string]int {
	p.t.Helper()
	counts := map[string]int{}
	for _, m := range p.members {
		f, err := os.Open(m.logPath)
		if err != nil {
			p.t.Error(err)
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for n := 1; sc.Scan(); n++ {
			line := sc.Bytes()
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			var rec struct {
				Level string `json:"level"`
				Msg   string `json:"msg"`
			}
			if err := json.Unmarshal(line, &rec); err != nil {
				p.t.Errorf("%s:%d is not a JSON log record: %q", m.logPath, n, line)
				continue
			}
			counts[rec.Msg]++
			if rec.Level == "ERROR" {
				p.t.Errorf("%s:%d logged an error: %s", m.logPath, n, line)
			}
			if lossWords.MatchString(rec.Msg) {
				p.t.Errorf("%s:%d reports lost data: %s", m.logPath, n, line)
			}
		}
		if err := sc.Err(); err != nil {
			p.t.Error(err)
		}
		f.Close()
	}
	return counts
}

// records returns the members' log lines whose message is one of msgs, in log order per
// member, prefixed with the member's name.
func (p *pipeline) records(msgs ...string) []string {
	var out []string
	for _, m := range p.members {
		data, err := os.ReadFile(m.logPath)
		if err != nil {
			continue
		}
		for line := range strings.SplitSeq(string(data), "\n") {
			var rec struct {
				Msg string `json:"msg"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && slices.Contains(msgs, rec.Msg) {
				out = append(out, m.name+": "+line)
			}
		}
	}
	return out
}

// keepLogsOnFailure copies the members' logs of a failed test out of its temporary
// directory, which the testing package removes, and says where.
func (p *pipeline) keepLogsOnFailure() {
	if !p.t.Failed() || len(p.members) == 0 {
		return
	}
	dir, err := os.MkdirTemp("", "mcpulse-faults-"+p.t.Name()+"-")
	if err != nil {
		p.t.Logf("keeping the member logs: %v", err)
		return
	}
	for _, m := range p.members {
		if data, err := os.ReadFile(m.logPath); err == nil {
			_ = os.WriteFile(filepath.Join(dir, filepath.Base(m.logPath)), data, 0o644)
		}
	}
	p.t.Logf("member logs kept in %s", dir)
}
