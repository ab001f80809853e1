package deploy_test

import (
	"context"
	"encoding/xml"
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

// root is the repository root (this package is testkit/deploy).
const root = "../.."

// binary is the mcpulse binary built once by TestMain, whose --help output tells which
// subcommands and flags exist.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mcpulse-deploy-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "mcpulse")
	build := exec.Command("go", "build", "-o", binary, "./cmd/mcpulse")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build ./cmd/mcpulse: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// testEnv is the only environment the compose file is interpolated with: never the test
// process's own, so a variable set on the machine cannot change what is checked.
var testEnv = []string{"MCPULSE_API_KEYS=phc_test", "MCPULSE_DASHBOARDS_TOKEN=dash-token"}

func load(t *testing.T, env []string) (*types.Project, error) {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{filepath.Join(root, "docker-compose.yml")},
		cli.WithName("mcpulse"),
		cli.WithWorkingDirectory(root),
		cli.WithEnv(env),
		cli.WithInterpolation(true),
	)
	if err != nil {
		t.Fatal(err)
	}
	return opts.LoadProject(context.Background())
}

func project(t *testing.T) *types.Project {
	t.Helper()
	p, err := load(t, testEnv)
	if err != nil {
		t.Fatalf("loading docker-compose.yml: %v", err)
	}
	return p
}

// expectation is what docker-compose.yml promises about one service.
type expectation struct {
	dependsOn map[string]string // service → condition
	ports     []string          // "published:target"
	volumes   map[string]string // named volume → mount target
	replicas  int               // 0: not set (one)
	// mcpulse services: the subcommand, and the port the health check asks (the service's
	// --listen or --metrics-listen port).
	subcommand  string
	healthPort  string
	healthCheck bool
}

// The three Kafka brokers, the three ClickHouse Keeper nodes and the two ClickHouse replicas
// every service that reads or writes them waits for.
var (
	kafkaHealthy = map[string]string{"kafka-1": types.ServiceConditionHealthy, "kafka-2": types.ServiceConditionHealthy,
		"kafka-3": types.ServiceConditionHealthy}
	keeperHealthy = map[string]string{"clickhouse-keeper-1": types.ServiceConditionHealthy,
		"clickhouse-keeper-2": types.ServiceConditionHealthy, "clickhouse-keeper-3": types.ServiceConditionHealthy}
	clickhouseHealthy = map[string]string{"clickhouse-1": types.ServiceConditionHealthy, "clickhouse-2": types.ServiceConditionHealthy}
	migrated          = map[string]string{"migrate": types.ServiceConditionCompletedSuccessfully}
	redisHealthy      = map[string]string{"redis": types.ServiceConditionHealthy}
)

// union merges dependency maps.
func union(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out
}

var expected = map[string]expectation{
	"kafka-1":             {ports: []string{"29092:29092"}, volumes: map[string]string{"kafka-1-data": "/var/lib/kafka/data"}, healthCheck: true},
	"kafka-2":             {ports: []string{"29093:29093"}, volumes: map[string]string{"kafka-2-data": "/var/lib/kafka/data"}, healthCheck: true},
	"kafka-3":             {ports: []string{"29094:29094"}, volumes: map[string]string{"kafka-3-data": "/var/lib/kafka/data"}, healthCheck: true},
	"redis":               {volumes: map[string]string{"redis-data": "/data"}, healthCheck: true},
	"clickhouse-keeper-1": {volumes: map[string]string{"clickhouse-keeper-1-data": "/var/lib/clickhouse-keeper"}, healthCheck: true},
	"clickhouse-keeper-2": {volumes: map[string]string{"clickhouse-keeper-2-data": "/var/lib/clickhouse-keeper"}, healthCheck: true},
	"clickhouse-keeper-3": {volumes: map[string]string{"clickhouse-keeper-3-data": "/var/lib/clickhouse-keeper"}, healthCheck: true},
	"clickhouse-1":        {dependsOn: keeperHealthy, volumes: map[string]string{"clickhouse-1-data": "/var/lib/clickhouse"}, healthCheck: true},
	"clickhouse-2":        {dependsOn: keeperHealthy, volumes: map[string]string{"clickhouse-2-data": "/var/lib/clickhouse"}, healthCheck: true},
	"migrate":             {dependsOn: clickhouseHealthy, subcommand: "migrate up"},
	"gateway": {dependsOn: kafkaHealthy,
		ports: []string{"8080:8080"}, subcommand: "gateway", healthPort: "8080", healthCheck: true},
	"consume": {dependsOn: union(kafkaHealthy, redisHealthy, clickhouseHealthy, migrated),
		replicas: 2, subcommand: "consume", healthPort: "9100", healthCheck: true},
	"scheduler": {dependsOn: union(redisHealthy, clickhouseHealthy, migrated),
		subcommand: "scheduler", healthPort: "9100", healthCheck: true},
	"dashboards": {dependsOn: union(clickhouseHealthy, migrated),
		ports: []string{"8081:8080"}, subcommand: "dashboards", healthPort: "8080", healthCheck: true},
}

