package ingest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Limits of PublishFile.
const (
	// MaxLineBytes is the longest JSONL line PublishFile parses, in bytes without the newline;
	// a longer line is dead-lettered (its first bytes kept), not fatal.
	MaxLineBytes = 1 << 20
	// PublishFileBatch is how many events PublishFile hands to one Publish call (fewer when
	// the batch reaches publishFileBatchBytes first).
	PublishFileBatch = 5000
	// MaxReportedBadLines is how many bad lines Stats.BadLines lists (the first ones).
	MaxReportedBadLines = 20
)

// publishFileBatchBytes bounds the memory of one PublishFile batch (valid events plus dead
// letters), in input bytes.
const publishFileBatchBytes = 16 << 20

// Progress is a running count of a PublishFile call, reported around every batch.
type Progress struct {
	Lines        int // lines read so far, blank ones included
	Published    int // events acknowledged by Kafka
	DeadLettered int // lines written to TopicDeadLetters
	Blank        int // blank (whitespace-only) lines, skipped
}

// BadLine is a refused line, for a report.
type BadLine struct {
	Line   int    // 1-based line number
	Reason string // why it was refused (untrusted text inside is Go-quoted, but print it escaped anyway)
	// DeadLettered says whether Kafka acknowledged its dead letter; false when publishing
	// stopped (Kafka unreachable) before it was written.
	DeadLettered bool
}

// Stats is the outcome of a PublishFile call. Lines == Published + DeadLettered + Blank +
// NotPublished + NotDeadLettered; the last two are 0 when it returns no error.
type Stats struct {
	Lines        int // lines read, blank ones included
	Published    int // events acknowledged by Kafka
	DeadLettered int // lines written to TopicDeadLetters
	Blank        int // blank (whitespace-only) lines, skipped
	// NotPublished counts valid events that Kafka did not acknowledge before publishing
	// stopped: they may or may not have reached it (publishing the input again is safe).
	NotPublished int
	// NotDeadLettered counts refused lines whose dead letter was not acknowledged.
	NotDeadLettered int
	// BadLines are the first MaxReportedBadLines refused lines, in line order.
	BadLines []BadLine
}

// PublishFile reads JSON Lines from r, one event envelope per line, and publishes them with p.
// Each line is parsed with Parse; valid events are published in batches of up to
// PublishFileBatch (exact duplicates included: consumers deduplicate by uuid). A line that is
// not a valid event (bad JSON, a validation problem, longer than
// MaxLineBytes, not encodable again, or refused by Kafka for what it is, such as too large) is
// not fatal: it goes to TopicDeadLetters with reason "line N: <error>", source SourcePublish
// and the deterministic ID DeadLetterIDForLine(name, N, payload), so publishing the same input
// again yields the same dead letters and two inputs of one name (two runs reading standard
// input) give different lines different IDs. Blank lines are skipped; a UTF-8 byte order mark
// before the first line is ignored. name identifies the input (use a name that differs between
// different files, e.g. with a content hash) and must not be empty.
//
// progress, when not nil, is called synchronously before and after each batch is sent, and at
// the end; it must be quick. PublishFile returns an error, with the Stats so far, when reading fails, ctx ends, or
// Kafka does not acknowledge events or dead letters after the Publisher's retries (publishing
// failed: some lines are neither published nor dead-lettered).
func PublishFile(ctx context.Context, p *Publisher, r io.Reader, name string, progress func(Progress)) (Stats, error) {
	var st Stats
	if name == "" {
		return st, errors.New("PublishFile: empty name")
	}
	report := func() {
		if progress != nil {
			progress(Progress{Lines: st.Lines, Published: st.Published, DeadLettered: st.DeadLettered, Blank: st.Blank})
		}
	}
	var (
		events     []*Event
		eventLines []int
		letters    []DeadLetter
		letterLine []int
		batchBytes int
	)
	deadLetter := func(line int, payload []byte, reason string, class DeadLetterClass) {
		letters = append(letters, DeadLetter{
			ID:      DeadLetterIDForLine(name, line, payload),
			Payload: payload,
			Reason:  "line " + strconv.Itoa(line) + ": " + reason,
			Source:  SourcePublish,
			Class:   class,
		})
		letterLine = append(letterLine, line)
		// Keep the first MaxReportedBadLines in line order (a line refused by Kafka is known
		// only after later lines were parsed).
		i := len(st.BadLines)
		for i > 0 && st.BadLines[i-1].Line > line {
			i--
		}
		if i < MaxReportedBadLines {
			st.BadLines = slices.Insert(st.BadLines, i, BadLine{Line: line, Reason: reason})
			if len(st.BadLines) > MaxReportedBadLines {
				st.BadLines = st.BadLines[:MaxReportedBadLines]
			}
		}
	}
	flush := func() error {
		if err := ctx.Err(); err != nil {
			return err
		}
		report() // lines read so far, before waiting for Kafka
		if len(events) > 0 {
			err := p.Publish(ctx, events...)
			failed := 0
			var pubErr *PublishError
			switch {
			case err == nil:
			case errors.As(err, &pubErr):
				var lost []int
				for _, f := range pubErr.Failed {
					failed++
					line := eventLines[f.Index]
					if !f.Permanent {
						lost = append(lost, line)
						continue
					}
					payload, _ := events[f.Index].MarshalJSON()
					if errors.Is(f.Err, ErrNotEncodable) {
						deadLetter(line, payload, "could not be published: "+f.Err.Error(), ClassNotEncodable)
					} else {
						deadLetter(line, payload, "refused by Kafka: "+f.Err.Error(), ClassOf(f.Err))
					}
				}
				if len(lost) > 0 {
					st.Published += len(events) - failed
					st.NotPublished += len(lost)
					st.NotDeadLettered += len(letters)
					return fmt.Errorf("publishing failed: %d event(s) not acknowledged by Kafka (lines %s): %w", len(lost), lineList(lost), err)
				}
			default:
				st.NotPublished += len(events)
				st.NotDeadLettered += len(letters)
				return fmt.Errorf("publishing failed: %w", err)
			}
			st.Published += len(events) - failed
		}
		if len(letters) > 0 {
			err := p.DeadLetter(ctx, letters...)
			var pubErr *PublishError
			switch {
			case err == nil:
				st.DeadLettered += len(letters)
				markDeadLettered(st.BadLines, letterLine, nil)
			case errors.As(err, &pubErr):
				st.DeadLettered += len(letters) - len(pubErr.Failed)
				st.NotDeadLettered += len(pubErr.Failed)
				lost := make([]int, len(pubErr.Failed))
				for i, f := range pubErr.Failed {
					lost[i] = letterLine[f.Index]
				}
				markDeadLettered(st.BadLines, letterLine, lost)
				return fmt.Errorf("publishing failed: %d bad line(s) could not be dead-lettered (lines %s): %w", len(lost), lineList(lost), err)
			default:
				st.NotDeadLettered += len(letters)
				return fmt.Errorf("publishing failed: dead-lettering: %w", err)
			}
		}
		events, eventLines, letters, letterLine, batchBytes = events[:0], eventLines[:0], letters[:0], letterLine[:0], 0
		report()
		return nil
	}

	lr := newLineReader(r, MaxLineBytes)
	for {
		line, size, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if ferr := flush(); ferr != nil {
				return st, errors.Join(fmt.Errorf("reading %s: %w", name, err), ferr)
			}
			return st, fmt.Errorf("reading %s after line %d: %w", name, st.Lines, err)
		}
		st.Lines++
		n := st.Lines
		if n == 1 {
			line = bytes.TrimPrefix(line, []byte("\uFEFF"))
		}
		switch {
		case size > MaxLineBytes:
			deadLetter(n, line, fmt.Sprintf("line is %d bytes, longer than the %d-byte limit", size, MaxLineBytes), ClassTooLarge)
		case len(bytes.TrimSpace(line)) == 0:
			st.Blank++
		default:
			ev, err := Parse(line)
			if err != nil {
				deadLetter(n, line, err.Error(), ClassOf(err))
			} else {
				events = append(events, ev)
				eventLines = append(eventLines, n)
			}
		}
		batchBytes += len(line)
		if len(events) >= PublishFileBatch || len(letters) >= PublishFileBatch || batchBytes >= publishFileBatchBytes {
			if err := flush(); err != nil {
				return st, err
			}
		}
	}
	if err := flush(); err != nil {
		return st, err
	}
	return st, nil
}

