package chdb_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/big"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"
)

// result is a query's answer in a form two engines' answers can be compared in: column
// names, ClickHouse type names, and each row as one canonical line, sorted (ties under ORDER
// BY may come in either order on either engine).
type result struct {
	Columns []string
	Types   []string
	Rows    []string
}

// readAll runs query with args and reads every row.
func readAll(ctx context.Context, conn driver.Conn, query string, args ...any) (*result, error) {
	rows, err := conn.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	res := &result{}
	types := rows.ColumnTypes()
	dest := make([]any, len(types))
	for i, ct := range types {
		res.Columns = append(res.Columns, ct.Name())
		res.Types = append(res.Types, ct.DatabaseTypeName())
		dest[i] = reflect.New(ct.ScanType()).Interface()
	}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		cells := make([]string, len(dest))
		for i, d := range dest {
			cells[i] = canonical(reflect.ValueOf(d).Elem())
		}
		res.Rows = append(res.Rows, strings.Join(cells, " | "))
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.Sort(res.Rows)
	return res, nil
}

// canonical prints one cell so equal values print alike on both engines: times in UTC to the
// millisecond, floats to 10 significant digits (summation order may differ in the last bits),
// NULL as NULL, composite values as JSON.
func canonical(v reflect.Value) string {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return "NULL"
		}
		v = v.Elem()
	}
	switch x := v.Interface().(type) {
	case time.Time:
		return x.UTC().Format("2006-01-02 15:04:05.000")
	case uuid.UUID:
		return x.String()
	case big.Int:
		return x.String()
	case string:
		return strconv.Quote(x)
	}
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', 10, 64)
	case reflect.Slice, reflect.Array, reflect.Map, reflect.Struct:
		data, err := json.Marshal(v.Interface())
		if err == nil {
			return string(data)
		}
	}
	return fmt.Sprint(v.Interface())
}

// diff describes how got (the current engine's) differs from want (18.16's); "" when alike.
func diff(want, got *result) string {
	var b strings.Builder
	if !slices.Equal(want.Columns, got.Columns) {
		fmt.Fprintf(&b, "columns: 18.16 %q, current %q\n", want.Columns, got.Columns)
	}
	if !slices.Equal(want.Types, got.Types) {
		fmt.Fprintf(&b, "types: 18.16 %q, current %q\n", want.Types, got.Types)
	}
	onlyWant, onlyGot := minus(want.Rows, got.Rows), minus(got.Rows, want.Rows)
	if len(onlyWant)+len(onlyGot) > 0 {
		fmt.Fprintf(&b, "%d rows on 18.16, %d on current; %d only on 18.16, %d only on current\n",
			len(want.Rows), len(got.Rows), len(onlyWant), len(onlyGot))
		for i, r := range onlyWant {
			if i == 5 {
				fmt.Fprintf(&b, "  ...\n")
				break
			}
			fmt.Fprintf(&b, "  18.16 only:   %s\n", r)
		}
		for i, r := range onlyGot {
			if i == 5 {
				fmt.Fprintf(&b, "  ...\n")
				break
			}
			fmt.Fprintf(&b, "  current only: %s\n", r)
		}
	}
	return b.String()
}

// minus is the multiset a - b of sorted slices.
func minus(a, b []string) []string {
	var out []string
	i, j := 0, 0
	for i < len(a) {
		switch {
		case j >= len(b) || a[i] < b[j]:
			out = append(out, a[i])
			i++
		case a[i] == b[j]:
			i++
			j++
		default:
			j++
		}
	}
	return out
}

// recorder keeps the text of every statement clickhouse-go sends on a connection, with its
// "?" arguments bound: the driver logs it at debug level ("sending query") before sending.
type recorder struct {
	mu    sync.Mutex
	seen  map[string]bool
	texts []string
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	if rec.Message != "sending query" {
		return nil
	}
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "query" {
			r.add(a.Value.String())
			return false
		}
		return true
	})
	return nil
}

func (r *recorder) add(q string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[string]bool{}
	}
	if !r.seen[q] {
		r.seen[q] = true
		r.texts = append(r.texts, q)
	}
}

// statements returns the distinct statements recorded so far, in the order first sent.
func (r *recorder) statements() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.texts)
}

// openRecording opens dsn like stores.OpenClickHouse, with every statement's bound text
// kept in rec.
func openRecording(ctx context.Context, dsn string, rec *recorder) (driver.Conn, error) {
	opts, err := clickhouse.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	opts.Protocol = clickhouse.Native
	opts.ReadTimeout = time.Minute
	opts.Logger = slog.New(rec)
	conn, err := clickhouse.Open(opts)
	if err != nil {
		return nil, err
	}
	return conn, conn.Ping(ctx)
}

// boundBy reports whether text is query with its "?" placeholders replaced by values: the
// literal pieces between placeholders appear in order.
func boundBy(query string) *regexp.Regexp {
	parts := strings.Split(strings.TrimSpace(query), "?")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile(`(?s)\A` + strings.Join(parts, `.+?`) + `\z`)
}
