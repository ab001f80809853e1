package campaigns

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadConfigExample(t *testing.T) {
	c, err := LoadConfig(filepath.Join("..", "campaigns.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if c.ExclusionCohort != 641799 || c.PostHog.Host != DefaultPostHogHost || c.PostHog.ProjectID != "2" || c.PostHog.PersonalAPIKeyEnv != EnvPersonalAPIKey {
		t.Fatalf("%+v", c)
	}
}

func TestLoadConfigRejects(t *testing.T) {
	for name, doc := range map[string]string{
		"misspelt key": "exclusion_cohrt: 641799\n",
		"negative id":  "exclusion_cohort: -1\n",
		"not a number": "exclusion_cohort: everyone\n",
		"bad host":     "posthog:\n  host: us.posthog.com\n",
		"bad project":  "posthog:\n  project_id: 2/../3\n",
		"bad env name": "posthog:\n  personal_api_key_env: phx_abc-def\n",
		"nested typo":  "posthog:\n  projectid: 2\n",
	} {
		path := filepath.Join(t.TempDir(), "campaigns.yaml")
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadConfig(path); err == nil || !strings.Contains(err.Error(), "campaigns.yaml") {
			t.Errorf("%s: %v", name, err)
		}
	}
	// A cohort key given without a usable id is an error naming the file and the key, never
	// a silently unset (or truncated) cohort.
	for doc, want := range map[string]string{
		"exclusion_cohort: ~\n":                              "exclusion_cohort is empty (null)",
		"exclusion_cohort:\nposthog:\n  project_id: \"2\"\n": "exclusion_cohort is empty (null)",
		"exclusion_cohort: null\n":                           "exclusion_cohort is empty (null)",
		"exclusion_cohort: 641799.5\n":                       `exclusion_cohort is "641799.5", not an integer`,
		"exclusion_cohort: \"641799\"\n":                     `exclusion_cohort is "641799", not an integer`,
		"exclusion_cohort: [641799]\n":                       "exclusion_cohort is not a single value",
	} {
		path := filepath.Join(t.TempDir(), "campaigns.yaml")
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := LoadConfig(path)
		if err == nil || !strings.Contains(err.Error(), path+": "+want) || !strings.Contains(err.Error(), "641799") {
			t.Errorf("%q: %v, want %q", doc, err, want)
		}
	}
	path := filepath.Join(t.TempDir(), "empty.yaml")
	os.WriteFile(path, nil, 0o644)
	if c, err := LoadConfig(path); err != nil || c.ExclusionCohort != 0 {
		t.Errorf("empty file: %+v %v", c, err)
	}
}
