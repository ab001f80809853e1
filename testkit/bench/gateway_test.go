package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// RunGateway posts every call both ways and reports a rate and a CPU cost for each (a
// failed request, refused or not acknowledged, is an error); the figures themselves are the
// command's to print, not the test's to judge.
func TestRunGatewayMeasuresBothPaths(t *testing.T) {
	res, err := RunGateway(context.Background(), GatewayConfig{Events: 450, Batch: 100, Clients: 2, Runs: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 2 || !res.Runs[1].OTLPFirst || res.Runs[0].OTLPFirst {
		t.Fatalf("runs %+v, want two, the second OTLP first", res.Runs)
	}
	for _, r := range res.Runs {
		if r.CaptureEventsPerSec <= 0 || r.OTLPSpansPerSec <= 0 || r.Ratio <= 0 {
			t.Errorf("run %+v: a rate is missing", r)
		}
	}
	var out bytes.Buffer
	res.Print(&out)
	if !strings.Contains(out.String(), "median ratio OTLP ÷ capture API") {
		t.Errorf("table:\n%s", out.String())
	}
}
