package consumers

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"github.com/mcpulse/mcpulse/consumers/chwrite"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/migrations"
)

// rawTable is one raw table the consumer inserts a batch's rows into (ingest.Rows).
type rawTable struct {
	name string
	// optional: the table may not exist yet (a migration of another part of mcpulse creates
	// it); its rows are then left out, with a warning, rather than stall the partition.
	optional bool
	len      func(*ingest.Rows) int
	// insert stores the table's rows of a batch, splitting a permanently refused insert down
	// to the rows ClickHouse refuses (insertSplitting); it returns the events of those rows
	// (uuid → the refusal), how many refused parts it split, and a temporary error.
	insert func(ctx context.Context, conn driver.Conn, rows *ingest.Rows) (refused map[uuid.UUID]error, splits int, err error)
	// open starts an INSERT into the table that a streamed batch's chunks send their rows
	// into (stream.go).
	open func(ctx context.Context, conn driver.Conn) (rawInsert, error)
	// parts adds the partitions the table's rows fall in (rawPartKeys): per time value, its
	// UTC month with the row's Kafka partition.
	parts func(rows *ingest.Rows, to map[int]bool)
}

// table describes a raw table whose rows of type T rows picks from a batch, each row of the
// event id names, inserted column by column (package chwrite); its column list is the `ch`
// tags of T.
func table[T any](name string, rows func(*ingest.Rows) []T, id func(*T) uuid.UUID) rawTable {
	return fedTable(name, rows, id, nil)
}

// fedTable is table for a raw table whose rows materialized views need
// (migrations.ViewFeeds): every INSERT of its rows is preceded by one of those the views need
// (needs; nil: every row) into its feed, a Null table with its columns the views read. The
// feed first: a raw part is only ever written once its rows fed the views, so the server may
// drop a replayed raw part (a duplicate, on a replicated table) without the views missing
// anything, and the replay's feed insert, which the Null table never drops, gives the views
// rows they count by distinct ids again, which changes nothing. The other order could commit
// the raw part, fail the feed, and lose the views' rows on the replay the server drops
// (DESIGN.md §5, "Replays dedup at insert"). A feed without any row to insert is skipped: the
// tool calls' holds only those with a folded value, normally none.
func fedTable[T any](name string, rows func(*ingest.Rows) []T, id func(*T) uuid.UUID, needs func(*T) bool) rawTable {
	t := mustTable[T](name)
	t.BlockRows = rawBlockRows
	short := strings.TrimPrefix(name, migrations.Database+".")
	parts := rawPartKeys[T](migrations.ByKafkaPartition(short))
	feed := func(context.Context, driver.Conn, []T) error { return nil }
	if f, ok := migrations.ViewFeeds[short]; ok {
		ft := mustTable[T](migrations.Database + "." + f)
		ft.BlockRows = rawBlockRows
		feed = func(ctx context.Context, conn driver.Conn, rs []T) error {
			if needs != nil {
				var fed []T
				for i := range rs {
					if needs(&rs[i]) {
						fed = append(fed, rs[i])
					}
				}
				rs = fed
			}
			if len(rs) == 0 {
				return nil
			}
			if err := ft.Insert(ctx, conn, rs); err != nil {
				return fmt.Errorf("feed %s: %w", ft.Name(), err)
			}
			return nil
		}
	} else if needs != nil {
		panic("BUG: raw table " + name + " has no feed (migrations.ViewFeeds)")
	}
	return rawTable{
		name: name,
		len:  func(r *ingest.Rows) int { return len(rows(r)) },
		open: func(ctx context.Context, conn driver.Conn) (rawInsert, error) {
			in, err := t.Open(ctx, conn)
			if err != nil {
				return nil, err
			}
			raw := &typedInsert[T]{in: in, rows: rows}
			if _, ok := migrations.ViewFeeds[short]; !ok {
				return raw, nil
			}
			// Each chunk's rows feed the views before they are sent into the open INSERT, whose
			// parts are written when it ends (or once its squashed rows fill a part): on the
			// batch's context, as the INSERT was opened.
			return &fedInsert[T]{typedInsert: raw, feed: func(rs []T) error { return feed(ctx, conn, rs) }}, nil
		},
		parts: func(r *ingest.Rows, to map[int]bool) {
			var keys []int
			for i, rs := 0, rows(r); i < len(rs); i++ {
				keys = parts(&rs[i], keys[:0])
				for _, k := range keys {
					to[k] = true
				}
			}
		},
		insert: func(ctx context.Context, conn driver.Conn, r *ingest.Rows) (map[uuid.UUID]error, int, error) {
			var refused map[uuid.UUID]error
			splits := 0
			for _, chunk := range byParts(rows(r), migrations.MaxPartitionsPerInsert, parts) {
				ref, n, err := insertSplitting(ctx, chunk, func(ctx context.Context, part []T) error {
					// A row the feed refuses for good (it has the raw table's columns) is
					// refused by both, and split down to like any other.
					if err := feed(ctx, conn, part); err != nil {
						return err
					}
					return t.Insert(ctx, conn, part)
				})
				splits += n
				if err != nil {
					return refused, splits, err
				}
				for _, rr := range ref {
					if refused == nil {
						refused = map[uuid.UUID]error{}
					}
					refused[id(&chunk[rr.index])] = rr.err
				}
			}
			return refused, splits, nil
		},
	}
}

