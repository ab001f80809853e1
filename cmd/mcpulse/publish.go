package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/internal/stores"
)

// publishPingTimeout bounds how long publish waits for a broker to answer before it reads any
// input.
const publishPingTimeout = 10 * time.Second

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
a line over 1 MiB) is not fatal: it goes to mcpulse_dlq with its line
number and reason, and is listed in the final summary. Gzip-compressed input (a .gz file or
stream) is decompressed first.

Progress (lines read, published, dead-lettered, events/s) is printed on stderr every second.

Before reading any input, publish asks the brokers for metadata and stops with exit status 1
when none answers within 10 s ("Kafka unreachable ...: nothing was read or published").
If Kafka stops acknowledging part-way (after the publisher's retries, about 8 s), publish stops
reading and says after which line it stopped, how many events were not published and which bad
lines were not dead-lettered; publishing the same input again is safe.

Exit status: 0 when every line was published, dead-lettered or blank (dead-lettered lines are
not lost); 1 when publishing failed (Kafka unreachable or did not acknowledge some events) or
the file could not be read.

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
			list, err := stores.ParseBrokers(brokers)
			if err != nil {
				return err
			}
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
	pingTimeout time.Duration // default publishPingTimeout
	file        string
	brokers     []string
	instanceURL string
	stdin       io.Reader
	out, errOut io.Writer
}

func runPublish(ctx context.Context, o publishOptions) error {
	pub, err := ingest.NewPublisher(ingest.PublisherConfig{
		Brokers:            o.brokers,
		DefaultInstanceURL: o.instanceURL,
		Logger:             slog.New(slog.NewTextHandler(o.errOut, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	if o.pingTimeout == 0 {
		o.pingTimeout = publishPingTimeout
	}
	if err := pub.Ping(ctx, o.pingTimeout); err != nil {
		pub.Close()
		return fmt.Errorf("%w: nothing was read or published", err)
	}
	in, name, closeInput, err := publishOpenInput(o)
	if err != nil {
		pub.Close()
		return err
	}
	defer closeInput()

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

	writePublishSummary(o.out, o.file, name, st, pubErr != nil, time.Since(start))
	if pubErr != nil {
		// Closing a writer whose brokers are gone fails too; that says nothing more than pubErr.
		return pubErr
	}
	return closeErr
}

// writePublishSummary prints what became of every line read: published, dead-lettered, blank,
// or, when publishing stopped, neither (with the first refused lines and whether each reached
// the dead-letter topic).
func writePublishSummary(out io.Writer, file, name string, st ingest.Stats, stopped bool, elapsed time.Duration) {
	rate := float64(st.Published) / max(elapsed.Seconds(), 1e-9)
	if !stopped {
		fmt.Fprintf(out, "%s: %d lines, %d events published, %d dead-lettered to %s, %d blank, in %s (%.0f events/s)\n",
			file, st.Lines, st.Published, st.DeadLettered, ingest.TopicDeadLetters, st.Blank, elapsed.Round(time.Millisecond), rate)
	} else {
		fmt.Fprintf(out, "%s: publishing STOPPED after line %d (lines after it were not read): %d events published, %d dead-lettered to %s, %d blank; NOT published: %d events, %d bad lines not dead-lettered\n",
			file, st.Lines, st.Published, st.DeadLettered, ingest.TopicDeadLetters, st.Blank, st.NotPublished, st.NotDeadLettered)
		fmt.Fprintln(out, "publish the same input again once the error below is fixed: events keep their uuid and dead letters their id, so nothing is counted twice")
	}
	if len(st.BadLines) == 0 {
		return
	}
	fmt.Fprintf(out, "bad lines (dead-letter id publish:%s:<line>:<payload hash>):\n", name)
	for _, b := range st.BadLines {
		state := ""
		if !b.DeadLettered {
			state = " [not dead-lettered]"
		}
		fmt.Fprintf(out, "  line %d%s: %q\n", b.Line, state, b.Reason)
	}
	if more := st.DeadLettered + st.NotDeadLettered - len(st.BadLines); more > 0 {
		fmt.Fprintf(out, "  … and %d more (see %s)\n", more, ingest.TopicDeadLetters)
	}
}

// publishOpenInput opens the input and names it for dead-letter IDs: "<base name>@<first 12
// hex digits of its SHA-256>" for a regular file (so re-publishing the same file gives the same
// IDs, and two files of the same name do not collide), the base name alone for a pipe or
// device, "stdin" for standard input.
//
// Input that starts with gzip's magic bytes (a .gz file, or a compressed stream on standard
// input) is decompressed: JSON Lines cannot start with byte 0x1f, and read as lines it would be
// dead-lettered as hundreds of binary fragments while nothing was published.
func publishOpenInput(o publishOptions) (io.Reader, string, func(), error) {
	r, name, closeInput, err := publishOpenRaw(o)
	if err != nil {
		return nil, "", nil, err
	}
	br := bufio.NewReader(r)
	if magic, _ := br.Peek(2); !bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		return br, name, closeInput, nil
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		closeInput()
		return nil, "", nil, fmt.Errorf("--file %s starts like gzip but is not readable gzip: %w", o.file, err)
	}
	return zr, name, func() { zr.Close(); closeInput() }, nil
}

// publishOpenRaw opens the input as stored, and names it as publishOpenInput says.
func publishOpenRaw(o publishOptions) (io.Reader, string, func(), error) {
	if o.file == "-" {
		return o.stdin, "stdin", func() {}, nil
	}
	f, err := os.Open(o.file)
	if err != nil {
		return nil, "", nil, err
	}
	fi, err := f.Stat()
	if err == nil && fi.IsDir() {
		f.Close()
		return nil, "", nil, fmt.Errorf("--file %s is a directory: give a JSON Lines file (or - for standard input)", o.file)
	}
	if err != nil || !fi.Mode().IsRegular() {
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
