package campaigns

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"

	"gopkg.in/yaml.v3"

	"github.com/mcpulse/mcpulse/internal/safetext"
)

// Config is a campaigns.yaml file (campaigns.example.yaml documents it): where the flags
// live in PostHog and the shared exclusion cohort's id. Command-line flags given explicitly
// override it.
type Config struct {
	// ExclusionCohort is the id of the cohort every release condition must exclude; 0 or
	// omitted means unset.
	ExclusionCohort int64 `yaml:"exclusion_cohort"`
	PostHog         struct {
		// Host is PostHog's API host (default DefaultPostHogHost).
		Host string `yaml:"host"`
		// ProjectID is the project that holds the flags (the MCP server's analytics project).
		ProjectID string `yaml:"project_id"`
		// PersonalAPIKeyEnv names the environment variable holding the personal API key
		// (default EnvPersonalAPIKey). The key itself never goes in the file.
		PersonalAPIKeyEnv string `yaml:"personal_api_key_env"`
	} `yaml:"posthog"`
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// LoadConfig reads a campaigns.yaml. Unknown keys are errors (a misspelt exclusion_cohort
// must not silently turn the exclusion check off), as are an exclusion_cohort given but
// null, empty, or not a YAML integer (641799.5 or "641799": never truncated or guessed), a
// negative cohort id, a host that
// is not an http(s) URL, a project id holding '/', '?', '#', '%' or a space, and an
// environment variable name that is not one. Every problem is reported at once.
func LoadConfig(path string) (Config, error) {
	var c Config
	data, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	var problems []error
	bad := func(format string, args ...any) {
		problems = append(problems, fmt.Errorf("%s: %s", safetext.Escape(path), fmt.Sprintf(format, args...)))
	}
	// The cohort first: a value yaml would refuse in Go's terms, or turn into 0 or truncate,
	// gets a message of its own.
	cohortBad := cohortNodeProblem(data)
	if cohortBad != "" {
		bad("exclusion_cohort %s; give the shared exclusion cohort's id as an integer (e.g. exclusion_cohort: 641799), or leave the key out to lint without one", cohortBad)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		if cohortBad != "" {
			return c, errors.Join(problems...)
		}
		return c, fmt.Errorf("%s: %w", safetext.Escape(path), err)
	}
	if cohortBad != "" {
		c.ExclusionCohort = 0
	} else if c.ExclusionCohort < 0 {
		bad("exclusion_cohort %d is not a cohort id", c.ExclusionCohort)
	}
	if h := c.PostHog.Host; h != "" {
		if u, err := url.Parse(h); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			bad("posthog.host %s is not an http(s) URL", safetext.Quote(h))
		}
	}
	if p := c.PostHog.ProjectID; p != "" && !validProjectID(p) {
		bad("posthog.project_id %s is not a project id", safetext.Quote(p))
	}
	if e := c.PostHog.PersonalAPIKeyEnv; e != "" && !envNameRE.MatchString(e) {
		bad("posthog.personal_api_key_env %s is not an environment variable name", safetext.Quote(e))
	}
	return c, errors.Join(problems...)
}

// cohortNodeProblem says what is wrong with the exclusion_cohort key of a campaigns.yaml
// document, "" when it is absent or a YAML integer. Errors of the document as a whole are
// LoadConfig's.
func cohortNodeProblem(data []byte) string {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return ""
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode {
		return ""
	}
	for i := 0; i+1 < len(top.Content); i += 2 {
		if top.Content[i].Value != "exclusion_cohort" {
			continue
		}
		v := top.Content[i+1]
		for v.Kind == yaml.AliasNode && v.Alias != nil {
			v = v.Alias
		}
		switch {
		case v.Kind != yaml.ScalarNode:
			return "is not a single value"
		case v.ShortTag() == "!!null":
			return "is empty (null)"
		case v.ShortTag() != "!!int":
			return "is " + safetext.Quote(v.Value) + ", not an integer"
		}
		return ""
	}
	return ""
}
