package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// Every command that talks to Kafka refuses a --brokers entry that is not host:port before
// contacting anything, naming the entry and the flag, instead of a library's configuration
// field (Brokers[0]) or a connection error.
func TestCommandsRefuseABrokerThatIsNotHostPort(t *testing.T) {
	t.Setenv("MCPULSE_API_KEYS", "phc_test")
	for _, args := range [][]string{
		{"consume", "--until-drained", "--redis", "redis://127.0.0.1:1", "--clickhouse", "clickhouse://127.0.0.1:1/default"},
		{"publish", "--file", "-"},
		{"gateway", "--listen", "127.0.0.1:0"},
	} {
		root := newRootCmd()
		var out, errOut bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&errOut)
		root.SetIn(strings.NewReader(""))
		root.SetArgs(append(args, "--brokers", "kafka:9092,garbage"))
		err := root.ExecuteContext(context.Background())
		if err == nil || !strings.Contains(err.Error(), `"garbage"`) || !strings.Contains(err.Error(), "--brokers") {
			t.Errorf("%q: %v, want the bad broker and --brokers named", args, err)
		}
	}
}

// consume refuses a negative batch bound before contacting anything, naming the flags.
func TestConsumeRefusesANegativeBatchBound(t *testing.T) {
	for _, flag := range [][]string{{"--batch-max-age", "-1s"}, {"--batch-size", "-1"}, {"--batch-bytes", "-5"}} {
		err := runRoot(t, append([]string{"consume", "--brokers", "127.0.0.1:1", "--redis", "redis://127.0.0.1:1", "--clickhouse", "clickhouse://127.0.0.1:1/default"}, flag...)...)
		if err == nil || !strings.Contains(err.Error(), flag[0]+" must not be negative") || strings.Count(err.Error(), "--") != 1 {
			t.Errorf("%v: %v, want only %s named as negative", flag, err, flag[0])
		}
	}
}

// bench pipeline refuses a negative consumer setting before starting anything, naming only
// the flag that is wrong.
func TestBenchPipelineRefusesANegativeConsumerSetting(t *testing.T) {
	for _, tc := range []struct{ flag, value, other string }{
		{"--batch-max-age", "-1s", "--batch-size"},
		{"--batch-size", "-5", "--batch-max-age"},
	} {
		err := runRoot(t, "bench", "pipeline", tc.flag, tc.value)
		if err == nil || !strings.Contains(err.Error(), tc.flag+" must not be negative") || strings.Contains(err.Error(), tc.other) {
			t.Errorf("%s %s: %v, want only %s named as negative", tc.flag, tc.value, err, tc.flag)
		}
	}
}
