package consumers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	chproto "github.com/ClickHouse/clickhouse-go/v2/lib/proto"

	"github.com/mcpulse/mcpulse/consumers/chwrite"
)

// insertSplitting halves a permanently refused insert down to the refused rows, stores every
// other row exactly once, and stops at a temporary error.
func TestInsertSplittingFindsTheRefusedRows(t *testing.T) {
	rows := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	for _, tc := range []struct {
		name       string
		bad        []int
		refuse     error
		wantSplits int
	}{
		{"none refused", nil, nil, 0},
		{"one row refused by the server", []int{6}, &chproto.Exception{Code: 53, Message: "type mismatch"}, 3},
		{"two rows the client cannot append", []int{0, 9}, fmt.Errorf("column distinct_id: %w: unknown enum value", chwrite.ErrAppend), 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stored []int
			refused, splits, err := insertSplitting(context.Background(), rows, func(_ context.Context, part []int) error {
				for _, r := range part {
					if slices.Contains(tc.bad, r) {
						return tc.refuse
					}
				}
				stored = append(stored, part...)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, r := range refused {
				got = append(got, rows[r.index])
				if !errors.Is(r.err, tc.refuse) {
					t.Errorf("row %d refused with %v, want %v", rows[r.index], r.err, tc.refuse)
				}
			}
			slices.Sort(stored)
			want := slices.DeleteFunc(slices.Clone(rows), func(r int) bool { return slices.Contains(tc.bad, r) })
			if !slices.Equal(got, tc.bad) || !slices.Equal(stored, want) || splits != tc.wantSplits {
				t.Errorf("refused %v, stored %v, %d splits; want %v, %v, %d", got, stored, splits, tc.bad, want, tc.wantSplits)
			}
		})
	}

	temporary := errors.New("connection reset")
	_, _, err := insertSplitting(context.Background(), rows, func(context.Context, []int) error { return temporary })
	if !errors.Is(err, temporary) {
		t.Errorf("a temporary error gave %v, want it returned for the batch to be retried", err)
	}
}
