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

// ServerConfig is one server of ratchets.yaml. Zero limits mean the checker's defaults (or,
// for max_tools and max_tool_chars, no limit); nil pointers mean the default where zero is a
// meaningful value (max_oversized: 0, min_nested_coverage: 0, inject_context: false).
type ServerConfig struct {
	// Name identifies the server in reports, stored runs and locks; it is also the server name
	// clients prefix tool names with (mcp__<name>__tool).
	Name string `yaml:"name"`
	// URL is the Streamable HTTP endpoint; Command the argv of a stdio server. Exactly one.
	URL     string   `yaml:"url"`
	Command []string `yaml:"command"`
	// AuthHeaderEnv names the environment variable whose value is sent as
	// "Authorization: Bearer <value>" (read when the server is checked, not when the file is
	// loaded). URL servers only.
	AuthHeaderEnv string `yaml:"auth_header_env"`
	// Headers are sent with every request. URL servers only.
	Headers map[string]string `yaml:"headers"`
	// Schedule is a cron spec (5 fields) or a descriptor such as "@every 6h" or "@daily";
	// empty means the scheduler's default.
	Schedule string `yaml:"schedule"`
	// Timeout bounds one listing of the server's tools; zero means DefaultTimeout.
	Timeout time.Duration `yaml:"timeout"`

	CharLimit          int      `yaml:"char_limit"`
	MaxOversized       *int     `yaml:"max_oversized"`
	MinNestedCoverage  *float64 `yaml:"min_nested_coverage"`
	NameMaxLen         int      `yaml:"name_max_len"`
	MaxTools           int      `yaml:"max_tools"`
	MaxToolChars       int      `yaml:"max_tool_chars"`
	InjectContext      *bool    `yaml:"inject_context"`
	ContextDescription string   `yaml:"context_description"`
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
	switch {
	case s.URL == "" && len(s.Command) == 0:
		p = append(p, "neither url nor command: give exactly one")
	case s.URL != "" && len(s.Command) > 0:
		p = append(p, "both url and command: give exactly one")
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
		if s.AuthHeaderEnv != "" && strings.EqualFold(name, "Authorization") {
			p = append(p, "headers: Authorization is also set by auth_header_env: keep one")
		}
	}
	if s.Schedule != "" {
		if _, err := cron.ParseStandard(s.Schedule); err != nil {
			p = append(p, fmt.Sprintf("schedule %q: %v (want 5 cron fields or a descriptor such as \"@every 6h\")", s.Schedule, err))
		}
	}
	nonNegative := func(field string, v int, zero string) {
		if v < 0 {
			p = append(p, fmt.Sprintf("%s is %d: want a positive number (or 0 for %s)", field, v, zero))
		}
	}
	if s.Timeout < 0 {
		p = append(p, fmt.Sprintf("timeout is %s: want a positive duration such as 30s", s.Timeout))
	}
	nonNegative("char_limit", s.CharLimit, "the default, 16384")
	nonNegative("name_max_len", s.NameMaxLen, "the default, 52")
	nonNegative("max_tools", s.MaxTools, "no limit")
	nonNegative("max_tool_chars", s.MaxToolChars, "no limit")
	if s.MaxOversized != nil && *s.MaxOversized < 0 {
		p = append(p, fmt.Sprintf("max_oversized is %d: want 0 or more", *s.MaxOversized))
	}
	if c := s.MinNestedCoverage; c != nil && !(*c >= 0 && *c <= 1) {
		p = append(p, fmt.Sprintf("min_nested_coverage is %v: want a share between 0 and 1 (0.55 is 55%%)", *c))
	}
	return p
}

// Settings are the checker's settings for this server.
func (s ServerConfig) Settings() Settings {
	return Settings{
		ServerName:         s.Name,
		CharLimit:          s.CharLimit,
		NameMaxLen:         s.NameMaxLen,
		InjectContext:      clonePtr(s.InjectContext),
		ContextDescription: s.ContextDescription,
		MaxOversized:       clonePtr(s.MaxOversized),
		MinNestedCoverage:  clonePtr(s.MinNestedCoverage),
		MaxTools:           s.MaxTools,
		MaxToolChars:       s.MaxToolChars,
	}
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// Source is where LoadFromServer finds this server's tools. It reads auth_header_env through
// getenv (os.Getenv when nil) and fails when that variable is unset or empty, so a missing
// token is a failed check, not an unauthenticated one. A value that already starts with
// "Bearer " is sent as it is.
func (s ServerConfig) Source(getenv func(string) string) (Source, error) {
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
	if s.AuthHeaderEnv != "" {
		token := strings.TrimSpace(getenv(s.AuthHeaderEnv))
		if token == "" {
			return Source{}, fmt.Errorf("schemacheck: server %q: $%s (auth_header_env) is not set: no token to send", s.Name, s.AuthHeaderEnv)
		}
		if len(token) < 7 || !strings.EqualFold(token[:7], "Bearer ") {
			token = "Bearer " + token
		}
		src.Headers["Authorization"] = token
	}
	return src, nil
}
