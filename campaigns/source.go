package campaigns

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
)

// Source says where the lint reads the flag definitions and which exclusion cohort it checks:
// either File (a PostHog JSON file, "-" for standard input) or ProjectID (PostHog's
// feature-flags API on Host, with the personal API key read from the environment variable
// APIKeyEnv). `mcpulse campaigns lint` and the scheduler's campaigns_lint job both build one
// (ResolveSource) and read it (Load).
type Source struct {
	File      string
	ProjectID string
	// Host is PostHog's API host for ProjectID; "" means DefaultPostHogHost.
	Host string
	// APIKeyEnv names the variable holding the personal API key; "" means EnvPersonalAPIKey.
	APIKeyEnv string
	// ExclusionCohort is the shared exclusion cohort's id (Options.ExclusionCohort); 0 is unset.
	ExclusionCohort int64
	// Timeout bounds each request to PostHog's API (FetchOptions.Timeout); 0 means
	// DefaultFetchTimeout.
	Timeout time.Duration
}

// Given says which fields of a Source were set explicitly (on the command line): those win over
// the campaigns.yaml of ResolveSource.
type Given struct {
	ExclusionCohort, Host, ProjectID bool
}

// ResolveSource's errors: neither a file nor a project given, both given, a negative cohort
// id (wrapped with the id).
var (
	ErrNoSource       = errors.New("no flag source: give a flags file, or a PostHog project id with a personal API key in $" + EnvPersonalAPIKey)
	ErrTwoSources     = errors.New("give a flags file or a PostHog project id, not both")
	ErrNegativeCohort = errors.New("not a cohort id")
)

// ResolveSource completes s with the campaigns.yaml at configPath ("" reads none): its
// exclusion_cohort, posthog.host and posthog.project_id fill the fields not given explicitly
// (the project only when no file is given), its posthog.personal_api_key_env names the key's
// variable. It then checks the result: exactly one of File and ProjectID (ErrNoSource when
// neither), a cohort id that is not negative. Errors name the problem; LoadConfig's are passed
// on.
func ResolveSource(s Source, configPath string, given Given) (Source, error) {
	if configPath != "" {
		cfg, err := LoadConfig(configPath)
		if err != nil {
			return s, err
		}
		if !given.ExclusionCohort && cfg.ExclusionCohort != 0 {
			s.ExclusionCohort = cfg.ExclusionCohort
		}
		if !given.Host && cfg.PostHog.Host != "" {
			s.Host = cfg.PostHog.Host
		}
		if !given.ProjectID && s.File == "" {
			s.ProjectID = cfg.PostHog.ProjectID
		}
		if cfg.PostHog.PersonalAPIKeyEnv != "" {
			s.APIKeyEnv = cfg.PostHog.PersonalAPIKeyEnv
		}
	}
	switch {
	case s.File != "" && s.ProjectID != "":
		return s, ErrTwoSources
	case s.File == "" && s.ProjectID == "":
		return s, ErrNoSource
	case s.ExclusionCohort < 0:
		return s, fmt.Errorf("exclusion cohort %s: %w", strconv.FormatInt(s.ExclusionCohort, 10), ErrNegativeCohort)
	}
	return s, nil
}

// Load reads the flags of s: the file (stdin for "-"; an error when stdin is nil), or every
// page of PostHog's feature-flags API (Fetch) with the key read through getenv (nil:
// os.Getenv). Errors are ReadFile's and Fetch's.
func (s Source) Load(ctx context.Context, stdin io.Reader, getenv func(string) string) ([]Flag, error) {
	if s.File == "-" && stdin == nil {
		return nil, errors.New("flags file -: no standard input to read")
	}
	if s.File != "" {
		return ReadFile(s.File, stdin)
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	env := nonEmpty(s.APIKeyEnv, EnvPersonalAPIKey)
	return Fetch(ctx, FetchOptions{Host: nonEmpty(s.Host, DefaultPostHogHost), ProjectID: s.ProjectID, APIKey: getenv(env), APIKeyEnv: env, Timeout: s.Timeout})
}

// Options are the lint options of s.
func (s Source) Options() Options { return Options{ExclusionCohort: s.ExclusionCohort} }

// String names the source for logs: the file, or the project and host.
func (s Source) String() string {
	if s.File != "" {
		return "file " + s.File
	}
	return "PostHog project " + s.ProjectID + " on " + nonEmpty(s.Host, DefaultPostHogHost)
}
