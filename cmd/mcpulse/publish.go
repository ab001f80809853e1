package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpulse/mcpulse/ingest"
)

// publishBrokersEnv names the environment variable --brokers defaults to.
const publishBrokersEnv = "MCPULSE_KAFKA_BROKERS"

func newPublishCmd() *cobra.Command {
	var file, brokers, instanceURL string
	cmd := &cobra.Command{
		Use:   "publish --file F [--brokers host:port,...]",
		Short: "Publish a JSON Lines file of events to Kafka; bad lines go to the dead-letter topic",
		Long: `publish reads events from a JSON Lines file (one PostHog-style envelope per line, "-" for
standard input), validates each line, and publishes the valid events to mcp_tool_calls and
mcp_recruitment (acks from all in-sync replicas). A bad line (bad JSON, a contract violation,
an unknown event name, a line over 1 MiB) is not fatal: it goes to mcpulse_dlq with its line
number and reason, and is listed in the final summary.

Progress (lines read, published, dead-lettered, events/s) is printed on stderr every second.

Exit status: 0 when every line was published, dead-lettered or blank (dead-lettered lines are
not lost); 1 when publishing failed (Kafka did not acknowledge some events) or the file could
not be read.

Retries re-send the same event (same uuid); the consumers deduplicate by uuid, so publishing a
file twice is harmless.`,
		Args:    cobra.NoArgs,
		Example: "  mcpulse publish --file events.jsonl\n  zcat events.jsonl.gz | mcpulse publish --file -",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return errors.New("--file is required (a JSON Lines file, or - for standard input)")
			}
			if brokers == "" {
				brokers = os.Getenv(publishBrokersEnv)
			}
			list := publishSplitBrokers(brokers)
			if len(list) == 0 {
				return fmt.Errorf("no Kafka brokers: pass --brokers host:port,... or set %s", publishBrokersEnv)
			}
			return runPublish(cmd.Context(), publishOptions{
				file: file, brokers: list, instanceURL: instanceURL,
				stdin: cmd.InOrStdin(), out: cmd.OutOrStdout(), errOut: cmd.ErrOrStderr(),
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&file, "file", "", `JSON Lines file of events ("-" reads standard input)`)
	f.StringVar(&brokers, "brokers", "", "comma-separated Kafka brokers, host:port (default $"+publishBrokersEnv+")")
	f.StringVar(&instanceURL, "instance-url", ingest.DefaultInstanceURL,
		"PostHog instance URL used for the identity hash (message key) of recruitment events without instance_url; must match the consumers'")
	return cmd
}

type publishOptions struct {
	file        string
	brokers     []string
	instanceURL string
	stdin       io.Reader
	out, errOut io.Writer
}

func publishSplitBrokers(s string) []string {
	var list []string
	for _, b := range strings.Split(s, ",") {
		if b = strings.TrimSpace(b); b != "" {
			list = append(list, b)
		}
	}
	return list
}

func runPublish(ctx context.Context, o publishOptions) error {
	in, name, closeInput, err := publishOpenInput(o)
	if err != nil {
		return err
	}
	defer closeInput()

	pub, err := ingest.NewPublisher(ingest.PublisherConfig{
		Brokers:            o.brokers,
		DefaultInstanceURL: o.instanceURL,
		Logger:             slog.New(slog.NewTextHandler(o.errOut, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}

	// Progress: PublishFile reports after every batch; a ticker prints the latest every second.
	var mu sync.Mutex
	var latest ingest.Progress
	start := time.Now()
	printProgress := func() {
		mu.Lock()
		p := latest
		mu.Unlock()
		elapsed := time.Since(start).Seconds()
		rate := 0.0
		if elapsed > 0 {
			rate = float64(p.Published) / elapsed
		}
		fmt.Fprintf(o.errOut, "publish: %d lines read, %d published, %d dead-lettered, %.0f events/s\n",
			p.Lines, p.Published, p.DeadLettered, rate)
	}
	stop := make(chan struct{})
	ticking := make(chan struct{})
	go func() {
		defer close(ticking)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				printProgress()
			}
		}
	}()

	st, pubErr := ingest.PublishFile(ctx, pub, in, name, func(p ingest.Progress) {
		mu.Lock()
		latest = p
		mu.Unlock()
	})
	close(stop)
	<-ticking
	closeErr := pub.Close()

	elapsed := time.Since(start)
	fmt.Fprintf(o.out, "%s: %d lines, %d events published, %d dead-lettered to %s, %d blank, in %s (%.0f events/s)\n",
		o.file, st.Lines, st.Published, st.DeadLettered, ingest.TopicDeadLetters, st.Blank,
		elapsed.Round(time.Millisecond), float64(st.Published)/max(elapsed.Seconds(), 1e-9))
	if st.DeadLettered > 0 || len(st.BadLines) > 0 {
		fmt.Fprintf(o.out, "bad lines (dead-lettered with id publish:%s:<line>):\n", name)
		for _, b := range st.BadLines {
			fmt.Fprintf(o.out, "  line %d: %q\n", b.Line, b.Reason)
		}
		if more := st.DeadLettered - len(st.BadLines); more > 0 {
			fmt.Fprintf(o.out, "  … and %d more (see %s)\n", more, ingest.TopicDeadLetters)
		}
	}
	if pubErr != nil {
		return errors.Join(pubErr, closeErr)
	}
	if closeErr != nil {
		return closeErr
	}
	return nil
}

// publishOpenInput opens the input and names it for dead-letter IDs: "<base name>@<first 12
// hex digits of its SHA-256>" for a regular file (so re-publishing the same file gives the same
// IDs, and two files of the same name do not collide), the base name alone for a pipe or
// device, "stdin" for standard input.
func publishOpenInput(o publishOptions) (io.Reader, string, func(), error) {
	if o.file == "-" {
		return o.stdin, "stdin", func() {}, nil
	}
	f, err := os.Open(o.file)
	if err != nil {
		return nil, "", nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		// A pipe or device cannot be read twice: name it without a content hash.
		return f, filepath.Base(o.file), func() { f.Close() }, nil
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		f.Close()
		return nil, "", nil, fmt.Errorf("reading %s: %w", o.file, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, "", nil, fmt.Errorf("reading %s: %w", o.file, err)
	}
	name := filepath.Base(o.file) + "@" + hex.EncodeToString(h.Sum(nil))[:12]
	return f, name, func() { f.Close() }, nil
}
