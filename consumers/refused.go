package consumers

import (
	"context"
	"errors"
	"fmt"

	chproto "github.com/ClickHouse/clickhouse-go/v2/lib/proto"

	"github.com/mcpulse/mcpulse/consumers/chwrite"
)

// Poison batches. A store error is temporary (the network, a server restarting, memory, a
// missing table before migrations ran: the batch is retried as it is) or permanent: ClickHouse
// refuses the rows themselves and would refuse them for ever. A permanently refused insert is
// split in halves until each refused part is one row; those rows' events are dead-lettered with
// class store_refused and everything else is stored, so one bad event never stalls its
// partition.

// permanentCodes are the ClickHouse error codes that refuse an insert for what its rows hold
// (src/Common/ErrorCodes.cpp).
var permanentCodes = map[int32]string{
	6:   "CANNOT_PARSE_TEXT",
	27:  "CANNOT_PARSE_INPUT_ASSERTION_FAILED",
	41:  "CANNOT_PARSE_DATETIME",
	53:  "TYPE_MISMATCH",
	69:  "ARGUMENT_OUT_OF_BOUND",
	70:  "CANNOT_CONVERT_TYPE",
	131: "TOO_LARGE_STRING_SIZE",
	252: "TOO_MANY_PARTS", // also: rows over more than max_partitions_per_insert_block partitions
	321: "VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE",
	469: "VIOLATED_CONSTRAINT",
}

// permanent reports whether an insert error refuses the rows themselves.
func permanent(err error) bool {
	// A block the client library could not append (its values do not fit the column
	// types) is refused like a refusal by the server.
	if errors.Is(err, chwrite.ErrAppend) {
		return true
	}
	var ex *chproto.Exception
	if errors.As(err, &ex) {
		_, ok := permanentCodes[ex.Code]
		return ok
	}
	return false
}

// refusedRow is one row ClickHouse refused for good.
type refusedRow struct {
	index int   // its index in the rows given to insertSplitting
	err   error // the refusal
}

// insertSplitting inserts rows with insert; when a part is refused permanently it is split in
// halves and each half tried again, down to single rows, which are returned as refused. A
// temporary error stops it and is returned (the caller retries the batch; parts already
// stored collapse in the replacing tables). splits counts the refused parts that were split.
func insertSplitting[T any](ctx context.Context, rows []T, insert func(context.Context, []T) error) (refused []refusedRow, splits int, err error) {
	var try func(lo, hi int) error
	try = func(lo, hi int) error {
		if lo == hi {
			return nil
		}
		err := insert(ctx, rows[lo:hi])
		switch {
		case err == nil:
			return nil
		case !permanent(err):
			return err
		case hi-lo == 1:
			refused = append(refused, refusedRow{index: lo, err: err})
			return nil
		}
		splits++
		mid := lo + (hi-lo)/2
		if err := try(lo, mid); err != nil {
			return err
		}
		return try(mid, hi)
	}
	return refused, splits, try(0, len(rows))
}

// refusalReason is the dead-letter reason of a refused row's event.
func refusalReason(table string, err error) string {
	return fmt.Sprintf("stored nowhere: ClickHouse refuses it in %s for good: %v", table, err)
}
