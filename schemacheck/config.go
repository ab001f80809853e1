package schemacheck

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"gopkg.in/yaml.v3"
)

// Config is a ratchets.yaml file (see ratchets.example.yaml at the repository root): the MCP
// servers whose tool schemas are checked, and each one's ratchets.
type Config struct {
	Servers []ServerConfig `yaml:"servers"`
}

// ServerConfig is one server of ratchets.yaml. Nil limits mean the checker's defaults (or, for
// max_tools and max_tool_chars, no limit).
type ServerConfig struct {
	// Name identifies the server in reports, stored runs and locks; it is also the server name
	// clients prefix tool names with (mcp__<name>__tool).
	Name string `yaml:"name"`
	// URL is the Streamable HTTP endpoint; Command the argv of a stdio server; Traffic the
	// snapshots seen in traffic (LoadFromTraffic). Exactly one.
	URL     string         `yaml:"url"`
	Command []string       `yaml:"command"`
	Traffic *TrafficConfig `yaml:"traffic"`
	// AuthHeaderEnv names the environment variable whose value is sent as
	// "Authorization: Bearer <value>" (read when the server is checked, not when the file is
	// loaded). URL servers only.
	AuthHeaderEnv string `yaml:"auth_header_env"`
	// Headers are sent with every request. URL servers only. $NAME and ${NAME} in a value are
	// read from the environment when the server is checked (as for --header); an unset or
	// empty one fails the check (MissingEnvError).
	Headers map[string]string `yaml:"headers"`
	// Schedule is a cron spec (5 fields) or a descriptor such as "@every 6h" or "@daily";
	// empty means the scheduler's default.
	Schedule string `yaml:"schedule"`
	// Timeout bounds one listing of the server's tools; zero means DefaultTimeout.
	Timeout time.Duration `yaml:"timeout"`
	// StoreServedSchemas says whether each check that listed the server's tools also stores
	// them in served_tool_schemas under the server's serverInfo name and version
	// (StoreServedSchemas), where the consumer finds the schemas of calls traced without them.
	// Default (nil) true; url and command servers only.
	StoreServedSchemas *bool `yaml:"store_served_schemas"`

	CharLimit          *int     `yaml:"char_limit"`
	MaxOversized       *int     `yaml:"max_oversized"`
	MinNestedCoverage  *float64 `yaml:"min_nested_coverage"`
	NameRule           *string  `yaml:"name_rule"`
	NameMaxLen         *int     `yaml:"name_max_len"`
	MaxTools           *int     `yaml:"max_tools"`
	MaxToolChars       *int     `yaml:"max_tool_chars"`
	InjectContext      *bool    `yaml:"inject_context"`
	ContextDescription *string  `yaml:"context_description"`
}

// TrafficConfig is a ratchets.yaml `traffic:` source: the schemas a server served in the
// $mcp_tools_list events mcpulse received, checked with no access to the server.
type TrafficConfig struct {
	// ServerName is the server's name as the SDK reports it ($mcp_server_name).
	ServerName string `yaml:"server_name"`
	// ServerVersion pins one version ($mcp_server_version); absent means the version seen
	// most recently, so each run checks what the server serves now.
	ServerVersion *string `yaml:"server_version"`
}

// Source is the TrafficSource of this config.
func (t TrafficConfig) Source() TrafficSource {
	return TrafficSource{ServerName: t.ServerName, ServerVersion: clonePtr(t.ServerVersion)}
}

// Limits returns the server's ratchet settings as given, for LimitProblems and ApplyLimits.
func (s ServerConfig) Limits() Limits {
	return Limits{
		CharLimit: s.CharLimit, MaxOversized: s.MaxOversized, MinNestedCoverage: s.MinNestedCoverage,
		NameRule: s.NameRule, NameMaxLen: s.NameMaxLen, MaxTools: s.MaxTools, MaxToolChars: s.MaxToolChars,
		InjectContext: s.InjectContext, ContextDescription: s.ContextDescription,
	}
}

// serverNameRE is what a server name may be: it ends up in Redis keys, ClickHouse rows and
// client-side tool name prefixes.
var serverNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// envNameRE is a POSIX environment variable name.
var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// LoadConfig reads and validates a ratchets.yaml. Every problem found is listed (the error is
// an errors.Join of one error per problem, each naming the file and line); unknown fields are
// problems. A missing auth_header_env variable is not: it is read by Source, at check time.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("schemacheck: ratchets config: %w", err)
	}
	return parseConfig(path, data)
}

