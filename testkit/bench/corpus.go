package bench

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/mcpulse/mcpulse/demo/gen"
	"github.com/mcpulse/mcpulse/ingest"
)

// corpusEnd is the fixed end of the generated corpus: the same seed gives the same bytes in
// every run and on every day.
var corpusEnd = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// chunkToolCalls is how many tool calls one generator run makes at most; a larger corpus is
// generated chunk after chunk (seeds Seed, Seed+1, ...) so memory stays bounded whatever
// --events is: the generator holds a chunk's events, and only Kafka holds them all. The SDK
// shape's chunks are smaller (its calls keep their arguments until written).
var chunkToolCalls = map[string]int{ShapeDemo: 1_000_000, ShapeSDK: 250_000}

// sdkListEvery is the generator's ListEvery for the SDK shape: tools are listed before the
// first call of one (user, server) pair in 20. The SDK lists at every client connection, and
// its listings (13 to 100 KB) would otherwise be most of the bytes; the calls are what is
// measured, and every server version is listed early on.
const sdkListEvery = 20

// corpusStats describes what a corpus put on Kafka.
type corpusStats struct {
	// ToolCalls is how many $mcp_tool_call messages (duplicate lines included).
	ToolCalls int
	// Messages counts the messages per topic (tool calls and, for the SDK shape, the events
	// that come with them).
	Messages map[string]int
	// Bytes is the total size of the message values.
	Bytes int64
	// ByEvent is, per event name, how many messages were published and their values' bytes.
	ByEvent map[string]EventBytes
	// Unrouted counts, per event name, the generated events that this build's ingest gives no
	// topic, so they were left out (e.g. $mcp_tools_list before the consumer knows the kind).
	Unrouted map[string]int
}

func (s *corpusStats) total() int {
	n := 0
	for _, m := range s.Messages {
		n += m
	}
	return n
}

// corpusSink receives the generator's lines (one Write per line, as gen.Generate writes) and
// turns the ones the benchmark publishes into Kafka messages: tool calls, plus, for the SDK
// shape, the $mcp_tools_list, $mcp_initialize and $exception events around them, each on the
// topic and with the key ingest gives its kind. Recruitment events and malformed lines are
// left out (a peer cannot dead-letter a line; the benchmark measures tool calls).
type corpusSink struct {
	want  int // tool calls still wanted
	stats *corpusStats
	batch []kafka.Message
	emit  func([]kafka.Message) error
	err   error
}

// sinkBatch is how many messages the sink hands on at once.
const sinkBatch = 10_000

// benchKinds are the event names the SDK shape publishes beside tool calls.
var benchKinds = map[string]bool{"$mcp_tools_list": true, "$mcp_initialize": true, "$exception": true}

func (s *corpusSink) Write(line []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n := len(line)
	line = bytes.TrimRight(line, "\n")
	if s.want == 0 || len(line) == 0 {
		return n, nil
	}
	ev, err := ingest.Parse(line)
	if err != nil {
		if name := eventName(line); benchKinds[name] {
			s.stats.Unrouted[name]++
		}
		return n, nil // malformed, or a kind this build does not route
	}
	isCall := ev.Kind == ingest.KindToolCall
	if !isCall && !benchKinds[ev.Name] {
		return n, nil
	}
	topic := ev.Kind.Topic
	if topic == "" {
		s.stats.Unrouted[ev.Name]++
		return n, nil
	}
	if isCall {
		s.want--
		s.stats.ToolCalls++
	}
	value := append([]byte(nil), line...) // gen reuses its buffer
	s.batch = append(s.batch, kafka.Message{Topic: topic, Key: ingest.MessageKey(ev, gen.DefaultInstanceURL), Value: value})
	s.stats.Messages[topic]++
	s.stats.Bytes += int64(len(value))
	b := s.stats.ByEvent[ev.Name]
	b.Messages++
	b.Bytes += int64(len(value))
	s.stats.ByEvent[ev.Name] = b
	if len(s.batch) >= sinkBatch {
		s.flush()
	}
	return n, s.err
}

func (s *corpusSink) flush() {
	if len(s.batch) == 0 || s.err != nil {
		return
	}
	s.err = s.emit(s.batch)
	s.batch = nil
}

// eventName reads the "event" of a line ingest refused ("" when it has none).
func eventName(line []byte) string {
	i := bytes.Index(line, []byte(`"event":"`))
	if i < 0 {
		return ""
	}
	rest := line[i+len(`"event":"`):]
	if j := bytes.IndexByte(rest, '"'); j >= 0 {
		return string(rest[:j])
	}
	return ""
}

// generate produces the benchmark's corpus: cfg.Events tool calls of cfg.Shape spanning
// cfg.Hours before corpusEnd, handed to emit in batches (in file order: time order, so each
// identity's events keep their order on its partition).
func generate(ctx context.Context, cfg Config, emit func([]kafka.Message) error) (*corpusStats, error) {
	stats := &corpusStats{Messages: map[string]int{}, Unrouted: map[string]int{}, ByEvent: map[string]EventBytes{}}
	for chunk := 0; stats.ToolCalls < cfg.Events; chunk++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		want := min(cfg.Events-stats.ToolCalls, chunkToolCalls[cfg.Shape])
		sink := &corpusSink{want: want, stats: stats, emit: emit}
		gcfg := gen.Config{
			Events: gen.LinesFor(want), Seed: cfg.Seed + int64(chunk), End: corpusEnd,
			Span: time.Duration(cfg.Hours) * time.Hour, Shape: gen.Shape(cfg.Shape), ListEvery: sdkListEvery,
		}
		_, err := gen.Generate(gcfg, sink)
		if err == nil {
			sink.flush()
			err = sink.err
		}
		if err != nil {
			return nil, err
		}
		if sink.want > 0 {
			return nil, fmt.Errorf("BUG: gen.LinesFor(%d) lines held only %d tool calls", want, want-sink.want)
		}
	}
	return stats, nil
}

// EventBytes is what the corpus put on Kafka of one event name.
type EventBytes struct {
	// Event is the event name ("$mcp_tool_call", "$mcp_tools_list", ...).
	Event string `json:"event"`
	// Messages is how many were published; Bytes the total of their message values, in bytes.
	Messages int   `json:"messages"`
	Bytes    int64 `json:"bytes"`
	// BytesPerMessage is Bytes ÷ Messages.
	BytesPerMessage float64 `json:"bytes_per_message"`
}

// byEvent lists the corpus's bytes per event name, the most bytes first.
func (s *corpusStats) byEvent() []EventBytes {
	out := make([]EventBytes, 0, len(s.ByEvent))
	for name, b := range s.ByEvent {
		b.Event = name
		b.BytesPerMessage = float64(b.Bytes) / float64(max(b.Messages, 1))
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Bytes != out[j].Bytes {
			return out[i].Bytes > out[j].Bytes
		}
		return out[i].Event < out[j].Event
	})
	return out
}

// unroutedNote says which generated events were left out, "" when none were.
func (s *corpusStats) unroutedNote() string {
	if len(s.Unrouted) == 0 {
		return ""
	}
	names := make([]string, 0, len(s.Unrouted))
	for n := range s.Unrouted {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%d %s", s.Unrouted[n], n)
	}
	return "not published (this build's consumer gives the kind no topic): " + strings.Join(parts, ", ")
}
