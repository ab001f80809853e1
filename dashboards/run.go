package dashboards

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"github.com/mcpulse/mcpulse/sql"
)

// Column is one result column: its name and ClickHouse's type name (e.g. "Nullable(Float64)").
type Column struct{ Name, Type string }

// Result is a panel's rows.
type Result struct {
	Columns []Column
	// Rows hold one cell per column: nil (NULL), string, float64 (every number), or
	// time.Time (UTC; Date and DateTime alike). Other ClickHouse types (arrays, maps, tuples)
	// are given as their JSON text.
	Rows [][]any
}

// Run runs the panel's query with the filters it names bound as clickhouse-go "?" arguments
// (Filters.Args); nothing is string-built into the SQL.
func Run(ctx context.Context, conn driver.Conn, p Panel, f Filters) (*Result, error) {
	res, err := runQuery(ctx, conn, p.Query, f.Args(p))
	if err != nil {
		return nil, fmt.Errorf("panel %q (query %s): %w", p.ID, p.Query, err)
	}
	return res, nil
}

// runQuery runs the named query of package sql with args and reads every row.
func runQuery(ctx context.Context, conn driver.Conn, query string, args []any) (*Result, error) {
	rows, err := conn.Query(ctx, sql.Query(query), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	types := rows.ColumnTypes()
	res := &Result{Columns: make([]Column, len(types)), Rows: [][]any{}}
	dest := make([]any, len(types))
	for i, ct := range types {
		res.Columns[i] = Column{Name: ct.Name(), Type: ct.DatabaseTypeName()}
		dest[i] = reflect.New(ct.ScanType()).Interface()
	}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		row := make([]any, len(dest))
		for i, d := range dest {
			row[i] = cell(reflect.ValueOf(d).Elem())
		}
		res.Rows = append(res.Rows, row)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return res, nil
}

// cell turns one scanned value into nil, string, float64 or time.Time (see Result.Rows).
func cell(v reflect.Value) any {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	switch x := v.Interface().(type) {
	case string:
		return x
	case time.Time:
		return x.UTC()
	case uuid.UUID:
		return x.String()
	case bool:
		if x {
			return 1.0
		}
		return 0.0
	case big.Int:
		f, _ := new(big.Float).SetInt(&x).Float64()
		return f
	}
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return float64(v.Uint())
	case reflect.Float32, reflect.Float64:
		return v.Float()
	}
	data, err := json.Marshal(v.Interface())
	if err != nil {
		return fmt.Sprint(v.Interface())
	}
	return string(data)
}