func parseConfig(path string, data []byte) (*Config, error) {
	type lineProblem struct {
		line int
		msg  string
	}
	var problems []lineProblem
	problem := func(line int, format string, args ...any) {
		problems = append(problems, lineProblem{line, fmt.Sprintf(format, args...)})
	}
	joined := func() error {
		sort.SliceStable(problems, func(i, j int) bool { return problems[i].line < problems[j].line })
		errs := make([]error, len(problems))
		for i, p := range problems {
			where := path
			if p.line > 0 {
				where = fmt.Sprintf("%s:%d", path, p.line)
			}
			errs[i] = fmt.Errorf("%s: %s", where, p.msg)
		}
		return errors.Join(errs...)
	}

	// The node tree gives each server's line for the messages below.
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("schemacheck: %s: %w", path, err)
	}
	serverLines := map[int]int{}
	if len(doc.Content) == 1 && doc.Content[0].Kind == yaml.MappingNode {
		root := doc.Content[0]
		for i := 0; i+1 < len(root.Content); i += 2 {
			if root.Content[i].Value == "servers" && root.Content[i+1].Kind == yaml.SequenceNode {
				for j, item := range root.Content[i+1].Content {
					serverLines[j] = item.Line
				}
			}
		}
	}

	var cfg Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		var typeErr *yaml.TypeError
		switch {
		case errors.As(err, &typeErr):
			// The decoder went on past these: the rest is still checked below.
			for _, e := range typeErr.Errors {
				line := 0
				if n, err := fmt.Sscanf(e, "line %d:", &line); n == 1 && err == nil {
					e = strings.TrimSpace(e[strings.Index(e, ":")+1:])
				}
				problem(line, "%s", e)
			}
		case err.Error() == "EOF":
			problem(0, "empty file: want a servers: list")
			return nil, joined()
		default:
			return nil, fmt.Errorf("schemacheck: %s: %w", path, err)
		}
	}
	if len(cfg.Servers) == 0 && len(problems) == 0 {
		problem(0, "no servers: want a servers: list with at least one server")
	}
	seen := map[string]int{}
	for i, s := range cfg.Servers {
		line := serverLines[i]
		label := fmt.Sprintf("server #%d", i+1)
		if s.Name != "" {
			label = fmt.Sprintf("server %q", s.Name)
		}
		for _, p := range s.validate() {
			problem(line, "%s: %s", label, p)
		}
		if s.Name != "" {
			if prev, dup := seen[s.Name]; dup {
				problem(line, "%s: the name is already used by the server at line %d", label, prev)
			} else {
				seen[s.Name] = line
			}
		}
	}
	if len(problems) > 0 {
		return nil, joined()
	}
	return &cfg, nil
}

