package deploy_test

import (
	"context"
	"fmt"
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

var expected = map[string]expectation{
	"kafka":      {ports: []string{"29092:29092"}, volumes: map[string]string{"kafka-data": "/var/lib/kafka/data"}, healthCheck: true},
	"redis":      {volumes: map[string]string{"redis-data": "/data"}, healthCheck: true},
	"clickhouse": {volumes: map[string]string{"clickhouse-data": "/var/lib/clickhouse"}, healthCheck: true},
	"migrate": {dependsOn: map[string]string{"clickhouse": types.ServiceConditionHealthy},
		subcommand: "migrate up"},
	"gateway": {dependsOn: map[string]string{"kafka": types.ServiceConditionHealthy},
		ports: []string{"8080:8080"}, subcommand: "gateway", healthPort: "8080", healthCheck: true},
	"consume": {dependsOn: map[string]string{"kafka": types.ServiceConditionHealthy, "redis": types.ServiceConditionHealthy,
		"clickhouse": types.ServiceConditionHealthy, "migrate": types.ServiceConditionCompletedSuccessfully},
		replicas: 2, subcommand: "consume", healthPort: "9100", healthCheck: true},
	"scheduler": {dependsOn: map[string]string{"redis": types.ServiceConditionHealthy, "clickhouse": types.ServiceConditionHealthy,
		"migrate": types.ServiceConditionCompletedSuccessfully},
		subcommand: "scheduler", healthPort: "9100", healthCheck: true},
	"dashboards": {dependsOn: map[string]string{"clickhouse": types.ServiceConditionHealthy, "migrate": types.ServiceConditionCompletedSuccessfully},
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

func TestKafkaIsOneKRaftBrokerWithItsLogOnTheVolume(t *testing.T) {
	env := project(t).Services["kafka"].Environment
	for k, want := range map[string]string{
		"KAFKA_PROCESS_ROLES":            "broker,controller",
		"KAFKA_CONTROLLER_QUORUM_VOTERS": "1@kafka:9093",
		"KAFKA_LOG_DIRS":                 "/var/lib/kafka/data",
	} {
		if v := env[k]; v == nil || *v != want {
			t.Errorf("%s = %v, want %q", k, v, want)
		}
	}
	if v := env["KAFKA_ADVERTISED_LISTENERS"]; v == nil || !strings.Contains(*v, "PLAINTEXT://kafka:9092") {
		t.Errorf("KAFKA_ADVERTISED_LISTENERS = %v, want the compose network's kafka:9092 among them", v)
	}
}

func TestCurrentClickHouse(t *testing.T) {
	img := project(t).Services["clickhouse"].Image
	tag, ok := strings.CutPrefix(img, "clickhouse/clickhouse-server:")
	if !ok || strings.HasPrefix(tag, "18.") || strings.HasPrefix(tag, "1") && len(tag) > 1 && tag[1] == '.' {
		t.Errorf("clickhouse image %q, want a current clickhouse/clickhouse-server release", img)
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
