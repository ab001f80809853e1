package schemacheck

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func writeConfig(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ratchets.yaml")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadConfigExample(t *testing.T) {
	cfg, err := LoadConfig(filepath.Join("..", "ratchets.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Servers) != 3 {
		t.Fatalf("%d servers, want 3", len(cfg.Servers))
	}
	ph := cfg.Servers[0]
	maxOversized, minCoverage, inject := 44, 0.55, true
	want := ServerConfig{
		Name: "posthog", URL: "https://mcp.posthog.com/mcp", AuthHeaderEnv: "POSTHOG_MCP_TOKEN",
		Headers: map[string]string{"X-Team": "1"}, Schedule: "@every 6h", Timeout: 30 * time.Second, StoreServedSchemas: new(true),
		CharLimit: new(16384), MaxOversized: &maxOversized, MinNestedCoverage: &minCoverage, NameMaxLen: new(52),
		NameRule: new("posthog"), MaxTools: new(0), MaxToolChars: new(0), InjectContext: &inject, ContextDescription: new(""),
	}
	if !reflect.DeepEqual(ph, want) {
		t.Errorf("posthog = %+v\nwant %+v", ph, want)
	}
	s := ph.Settings()
	if s.ServerName != "posthog" || s.CharLimit != 16384 || *s.MaxOversized != 44 || *s.MinNestedCoverage != 0.55 ||
		s.NameMaxLen != 52 || !*s.InjectContext || s.ContextDescription != "" || s.MaxTools != 0 || s.MaxToolChars != 0 {
		t.Errorf("Settings() = %+v", s)
	}
	*s.MaxOversized = 1 // Settings owns its pointers
	if *ph.MaxOversized != 44 {
		t.Error("Settings() shares the config's pointers")
	}

	getenv := func(name string) string {
		if name == "POSTHOG_MCP_TOKEN" {
			return "phx_secret"
		}
		return ""
	}
	src, err := ph.Source(getenv)
	if err != nil {
		t.Fatal(err)
	}
	wantSrc := Source{URL: "https://mcp.posthog.com/mcp", Timeout: 30 * time.Second,
		Headers: map[string]string{"X-Team": "1", "Authorization": "Bearer phx_secret"}, Command: []string{}}
	if src.URL != wantSrc.URL || src.Timeout != wantSrc.Timeout || !reflect.DeepEqual(src.Headers, wantSrc.Headers) || len(src.Command) != 0 {
		t.Errorf("Source() = %+v, want %+v", src, wantSrc)
	}
	src.Headers["X-Team"] = "2"
	if ph.Headers["X-Team"] != "1" {
		t.Error("Source() shares the config's headers")
	}
	// The token is read at check time: unset is an error then, not at load time.
	if _, err := ph.Source(func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "$POSTHOG_MCP_TOKEN (auth_header_env) is not set") {
		t.Errorf("Source() without the token: err = %v", err)
	}
	if src, _ := ph.Source(func(string) string { return "Bearer already" }); src.Headers["Authorization"] != "Bearer already" {
		t.Errorf("Authorization = %q", src.Headers["Authorization"])
	}

	local := cfg.Servers[1]
	if !reflect.DeepEqual(local.Command, []string{"node", "dist/index.js", "--read-only"}) || local.URL != "" {
		t.Errorf("local = %+v", local)
	}
	src, err = local.Source(nil)
	if err != nil || !reflect.DeepEqual(src.Command, local.Command) || src.Headers != nil {
		t.Errorf("local Source() = %+v, %v", src, err)
	}
	if ls := local.Settings(); *ls.InjectContext || *ls.MaxOversized != 0 || *ls.MinNestedCoverage != 0.8 || ls.CharLimit != 0 {
		t.Errorf("local Settings() = %+v", ls)
	}
}

func TestLoadConfigTraffic(t *testing.T) {
	cfg, err := LoadConfig(filepath.Join("..", "ratchets.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tr := cfg.Servers[2]
	if tr.Traffic == nil || tr.Traffic.ServerName != "posthog" || tr.Traffic.ServerVersion != nil || tr.URL != "" {
		t.Fatalf("traffic server = %+v", tr)
	}
	if src := tr.Traffic.Source(); src.ServerName != "posthog" || src.ServerVersion != nil {
		t.Fatalf("Source() = %+v", src)
	}
	s := tr.Settings()
	if s.InjectContext == nil || *s.InjectContext || s.NameRule != NameRulePostHog || s.ServerName != "posthog-from-traffic" {
		t.Fatalf("traffic Settings() = %+v: snapshots are served schemas, nothing is injected", s)
	}
	if _, err := tr.Source(nil); err == nil {
		t.Fatal("Source() of a traffic server: no error")
	}
	// A traffic server's tools come from served_tool_schemas: nothing to store back.
	if tr.StoresServedSchemas() {
		t.Error("a traffic server stores served schemas")
	}
	for i, want := range map[int]bool{0: true, 1: false} { // the example's posthog (default) and my-local-server (off)
		if got := cfg.Servers[i].StoresServedSchemas(); got != want {
			t.Errorf("server %s: StoresServedSchemas() = %v, want %v", cfg.Servers[i].Name, got, want)
		}
	}
	pinned, err := LoadConfig(writeConfig(t, "servers:\n  - name: t\n    traffic: {server_name: s, server_version: \"\"}\n    name_rule: mcp\n"))
	if err != nil {
		t.Fatal(err)
	}
	if v := pinned.Servers[0].Traffic.ServerVersion; v == nil || *v != "" {
		t.Fatalf("server_version \"\" (a server that reports none) = %v", v)
	}
	if pinned.Servers[0].Settings().NameRule != NameRuleMCP {
		t.Fatal("name_rule mcp not applied")
	}
	_, err = LoadConfig(writeConfig(t, `servers:
  - name: t
    traffic: {}
    inject_context: true
    context_description: mine
    auth_header_env: TOKEN
    store_served_schemas: true
    name_rule: kebab
    char_limit: 0
    name_max_len: 0
  - name: u
    url: http://x/mcp
    traffic: {server_name: s}
`))
	for _, want := range []string{
		`:2: server "t": traffic: server_name is missing`,
		`:2: server "t": auth_header_env, headers and timeout apply to url servers only`,
		`:2: server "t": char_limit is 0: want a positive size`,
		`:2: server "t": name_rule is "kebab": want posthog`,
		`:2: server "t": name_max_len is 0: want a positive length`,
		`:2: server "t": inject_context does not apply to traffic`,
		`:2: server "t": context_description does not apply to traffic`,
		`:2: server "t": store_served_schemas applies to url and command servers only`,
		`:11: server "u": more than one source`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("problems %v lack %q", err, want)
		}
	}
}

func TestLoadConfigDefaults(t *testing.T) {
	cfg, err := LoadConfig(writeConfig(t, "servers:\n  - name: a\n    url: http://localhost:8080/mcp\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Servers[0].Settings()
	if s.MaxOversized != nil || s.MinNestedCoverage != nil || s.InjectContext != nil || s.CharLimit != 0 || s.ServerName != "a" {
		t.Errorf("Settings() = %+v, want the checker's defaults", s)
	}
	if src, err := cfg.Servers[0].Source(nil); err != nil || src.Headers != nil || src.Timeout != 0 {
		t.Errorf("Source() = %+v, %v", src, err)
	}
}

func TestLoadConfigProblems(t *testing.T) {
	// Every problem of the file is listed, with its line, sorted by line.
	path := writeConfig(t, `servers:
  - name: both
    url: http://x/mcp
    command: [node]
  - name: "bad name!"
    url: ftp://x
    schedule: "every day"
    char_limit: -1
    max_oversized: -2
    min_nested_coverage: 55
    timeout: -1s
  - url: http://x/mcp
    auth_header_env: 1TOKEN
    headers: {"Bad Header": "v", Authorization: "Bearer x"}
  - name: neither
    colour: blue
  - name: stdio
    command: [node]
    auth_header_env: TOKEN
  - name: dup
    url: http://x
  - name: dup
    url: http://y
    max_tools: many
`)
	_, err := LoadConfig(path)
	if err == nil {
		t.Fatal("no error")
	}
	want := []string{
		`:2: server "both": more than one source: give exactly one of url, command and traffic`,
		`:5: server "bad name!": name "bad name!": want letters, digits`,
		`:5: server "bad name!": url "ftp://x" is not an http(s) URL`,
		`:5: server "bad name!": schedule "every day": `,
		`:5: server "bad name!": timeout is -1s`,
		`:5: server "bad name!": char_limit is -1: want a positive size in characters (omit it for the default, 16384)`,
		`:5: server "bad name!": max_oversized is -2: want 0 or more`,
		`:5: server "bad name!": min_nested_coverage is 55: want a share between 0 and 1`,
		`:12: server #3: name is missing`,
		`:12: server #3: auth_header_env "1TOKEN" is not an environment variable name`,
		`:12: server #3: headers: Authorization is also set by auth_header_env: keep one`,
		`:12: server #3: headers: "Bad Header" is not an HTTP header name`,
		`:15: server "neither": no source: give exactly one of url, command and traffic`,
		`:16: field colour not found in type schemacheck.ServerConfig`,
		`:17: server "stdio": auth_header_env and headers apply to url servers only`,
		`:22: server "dup": the name is already used by the server at line 20`,
		"24: cannot unmarshal !!str `many` into int",
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d problems, want %d:\n%s", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], path) || !strings.Contains(lines[i], w) {
			t.Errorf("problem %d = %q, want %q", i, lines[i], w)
		}
	}

	for content, wantErr := range map[string]string{
		"":                   "empty file",
		"servers: []\n":      "no servers",
		"servers:\n  - {\n":  "yaml:",
		"serverz: []\n":      "field serverz not found",
		"servers: {a: 1}\n":  "cannot unmarshal",
		"# only a comment\n": "empty file",
	} {
		if _, err := LoadConfig(writeConfig(t, content)); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%q: err = %v, want %q", content, err, wantErr)
		}
	}
	if _, err := LoadConfig(filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing file: err = %v", err)
	}
}

// Header values name environment variables as --header does ($NAME, ${NAME}), read when the
// server is checked; an unset or empty one (like auth_header_env's) fails the check with an
// error naming each variable and the setting that reads it, before any request.
func TestHeaderValuesReadTheEnvironment(t *testing.T) {
	cfg, err := LoadConfig(writeConfig(t, `servers:
  - name: keyed
    url: http://x/mcp
    auth_header_env: MCP_TOKEN
    headers: {X-Team: "team-$TEAM", X-Api-Key: "${MCP_KEY}"}
`))
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Servers[0]
	wantNeeded := []EnvVar{{"MCP_TOKEN", "auth_header_env"}, {"MCP_KEY", "headers: X-Api-Key"}, {"TEAM", "headers: X-Team"}}
	if got := s.NeededEnv(); !reflect.DeepEqual(got, wantNeeded) {
		t.Fatalf("NeededEnv() = %v, want %v", got, wantNeeded)
	}
	env := map[string]string{"MCP_TOKEN": "t0k", "MCP_KEY": "k3y", "TEAM": "7"}
	getenv := func(k string) string { return env[k] }
	src, err := s.Source(getenv)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"Authorization": "Bearer t0k", "X-Api-Key": "k3y", "X-Team": "team-7"}
	if !reflect.DeepEqual(src.Headers, want) || s.Headers["X-Api-Key"] != "${MCP_KEY}" {
		t.Fatalf("Source().Headers = %v (config %v), want %v", src.Headers, s.Headers, want)
	}
	if err := s.MissingEnv(getenv); err != nil {
		t.Fatalf("MissingEnv with every variable set: %v", err)
	}

	delete(env, "MCP_KEY")
	env["TEAM"] = " "
	_, err = s.Source(getenv)
	var missing *MissingEnvError
	if !errors.As(err, &missing) || !reflect.DeepEqual(missing.Missing, wantNeeded[1:]) ||
		!strings.Contains(err.Error(), `server "keyed": $MCP_KEY (headers: X-Api-Key), $TEAM (headers: X-Team) are not set in the environment: no token to send`) {
		t.Fatalf("Source() without MCP_KEY and TEAM: %v", err)
	}
	if err := s.MissingEnv(getenv); err == nil || err.Error() != missing.Error() {
		t.Fatalf("MissingEnv() = %v, want the error Source gives", err)
	}

	_, err = LoadConfig(writeConfig(t, "servers:\n  - name: priced\n    url: http://x/mcp\n    headers: {X-Price: \"costs $5\"}\n"))
	if err == nil || !strings.Contains(err.Error(), `server "priced": headers: X-Price: $5 is not an environment variable name`) {
		t.Fatalf("a header value naming no variable: %v", err)
	}
}