func TestComposeRunsEveryPromisedService(t *testing.T) {
	p := project(t)
	if p.Name != "mcpulse" {
		t.Errorf("project name %q, want mcpulse", p.Name)
	}
	var names []string
	for name := range p.Services {
		names = append(names, name)
	}
	slices.Sort(names)
	var want []string
	for name := range expected {
		want = append(want, name)
	}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("services %v, want %v", names, want)
	}
	for name, exp := range expected {
		t.Run(name, func(t *testing.T) {
			checkService(t, p, p.Services[name], exp)
		})
	}
}

func checkService(t *testing.T, p *types.Project, s types.ServiceConfig, exp expectation) {
	deps := map[string]string{}
	for dep, d := range s.DependsOn {
		deps[dep] = d.Condition
		if _, ok := p.Services[dep]; !ok {
			t.Errorf("depends on %s, which is not a service", dep)
		}
	}
	if fmt.Sprint(deps) != fmt.Sprint(nonNil(exp.dependsOn)) {
		t.Errorf("depends_on %v, want %v", deps, exp.dependsOn)
	}

	var ports []string
	for _, port := range s.Ports {
		ports = append(ports, port.Published+":"+fmt.Sprint(port.Target))
	}
	if !slices.Equal(ports, exp.ports) {
		t.Errorf("ports %v, want %v", ports, exp.ports)
	}

	vols := map[string]string{}
	for _, v := range s.Volumes {
		if v.Type != types.VolumeTypeVolume {
			t.Errorf("mount %s is a %s, want a named volume", v.Target, v.Type)
			continue
		}
		if _, declared := p.Volumes[v.Source]; !declared {
			t.Errorf("volume %s is not declared under volumes:", v.Source)
		}
		vols[v.Source] = v.Target
	}
	if fmt.Sprint(vols) != fmt.Sprint(nonNil(exp.volumes)) {
		t.Errorf("volumes %v, want %v", vols, exp.volumes)
	}

	replicas := 0
	if s.Deploy != nil && s.Deploy.Replicas != nil {
		replicas = *s.Deploy.Replicas
	}
	if replicas != exp.replicas {
		t.Errorf("replicas %d, want %d", replicas, exp.replicas)
	}

	hc := s.HealthCheck
	if exp.healthCheck != (hc != nil && len(hc.Test) > 0 && !hc.Disable) {
		t.Errorf("health check %+v, want one: %v", hc, exp.healthCheck)
	}
	if hc != nil && hc.Interval == nil {
		t.Errorf("health check without an interval")
	}

	if exp.subcommand == "" {
		if s.Build != nil {
			t.Errorf("infrastructure service built from the repository")
		}
		return
	}
	// An mcpulse service: the image built from the repository, a real subcommand with real
	// flags, its health checked through the binary (the image has no curl).
	if s.Build == nil || filepath.Clean(s.Build.Context) != mustAbs(t, root) {
		t.Errorf("build %+v, want the repository root", s.Build)
	}
	sub := strings.Fields(exp.subcommand)
	if !slices.Equal([]string(s.Command[:min(len(sub), len(s.Command))]), sub) {
		t.Fatalf("command %v, want it to start with %v", s.Command, sub)
	}
	checkFlags(t, sub, s.Command[len(sub):])
	for _, env := range []string{"MCPULSE_KAFKA_BROKERS", "MCPULSE_REDIS_URL", "MCPULSE_CLICKHOUSE_DSN"} {
		if v := s.Environment[env]; v == nil || *v == "" {
			t.Errorf("environment lacks %s", env)
		}
	}
	if exp.healthPort == "" {
		if s.Restart != "no" {
			t.Errorf("one-shot service restart %q, want \"no\"", s.Restart)
		}
		return
	}
	if s.Restart != "unless-stopped" {
		t.Errorf("restart %q, want unless-stopped", s.Restart)
	}
	if listen := flagValue(s.Command, "--listen", "--metrics-listen"); !strings.HasSuffix(listen, ":"+exp.healthPort) {
		t.Errorf("serves on %q, want port %s", listen, exp.healthPort)
	}
	if len(hc.Test) != 4 || hc.Test[0] != "CMD" || hc.Test[1] != "/mcpulse" || hc.Test[2] != "healthcheck" {
		t.Fatalf("health check %v, want [CMD /mcpulse healthcheck URL]", hc.Test)
	}
	u, err := url.Parse(hc.Test[3])
	if err != nil || u.Port() != exp.healthPort || u.Path != "/readyz" {
		t.Errorf("health check URL %q, want /readyz on port %s", hc.Test[3], exp.healthPort)
	}
	checkFlags(t, []string{"healthcheck"}, nil)
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// flagValue returns the value following the first of names in args.
func flagValue(args []string, names ...string) string {
	for i, a := range args {
		for _, n := range names {
			if a == n && i+1 < len(args) {
				return args[i+1]
			}
			if v, ok := strings.CutPrefix(a, n+"="); ok {
				return v
			}
		}
	}
	return ""
}

var helpFlagRE = regexp.MustCompile(`(?m)^\s+(?:-\w, )?(--[a-z0-9-]+)`)

// checkFlags runs `mcpulse SUB... --help` and checks that it is a subcommand (not the parent's
// help) and that every --flag of args is one of its flags.
func checkFlags(t *testing.T, sub, args []string) {
	t.Helper()
	out, err := exec.Command(binary, append(slices.Clone(sub), "--help")...).CombinedOutput()
	if err != nil {
		t.Fatalf("mcpulse %s --help: %v\n%s", strings.Join(sub, " "), err, out)
	}
	usage := "mcpulse " + strings.Join(sub, " ")
	if !strings.Contains(string(out), "Usage:\n  "+usage) {
		t.Fatalf("mcpulse %s is not a subcommand; --help said:\n%s", strings.Join(sub, " "), out)
	}
	known := map[string]bool{}
	for _, m := range helpFlagRE.FindAllStringSubmatch(string(out), -1) {
		known[m[1]] = true
	}
	for _, a := range args {
		if !strings.HasPrefix(a, "--") {
			continue
		}
		name, _, _ := strings.Cut(a, "=")
		if !known[name] {
			t.Errorf("mcpulse %s has no flag %s (flags: %v)", strings.Join(sub, " "), name, known)
		}
	}
}

func TestRedisKeepsEverySuppressionRecord(t *testing.T) {
	cmd := strings.Join(project(t).Services["redis"].Command, " ")
	for _, want := range []string{"--appendonly yes", "--maxmemory-policy noeviction"} {
		if !strings.Contains(cmd, want) {
			t.Errorf("redis command %q lacks %q", cmd, want)
		}
	}
}

// envOf returns service's environment variable name, "" when unset.
func envOf(s types.ServiceConfig, name string) string {
	if v := s.Environment[name]; v != nil {
		return *v
	}
	return ""
}

// Three KRaft brokers, each broker and controller, form one cluster: the same cluster id, node
// ids 1 to 3 that the quorum voters name at their own service, replication factor 3 with two
// replicas in sync required, every broker's log on its volume and its compose-network address
// advertised; every mcpulse service lists all three.
func TestKafkaIsThreeKRaftBrokersWithReplicationFactor3(t *testing.T) {
	p := project(t)
	var clusterIDs, addrs []string
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("kafka-%d", i)
		s := p.Services[name]
		for k, want := range map[string]string{
			"KAFKA_NODE_ID":                                  fmt.Sprint(i),
			"KAFKA_PROCESS_ROLES":                            "broker,controller",
			"KAFKA_CONTROLLER_QUORUM_VOTERS":                 "1@kafka-1:9093,2@kafka-2:9093,3@kafka-3:9093",
			"KAFKA_DEFAULT_REPLICATION_FACTOR":               "3",
			"KAFKA_MIN_INSYNC_REPLICAS":                      "2",
			"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR":         "3",
			"KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "3",
			"KAFKA_TRANSACTION_STATE_LOG_MIN_ISR":            "2",
			"KAFKA_UNCLEAN_LEADER_ELECTION_ENABLE":           "false",
			"KAFKA_NUM_PARTITIONS":                           "4",
			"KAFKA_LOG_DIRS":                                 "/var/lib/kafka/data",
		} {
			if v := envOf(s, k); v != want {
				t.Errorf("%s: %s = %q, want %q", name, k, v, want)
			}
		}
		if !strings.HasPrefix(s.Image, "apache/kafka:") {
			t.Errorf("%s: image %q, want apache/kafka", name, s.Image)
		}
		clusterIDs = append(clusterIDs, envOf(s, "CLUSTER_ID"))
		addr := name + ":9092"
		if !strings.Contains(envOf(s, "KAFKA_ADVERTISED_LISTENERS"), "PLAINTEXT://"+addr) {
			t.Errorf("%s: KAFKA_ADVERTISED_LISTENERS = %q, want PLAINTEXT://%s among them", name, envOf(s, "KAFKA_ADVERTISED_LISTENERS"), addr)
		}
		addrs = append(addrs, addr)
	}
	if clusterIDs[0] == "" || len(slices.Compact(clusterIDs)) != 1 {
		t.Errorf("CLUSTER_ID of the brokers %q, want one non-empty id", clusterIDs)
	}
	for name, s := range p.Services {
		if s.Build == nil {
			continue
		}
		if got := strings.Split(envOf(s, "MCPULSE_KAFKA_BROKERS"), ","); !slices.Equal(got, addrs) {
			t.Errorf("%s: MCPULSE_KAFKA_BROKERS lists %v, want %v", name, got, addrs)
		}
	}
}