// fedInsert is the rawInsert of a streamed raw table with a feed: each chunk's rows are
// inserted into the feed (a separate INSERT, ended at once) before they are sent into the
// table's open INSERT.
type fedInsert[T any] struct {
	*typedInsert[T]
	feed func([]T) error
}

func (f *fedInsert[T]) write(r *ingest.Rows) error {
	if err := f.feed(f.rows(r)); err != nil {
		return err
	}
	return f.typedInsert.write(r)
}

// hasFolded reports whether a tool call holds a value its cardinality caps folded: the rows
// the cardinality overflow views count (migration 0040), so the only ones tool_calls_feed
// needs.
func hasFolded(r *ingest.ToolCallRow) bool {
	return r.FoldedToolName != "" || r.FoldedClientName != "" || len(r.FoldedKeyPaths) > 0
}

// rawBlockRows is the rows per block sent of a raw table's insert (chwrite.Table.BlockRows).
// ClickHouse squashes an insert's blocks into its parts (a batch's rows still make one part
// per partition), while the client builds each block's columns in buffers it grows for the
// first block of every insert: smaller blocks grow and copy less. chwrite's BenchmarkInsert,
// client CPU per row: 16,384 rows 1.9-2.9 us, 8,192 1.8-2.1, 4,096 1.3-1.7, 2,048 1.1-1.4.
const rawBlockRows = 4096

// rawTables are the raw tables, one per row type of ingest.Rows.
var rawTables = []rawTable{
	fedTable("mcpulse.tool_calls", func(r *ingest.Rows) []ingest.ToolCallRow { return r.ToolCalls },
		func(r *ingest.ToolCallRow) uuid.UUID { return r.UUID }, hasFolded),
	fedTable("mcpulse.recruitment_events", func(r *ingest.Rows) []ingest.RecruitmentRow { return r.Recruitment },
		func(r *ingest.RecruitmentRow) uuid.UUID { return r.UUID }, nil),
	optionalTable(table("mcpulse.served_tool_schemas_in", func(r *ingest.Rows) []ingest.ServedSchemaRow { return r.ServedSchemas },
		func(r *ingest.ServedSchemaRow) uuid.UUID { return r.EventUUID })),
	table("mcpulse.mcp_initialize_events", func(r *ingest.Rows) []ingest.InitializeRow { return r.Initialize },
		func(r *ingest.InitializeRow) uuid.UUID { return r.UUID }),
	table("mcpulse.mcp_exceptions", func(r *ingest.Rows) []ingest.ExceptionRow { return r.Exceptions },
		func(r *ingest.ExceptionRow) uuid.UUID { return r.UUID }),
	table("mcpulse.other_events", func(r *ingest.Rows) []ingest.OtherEventRow { return r.OtherEvents },
		func(r *ingest.OtherEventRow) uuid.UUID { return r.UUID }),
	table("mcpulse.mcp_feedback", func(r *ingest.Rows) []ingest.FeedbackRow { return r.Feedback },
		func(r *ingest.FeedbackRow) uuid.UUID { return r.UUID }),
	table("mcpulse.mcp_resource_prompt_events", func(r *ingest.Rows) []ingest.ResourceRow { return r.Resources },
		func(r *ingest.ResourceRow) uuid.UUID { return r.UUID }),
	table("mcpulse.mcp_identify_events", func(r *ingest.Rows) []ingest.IdentifyRow { return r.Identify },
		func(r *ingest.IdentifyRow) uuid.UUID { return r.UUID }),
	table("mcpulse.tools_list_events", func(r *ingest.Rows) []ingest.ToolsListRow { return r.ToolsLists },
		func(r *ingest.ToolsListRow) uuid.UUID { return r.UUID }),
}

