package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/ingest"
)

// With no broker answering, publish fails before it reads anything, with one clear error and
// no summary that could be read as work done.
func TestPublishWithKafkaUnreachableReadsNothing(t *testing.T) {
	var out, errOut bytes.Buffer
	stdin := strings.NewReader(`{"uuid":"0190c5a4-58a4-7b8e-9c3d-2f5e6a7b8c9d"}` + "\n")
	err := runPublish(context.Background(), publishOptions{
		pingTimeout: 300 * time.Millisecond, file: "-", brokers: []string{"127.0.0.1:1"},
		instanceURL: ingest.DefaultInstanceURL, stdin: stdin, out: &out, errOut: &errOut,
	})
	if !errors.Is(err, ingest.ErrKafkaUnreachable) || !strings.Contains(err.Error(), "nothing was read or published") {
		t.Fatalf("runPublish = %v, want an ErrKafkaUnreachable that says nothing was read", err)
	}
	if stdin.Len() == 0 {
		t.Error("the input was read although Kafka was unreachable")
	}
	if out.Len() != 0 {
		t.Errorf("summary printed for a run that did nothing: %q", out.String())
	}
}

// A run that stopped part-way says so, counts what was not published, and marks the bad lines
// whose dead letters were never written.
func TestPublishSummaryOfAStoppedRun(t *testing.T) {
	var out bytes.Buffer
	st := ingest.Stats{Lines: 5031, Published: 5000, NotPublished: 29, NotDeadLettered: 2,
		BadLines: []ingest.BadLine{{Line: 200, Reason: "uuid: required"}, {Line: 5030, Reason: "bad JSON"}}}
	writePublishSummary(&out, "events.jsonl", "events.jsonl@abc", st, true, time.Second)
	s := out.String()
	for _, want := range []string{"publishing STOPPED after line 5031", "NOT published: 29 events, 2 bad lines not dead-lettered",
		"line 200 [not dead-lettered]", "line 5030 [not dead-lettered]", "publish the same input again"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "dead-lettered with id") {
		t.Errorf("summary still calls refused lines dead-lettered:\n%s", s)
	}

	out.Reset()
	st = ingest.Stats{Lines: 3, Published: 2, DeadLettered: 1, BadLines: []ingest.BadLine{{Line: 2, Reason: "x", DeadLettered: true}}}
	writePublishSummary(&out, "f", "f@1", st, false, time.Second)
	if s := out.String(); !strings.Contains(s, "3 lines, 2 events published, 1 dead-lettered") || strings.Contains(s, "not dead-lettered") {
		t.Errorf("summary of a complete run:\n%s", s)
	}
}

// --file naming a directory is refused when it is opened, saying what to give instead, not
// reported as a run that stopped part-way (which told the user to wait for Kafka).
func TestPublishRefusesADirectory(t *testing.T) {
	dir := t.TempDir()
	_, _, _, err := publishOpenInput(publishOptions{file: dir})
	if err == nil || !strings.Contains(err.Error(), "is a directory") || !strings.Contains(err.Error(), "--file") {
		t.Fatalf("publishOpenInput(%s) = %v, want a refusal naming --file and the directory", dir, err)
	}
}

// A gzip-compressed file or stream is read decompressed, so its lines are the JSON Lines it
// holds (not binary fragments dead-lettered one by one), and plain input is read unchanged.
func TestPublishReadsGzipInputDecompressed(t *testing.T) {
	lines := `{"uuid":"0190c5a4-58a4-7b8e-9c3d-2f5e6a7b8c9d"}` + "\n" + `not json` + "\n"
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(lines))
	zw.Close()
	dir := t.TempDir()
	file := filepath.Join(dir, "events.jsonl.gz")
	if err := os.WriteFile(file, gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, o := range []publishOptions{{file: file}, {file: "-", stdin: bytes.NewReader(gz.Bytes())}, {file: "-", stdin: strings.NewReader(lines)}} {
		in, _, closeInput, err := publishOpenInput(o)
		if err != nil {
			t.Fatalf("%s: %v", o.file, err)
		}
		got, err := io.ReadAll(in)
		closeInput()
		if err != nil || string(got) != lines {
			t.Errorf("%s: read %q, %v; want the JSON Lines", o.file, got, err)
		}
	}
	bad := filepath.Join(dir, "bad.gz")
	os.WriteFile(bad, []byte{0x1f, 0x8b, 0, 0}, 0o644)
	if _, _, _, err := publishOpenInput(publishOptions{file: bad}); err == nil || !strings.Contains(err.Error(), "not readable gzip") {
		t.Errorf("a file with gzip's magic but no gzip stream: %v", err)
	}
}