// DeadLetterIDForLine is the dead-letter ID of line n of the input named name whose payload
// is payload: "publish:<name>:<n>:<first 12 hex digits of the payload's SHA-256>". The same
// line of the same input always gets the same ID (a re-publish records it once); lines of
// two different inputs of one name, such as two runs reading standard input, differ unless
// their content is the same.
func DeadLetterIDForLine(name string, n int, payload []byte) string {
	sum := sha256.Sum256(payload)
	return "publish:" + name + ":" + strconv.Itoa(n) + ":" + hex.EncodeToString(sum[:6])
}

// markDeadLettered marks the reported bad lines among lines as dead-lettered, except those
// in failed.
func markDeadLettered(bad []BadLine, lines, failed []int) {
	for i := range bad {
		if slices.Contains(lines, bad[i].Line) && !slices.Contains(failed, bad[i].Line) {
			bad[i].DeadLettered = true
		}
	}
}

// lineList renders line numbers for an error message, at most 10 of them.
func lineList(lines []int) string {
	var b strings.Builder
	for i, l := range lines {
		if i == 10 {
			fmt.Fprintf(&b, ", … (%d more)", len(lines)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(l))
	}
	return b.String()
}

// lineReader splits a stream into lines of at most max bytes (kept), counting the full length
// of longer ones.
type lineReader struct {
	r   *bufio.Reader
	max int
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the next line without its "\n" (a fresh slice holding at most max bytes) and
// its full length in bytes. It returns io.EOF after the last line; a last line without a
// newline is still a line.
func (lr *lineReader) next() (line []byte, size int, err error) {
	for {
		chunk, err := lr.r.ReadSlice('\n')
		size += len(chunk)
		if len(line) < lr.max {
			room := min(len(chunk), lr.max+1-len(line)) // +1: the newline, trimmed below
			line = append(line, chunk[:room]...)
		}
		switch {
		case err == nil:
			size--
			if n := len(line); n > 0 && line[n-1] == '\n' {
				line = line[:n-1]
			}
			if len(line) > lr.max {
				line = line[:lr.max]
			}
			return line, size, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if size == 0 {
				return nil, 0, io.EOF
			}
			if len(line) > lr.max {
				line = line[:lr.max]
			}
			return line, size, nil
		default:
			return nil, size, err
		}
	}
}
