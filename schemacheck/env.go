package schemacheck

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
)

// Tokens from the environment: a url server's bearer token (auth_header_env) and any $NAME or
// ${NAME} in its header values (ratchets.yaml headers:, or --header on the command line) are
// read from the environment when the server is checked. A variable that is not there is named
// before anything is sent, never discovered later as the server's 401.

// EnvVar is an environment variable a server's requests read.
type EnvVar struct {
	// Name is the variable's name, without the $.
	Name string
	// UsedBy is the setting that reads it: "auth_header_env" or "headers: <header name>".
	UsedBy string
}

// MissingEnvError says which variables a server's requests need are unset or empty: its check
// does not run (the server is not asked without its token).
type MissingEnvError struct {
	Server  string
	Missing []EnvVar
}

// Error names the server and every missing variable with the setting that reads it.
func (e *MissingEnvError) Error() string {
	parts := make([]string, len(e.Missing))
	for i, v := range e.Missing {
		parts[i] = fmt.Sprintf("$%s (%s)", v.Name, v.UsedBy)
	}
	verb := "is"
	if len(parts) > 1 {
		verb = "are"
	}
	return fmt.Sprintf("schemacheck: server %q: %s %s not set in the environment: no token to send, the server was not asked",
		e.Server, strings.Join(parts, ", "), verb)
}

// NeededEnv lists the environment variables a url server's requests read: auth_header_env
// first, then the variables named in header values (headers by name, variables in order of
// appearance). A stdio or traffic server reads none.
func (s ServerConfig) NeededEnv() []EnvVar {
	var vars []EnvVar
	if s.AuthHeaderEnv != "" {
		vars = append(vars, EnvVar{Name: s.AuthHeaderEnv, UsedBy: "auth_header_env"})
	}
	names := make([]string, 0, len(s.Headers))
	for name := range s.Headers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		_, refs := expandEnv(s.Headers[name], func(string) (string, bool) { return "", false })
		for _, ref := range refs {
			vars = append(vars, EnvVar{Name: ref, UsedBy: "headers: " + name})
		}
	}
	return vars
}

// MissingEnv returns a *MissingEnvError naming the variables of NeededEnv that getenv
// (os.Getenv when nil) finds unset or empty, or nil when every one is set. The scheduler calls
// it at start-up; Source fails with it.
func (s ServerConfig) MissingEnv(getenv func(string) string) error {
	if getenv == nil {
		getenv = os.Getenv
	}
	var missing []EnvVar
	for _, v := range s.NeededEnv() {
		if strings.TrimSpace(getenv(v.Name)) == "" {
			missing = append(missing, v)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return &MissingEnvError{Server: s.Name, Missing: missing}
}

// expandEnv replaces $NAME and ${NAME} in value with lookup's values, as os.Expand does, and
// returns the names lookup did not find (in order of appearance, each once).
func expandEnv(value string, lookup func(string) (string, bool)) (string, []string) {
	var missing []string
	expanded := os.Expand(value, func(name string) string {
		v, ok := lookup(name)
		if !ok && !slices.Contains(missing, name) {
			missing = append(missing, name)
		}
		return v
	})
	return expanded, missing
}