func optionalTable(t rawTable) rawTable {
	t.optional = true
	return t
}

// tableExists reports whether a table (database.name) exists.
func tableExists(ctx context.Context, conn driver.Conn, name string) (bool, error) {
	db, tbl, _ := strings.Cut(name, ".")
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = ? AND name = ?", db, tbl).Scan(&n); err != nil {
		return false, fmt.Errorf("look up table %s: %w", name, err)
	}
	return n > 0, nil
}

func mustTable[T any](name string) *chwrite.Table[T] {
	t, err := chwrite.NewTable[T](name)
	if err != nil {
		panic("BUG: " + err.Error())
	}
	return t
}

// Column lists of the other batch inserts. ClickHouse 18.16 refuses a batch without one
// ("expected 0 arguments"), and an explicit list keeps a later migration's new column from
// shifting values.

const (
	insertAudit = `INSERT INTO mcpulse.suppression_audit (audit_id, at, action, identity_hash, distinct_id,
instance_url, actor, reason, deleted_keys, previous_record, kafka_partition, kafka_offset, at_ms)`
	insertDeadLetters = `INSERT INTO mcpulse.dead_letters (dead_letter_id, received_at, source_topic,
reason, event_uuid, event, distinct_id, payload, dlq_partition, dlq_offset, reason_class)`
)

// row is one validated set of column values, kept so a failed batch can be rebuilt: a
// clickhouse-go batch cannot be re-sent after a failed Send (DESIGN.md §5).
type row []any

// insertRows sends rows in as few batches as keep each within migrations.MaxPartitionsPerInsert months
// (one batch unless the rows span more: a backfill, or clocks set years apart). Every row was
// built by this package with the column types of its table, so a failed Append is a BUG, not
// bad input. A retry after a later batch failed re-sends the earlier ones, which the
// replacing raw tables and the uniqExact rollups absorb (DESIGN.md §5).
func insertRows(ctx context.Context, conn driver.Conn, query string, rows []row) error {
	for _, chunk := range byMonths(rows, migrations.MaxPartitionsPerInsert, rowTimes) {
		if err := insertBatch(ctx, conn, query, chunk); err != nil {
			return err
		}
	}
	return nil
}

func insertBatch(ctx context.Context, conn driver.Conn, query string, rows []row) error {
	if len(rows) == 0 {
		return nil
	}
	batch, err := conn.PrepareBatch(ctx, query)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if err := batch.Append(r...); err != nil {
			_ = batch.Abort()
			return fmt.Errorf("BUG: append to %s: %w", tableOf(query), err)
		}
	}
	return batch.Send()
}

// byMonths cuts rows, in order, into runs whose time values (times appends a row's) fall in at
// most max UTC months. Every time column counts, not only the table's partition key, so a
// rollup a materialized view partitions by another of the row's times (the funnel by
// invitation_sent_at) stays within the limit too.
func byMonths[T any](rows []T, max int, times func(*T, []time.Time) []time.Time) [][]T {
	return byParts(rows, max, monthKeys(times))
}

// byParts cuts rows, in order, into runs whose partition keys (keys appends a row's) number at
// most max.
func byParts[T any](rows []T, max int, keys func(*T, []int) []int) [][]T {
	var (
		out   [][]T
		start int
		parts []int // the distinct keys of rows[start:i]
		own   []int
	)
	for i := range rows {
		own = keys(&rows[i], own[:0])
		slices.Sort(own)
		own = slices.Compact(own) // a row's time values often share a month
		added := 0
		for _, k := range own {
			if !slices.Contains(parts, k) {
				added++
			}
		}
		if len(parts)+added > max && i > start {
			out = append(out, rows[start:i])
			start = i
			parts = parts[:0]
		}
		for _, k := range own {
			if !slices.Contains(parts, k) {
				parts = append(parts, k)
			}
		}
	}
	if start < len(rows) {
		out = append(out, rows[start:])
	}
	return out
}