// validate lists the server's problems.
func (s ServerConfig) validate() []string {
	var p []string
	switch {
	case s.Name == "":
		p = append(p, "name is missing")
	case !serverNameRE.MatchString(s.Name):
		p = append(p, fmt.Sprintf("name %q: want letters, digits, '.', '_' and '-' (at most 64, starting with a letter or digit)", s.Name))
	}
	sources := 0
	for _, given := range []bool{s.URL != "", len(s.Command) > 0, s.Traffic != nil} {
		if given {
			sources++
		}
	}
	switch {
	case sources == 0:
		p = append(p, "no source: give exactly one of url, command and traffic")
	case sources > 1:
		p = append(p, "more than one source: give exactly one of url, command and traffic")
	case s.Traffic != nil:
		if s.Traffic.ServerName == "" {
			p = append(p, "traffic: server_name is missing (the server's name as the MCP SDK reports it, $mcp_server_name)")
		}
		if s.AuthHeaderEnv != "" || len(s.Headers) > 0 || s.Timeout != 0 {
			p = append(p, "auth_header_env, headers and timeout apply to url servers only (traffic is read from ClickHouse)")
		}
		if s.StoreServedSchemas != nil {
			p = append(p, "store_served_schemas applies to url and command servers only (traffic is read from served_tool_schemas)")
		}
	case s.URL != "":
		if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p = append(p, fmt.Sprintf("url %q is not an http(s) URL", s.URL))
		}
	default:
		if s.Command[0] == "" {
			p = append(p, "command: the program (its first element) is empty")
		}
		if s.AuthHeaderEnv != "" || len(s.Headers) > 0 {
			p = append(p, "auth_header_env and headers apply to url servers only (a stdio server gets its secrets from its own environment)")
		}
	}
	if s.AuthHeaderEnv != "" && !envNameRE.MatchString(s.AuthHeaderEnv) {
		p = append(p, fmt.Sprintf("auth_header_env %q is not an environment variable name", s.AuthHeaderEnv))
	}
	names := make([]string, 0, len(s.Headers))
	for name := range s.Headers {
		names = append(names, name)
	}
	sort.Strings(names) // the problems in a stable order
	for _, name := range names {
		value := s.Headers[name]
		if !validHeaderName(name) {
			p = append(p, fmt.Sprintf("headers: %q is not an HTTP header name", name))
		}
		if strings.ContainsAny(value, "\r\n\x00") {
			p = append(p, fmt.Sprintf("headers: %s: the value holds a line break or NUL", name))
		}
		_, refs := expandEnv(value, func(string) (string, bool) { return "", false })
		for _, ref := range refs {
			if !envNameRE.MatchString(ref) {
				p = append(p, fmt.Sprintf("headers: %s: $%s is not an environment variable name (values read $NAME and ${NAME} from the environment)", name, ref))
			}
		}
		if s.AuthHeaderEnv != "" && strings.EqualFold(name, "Authorization") {
			p = append(p, "headers: Authorization is also set by auth_header_env: keep one")
		}
	}
	if s.Schedule != "" {
		if _, err := cron.ParseStandard(s.Schedule); err != nil {
			p = append(p, fmt.Sprintf("schedule %q: %v (want 5 cron fields or a descriptor such as \"@every 6h\")", s.Schedule, err))
		}
	}
	if s.Timeout < 0 {
		p = append(p, fmt.Sprintf("timeout is %s: want a positive duration such as 30s", s.Timeout))
	}
	p = append(p, s.Limits().Problems(YAMLKey, s.Traffic != nil)...)
	return p
}

// StoresServedSchemas reports whether a check of this server stores the tools it listed in
// served_tool_schemas: store_served_schemas, true when absent; never for a traffic server.
func (s ServerConfig) StoresServedSchemas() bool {
	return s.Traffic == nil && (s.StoreServedSchemas == nil || *s.StoreServedSchemas)
}

// Settings are the checker's settings for this server. A traffic source's snapshots are the
// schemas as served, the SDK's context already in them: nothing is injected.
func (s ServerConfig) Settings() Settings {
	settings := Settings{ServerName: s.Name}
	ApplyLimits(s.Limits(), &settings)
	if s.Traffic != nil {
		settings.InjectContext = new(false)
	}
	return settings
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// Source is where LoadFromServer finds this server's tools. It reads auth_header_env and the
// $NAME or ${NAME} in header values through getenv (os.Getenv when nil) and fails with a
// *MissingEnvError when any is unset or empty, so a missing token is a failed check naming the
// variable, not an unauthenticated request. An auth_header_env value that already starts with
// "Bearer " is sent as it is.
func (s ServerConfig) Source(getenv func(string) string) (Source, error) {
	if s.Traffic != nil {
		return Source{}, fmt.Errorf("schemacheck: server %q is checked from traffic, not listed (see LoadFromTraffic)", s.Name)
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	src := Source{URL: s.URL, Command: append([]string(nil), s.Command...), Timeout: s.Timeout}
	if len(s.Headers) > 0 || s.AuthHeaderEnv != "" {
		src.Headers = make(map[string]string, len(s.Headers)+1)
		for k, v := range s.Headers {
			src.Headers[k] = v
		}
	}
	if err := s.MissingEnv(getenv); err != nil {
		return Source{}, err
	}
	for name, value := range src.Headers {
		value, _ = expandEnv(value, func(v string) (string, bool) { return strings.TrimSpace(getenv(v)), true })
		if strings.ContainsAny(value, "\r\n\x00") {
			return Source{}, fmt.Errorf("schemacheck: server %q: headers: %s: the value from the environment holds a line break or NUL", s.Name, name)
		}
		src.Headers[name] = value
	}
	if s.AuthHeaderEnv != "" {
		token := strings.TrimSpace(getenv(s.AuthHeaderEnv))
		if len(token) < 7 || !strings.EqualFold(token[:7], "Bearer ") {
			token = "Bearer " + token
		}
		src.Headers["Authorization"] = token
	}
	return src, nil
}
