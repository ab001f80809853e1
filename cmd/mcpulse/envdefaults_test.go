package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// --help of every command shows the environment variables flags default to by name, never
// their values: a DSN, a Redis URL or an API key in the environment stays out of help output.
// The value is still the flag's default.
func TestHelpDoesNotPrintEnvironmentSecrets(t *testing.T) {
	secrets := map[string]string{
		"MCPULSE_CLICKHOUSE_DSN":           "clickhouse://u:chsecret@h:9000/default",
		"MCPULSE_REDIS_URL":                "redis://:redissecret@h:6379/0",
		"MCPULSE_KAFKA_BROKERS":            "brokersecret:9092",
		"MCPULSE_POSTHOG_API_KEY":          "phc_posthogsecret",
		"MCPULSE_POSTHOG_PERSONAL_API_KEY": "phx_personalsecret",
		"MCPULSE_DASHBOARDS_TOKEN":         "tokensecret",
		"MCPULSE_DASHBOARDS_BASIC_AUTH":    "u:basicsecret",
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	var paths [][]string
	root := newRootCmd()
	for _, c := range root.Commands() {
		paths = append(paths, []string{c.Name()})
		for _, sub := range c.Commands() {
			paths = append(paths, []string{c.Name(), sub.Name()})
		}
	}
	for _, p := range paths {
		root := newRootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append(append([]string{}, p...), "--help"))
		if err := root.ExecuteContext(context.Background()); err != nil {
			t.Fatalf("%q --help: %v", p, err)
		}
		for k, v := range secrets {
			if strings.Contains(out.String(), v) {
				t.Errorf("%q --help prints $%s's value", p, k)
			}
		}
	}

	// The default is kept: consume still reads the brokers from the environment.
	t.Setenv("MCPULSE_KAFKA_BROKERS", "not-a-broker")
	root = newRootCmd()
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	root.SetArgs([]string{"consume", "--until-drained"})
	if err := root.ExecuteContext(context.Background()); err == nil || !strings.Contains(err.Error(), `"not-a-broker"`) {
		t.Errorf("consume with $MCPULSE_KAFKA_BROKERS set: %v, want its value used", err)
	}
}