// clickhouseConfig is what docker-compose.yml's ClickHouse configuration says about the
// cluster: the macros, the remote_servers clusters and the Keeper nodes.
type clickhouseConfig struct {
	Macros struct {
		Shard struct {
			FromEnv string `xml:"from_env,attr"`
		} `xml:"shard"`
		Replica struct {
			FromEnv string `xml:"from_env,attr"`
		} `xml:"replica"`
	} `xml:"macros"`
	RemoteServers struct {
		Clusters []struct {
			XMLName xml.Name
			Shards  []struct {
				InternalReplication bool `xml:"internal_replication"`
				Replicas            []struct {
					Host string `xml:"host"`
					Port string `xml:"port"`
				} `xml:"replica"`
			} `xml:"shard"`
		} `xml:",any"`
	} `xml:"remote_servers"`
	ZooKeeper []struct {
		Host string `xml:"host"`
		Port string `xml:"port"`
	} `xml:"zookeeper>node"`
	DDLPath string `xml:"distributed_ddl>path"`
}

// The ClickHouse replicas form the cluster `migrate up --cluster` names: one shard holding
// both replicas (replicated inserts, internal_replication), each with its own macros from its
// environment and its hostname the host the cluster lists, coordinated by the three Keeper
// services, whose Raft configuration names each of them once. The mcpulse services reach
// both replicas.
func TestClickHouseIsOneShardOfTwoReplicasOnThreeKeepers(t *testing.T) {
	p := project(t)
	cfgs := map[string]string{}
	for name, c := range p.Configs {
		cfgs[name] = c.Content
	}
	var ch clickhouseConfig
	if err := xml.Unmarshal([]byte(cfgs["clickhouse-cluster-config"]), &ch); err != nil {
		t.Fatalf("clickhouse-cluster-config: %v", err)
	}
	migrate := p.Services["migrate"].Command
	cluster := flagValue(migrate, "--cluster")
	if len(ch.RemoteServers.Clusters) != 1 || ch.RemoteServers.Clusters[0].XMLName.Local != cluster || cluster == "" {
		t.Fatalf("remote_servers %+v, want the one cluster migrate's --cluster names (%v)", ch.RemoteServers.Clusters, migrate)
	}
	shards := ch.RemoteServers.Clusters[0].Shards
	if len(shards) != 1 || !shards[0].InternalReplication || len(shards[0].Replicas) != 2 {
		t.Fatalf("cluster %s: %+v, want one shard of two replicas with internal_replication", cluster, shards)
	}
	if ch.Macros.Shard.FromEnv != "CLICKHOUSE_SHARD" || ch.Macros.Replica.FromEnv != "CLICKHOUSE_REPLICA" {
		t.Errorf("macros %+v, want shard and replica from CLICKHOUSE_SHARD and CLICKHOUSE_REPLICA", ch.Macros)
	}
	if ch.DDLPath == "" {
		t.Error("no distributed_ddl path: ON CLUSTER statements need one")
	}
	var replicas []string
	for _, r := range shards[0].Replicas {
		s, ok := p.Services[r.Host]
		if !ok || r.Port != "9000" {
			t.Errorf("replica %s:%s is not a service's native port", r.Host, r.Port)
			continue
		}
		if s.Hostname != r.Host || envOf(s, "CLICKHOUSE_REPLICA") != r.Host || envOf(s, "CLICKHOUSE_SHARD") != "1" {
			t.Errorf("%s: hostname %q, CLICKHOUSE_REPLICA %q, CLICKHOUSE_SHARD %q; want %s, %s, 1", r.Host, s.Hostname,
				envOf(s, "CLICKHOUSE_REPLICA"), envOf(s, "CLICKHOUSE_SHARD"), r.Host, r.Host)
		}
		if !slices.ContainsFunc(s.Configs, func(c types.ServiceConfigObjConfig) bool {
			return c.Source == "clickhouse-cluster-config" && strings.HasPrefix(c.Target, "/etc/clickhouse-server/config.d/")
		}) {
			t.Errorf("%s does not mount clickhouse-cluster-config into config.d", r.Host)
		}
		replicas = append(replicas, r.Host+":9000")
	}
	for name, s := range p.Services {
		if s.Build == nil {
			continue
		}
		u, err := url.Parse(envOf(s, "MCPULSE_CLICKHOUSE_DSN"))
		if err != nil || !slices.Equal(strings.Split(u.Host, ","), replicas) {
			t.Errorf("%s: MCPULSE_CLICKHOUSE_DSN %q, want the hosts %v", name, envOf(s, "MCPULSE_CLICKHOUSE_DSN"), replicas)
		}
	}

	var keeper struct {
		Port string `xml:"keeper_server>tcp_port"`
		ID   struct {
			FromEnv string `xml:"from_env,attr"`
		} `xml:"keeper_server>server_id"`
		Servers []struct {
			ID       string `xml:"id"`
			Hostname string `xml:"hostname"`
		} `xml:"keeper_server>raft_configuration>server"`
	}
	if err := xml.Unmarshal([]byte(cfgs["keeper-config"]), &keeper); err != nil {
		t.Fatalf("keeper-config: %v", err)
	}
	if len(keeper.Servers) != 3 || len(ch.ZooKeeper) != 3 {
		t.Fatalf("%d Keeper servers in the Raft configuration and %d in ClickHouse's zookeeper section, want 3 and 3", len(keeper.Servers), len(ch.ZooKeeper))
	}
	for i, srv := range keeper.Servers {
		s, ok := p.Services[srv.Hostname]
		if !ok || s.Hostname != srv.Hostname {
			t.Errorf("Keeper server %s names %s, which is not a service with that hostname", srv.ID, srv.Hostname)
			continue
		}
		if got := envOf(s, strings.TrimSpace(keeper.ID.FromEnv)); got != srv.ID {
			t.Errorf("%s: server id from %s = %q, want %s", srv.Hostname, keeper.ID.FromEnv, got, srv.ID)
		}
		if zk := ch.ZooKeeper[i]; zk.Host != srv.Hostname || zk.Port != keeper.Port {
			t.Errorf("ClickHouse's zookeeper node %d is %s:%s, want %s:%s", i, zk.Host, zk.Port, srv.Hostname, keeper.Port)
		}
	}
}