// monthKeys is the keys function (byParts) of a row's UTC months, year*12+month, one per time
// value times appends.
func monthKeys[T any](times func(*T, []time.Time) []time.Time) func(*T, []int) []int {
	var ts []time.Time
	return func(r *T, dst []int) []int {
		ts = times(r, ts[:0])
		for _, t := range ts {
			y, m, _ := t.UTC().Date()
			dst = append(dst, y*12+int(m))
		}
		return dst
	}
}

// rawPartKeys is the keys function (byParts) of a raw row's partitions: for each of its time
// values, its UTC month and, for a table partitioned by Kafka partition too (byPartition;
// migration 0044), the row's Kafka partition, (year*12+month)<<32 | partition. A rollup a view
// fills from a raw table by a month has no more partitions than this counts. A row without a
// KafkaPartition field counts its months only.
func rawPartKeys[T any](byPartition bool) func(*T, []int) []int {
	months := monthKeys(structTimes[T]())
	f, ok := reflect.TypeFor[T]().FieldByName("KafkaPartition")
	if !ok || !byPartition {
		return months // a table partitioned by month only
	}
	if f.Type != reflect.TypeFor[int32]() {
		panic(fmt.Sprintf("BUG: raw row %s: KafkaPartition is not an int32", reflect.TypeFor[T]()))
	}
	off := f.Offset
	return func(r *T, dst []int) []int {
		n := len(dst)
		dst = months(r, dst)
		p := int(uint32(*(*int32)(unsafe.Add(unsafe.Pointer(r), off))))
		for i := n; i < len(dst); i++ {
			dst[i] = dst[i]<<32 | p
		}
		return dst
	}
}

// rowTimes appends the time.Time and non-nil *time.Time values of r.
func rowTimes(r *row, dst []time.Time) []time.Time {
	for _, v := range *r {
		switch x := v.(type) {
		case time.Time:
			dst = append(dst, x)
		case *time.Time:
			if x != nil {
				dst = append(dst, *x)
			}
		}
	}
	return dst
}

// structTimes returns a times function (byMonths) for struct type T: it appends the values of
// T's time.Time and non-nil *time.Time fields, in field order, read at their offsets (no
// reflection per row).
func structTimes[T any]() func(*T, []time.Time) []time.Time {
	type timeField struct {
		off uintptr
		ptr bool // *time.Time
	}
	var fields []timeField
	t := reflect.TypeFor[T]()
	for i := range t.NumField() {
		switch f := t.Field(i); f.Type {
		case reflect.TypeFor[time.Time]():
			fields = append(fields, timeField{off: f.Offset})
		case reflect.TypeFor[*time.Time]():
			fields = append(fields, timeField{off: f.Offset, ptr: true})
		}
	}
	return func(r *T, dst []time.Time) []time.Time {
		base := unsafe.Pointer(r)
		for _, f := range fields {
			if !f.ptr {
				dst = append(dst, *(*time.Time)(unsafe.Add(base, f.off)))
			} else if p := *(**time.Time)(unsafe.Add(base, f.off)); p != nil {
				dst = append(dst, *p)
			}
		}
		return dst
	}
}

func tableOf(query string) string {
	f := strings.Fields(query)
	if len(f) > 2 {
		return f[2]
	}
	return query
}

// lookupInvitationSentAt returns the send time of each invitation id already stored in
// ClickHouse (ids without a stored invitation are absent from the map).
func lookupInvitationSentAt(ctx context.Context, conn driver.Conn, ids []string) (map[string]time.Time, error) {
	out := make(map[string]time.Time, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := conn.Query(ctx, `SELECT invitation_id, min(timestamp) FROM mcpulse.recruitment_events
WHERE kind = 'invitation_sent' AND has(?, invitation_id) GROUP BY invitation_id`, ids)
	if err != nil {
		return nil, fmt.Errorf("look up invitations: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id string
			at time.Time
		)
		if err := rows.Scan(&id, &at); err != nil {
			return nil, err
		}
		out[id] = at.UTC()
	}
	return out, rows.Err()
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