func TestCurrentClickHouse(t *testing.T) {
	for _, name := range []string{"clickhouse-1", "clickhouse-2"} {
		img := project(t).Services[name].Image
		tag, ok := strings.CutPrefix(img, "clickhouse/clickhouse-server:")
		if !ok || strings.HasPrefix(tag, "18.") || strings.HasPrefix(tag, "1") && len(tag) > 1 && tag[1] == '.' {
			t.Errorf("%s image %q, want a current clickhouse/clickhouse-server release", name, img)
		}
	}
}

// The secrets come from the operator's environment: without them the file does not load,
// rather than starting a gateway that accepts no key or dashboards open to anyone.
func TestSecretsAreRequired(t *testing.T) {
	for i, v := range testEnv {
		name, _, _ := strings.Cut(v, "=")
		env := slices.Delete(slices.Clone(testEnv), i, i+1)
		_, err := load(t, env)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("without %s: load error %v, want one naming it", name, err)
		}
	}
	p := project(t)
	if v := p.Services["gateway"].Environment["MCPULSE_API_KEYS"]; v == nil || *v != "phc_test" {
		t.Errorf("gateway MCPULSE_API_KEYS = %v, want the environment's phc_test", v)
	}
}

func TestImageRunsTheMcpulseBinary(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^ENTRYPOINT \["/mcpulse"\]$`).Match(data) {
		t.Errorf("Dockerfile has no ENTRYPOINT [\"/mcpulse\"]; the services' commands and health checks rely on it")
	}
}
