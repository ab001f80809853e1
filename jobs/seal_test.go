package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/testkit/testenv"
)

// A seal records its watermark (the start of the hour before now's) only after the sealed
// counts are in: when the insert of the counts fails, rollup_seals stays as it was.
func TestSealRecordsTheWatermarkOnlyAfterTheCounts(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	ch, ctx := env.ClickHouse, context.Background()
	watermarks := func() (n uint64, newest time.Time) {
		t.Helper()
		if err := ch.QueryRow(ctx, `SELECT count(), max(sealed_through) FROM mcpulse.rollup_seals FINAL WHERE rollup = ?`,
			IgnoredKeyRatesRollup).Scan(&n, &newest); err != nil {
			t.Fatal(err)
		}
		return n, newest
	}

	now := time.Date(2026, 3, 10, 12, 30, 15, 500, time.UTC)
	res, err := SealIgnoredKeyRates(ctx, ch, now)
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(2026, 3, 10, 11, 0, 0, 0, time.UTC)
	if !res.SealedThrough.Equal(want) || !res.SealedAt.Equal(now.Truncate(time.Second)) {
		t.Errorf("sealed through %v at %v, want %v at %v", res.SealedThrough, res.SealedAt, want, now.Truncate(time.Second))
	}
	if n, newest := watermarks(); n != 1 || !newest.Equal(want) {
		t.Errorf("rollup_seals: %d rows, newest %v; want 1, %v", n, newest, want)
	}

	if err := ch.Exec(ctx, `DROP TABLE mcpulse.ignored_key_rates_hourly_sealed`); err != nil {
		t.Fatal(err)
	}
	if _, err := SealIgnoredKeyRates(ctx, ch, now.Add(2*time.Hour)); err == nil {
		t.Fatal("seal without its table succeeded")
	}
	if n, newest := watermarks(); n != 1 || !newest.Equal(want) {
		t.Errorf("after a failed seal rollup_seals has %d rows, newest %v; want the old %v", n, newest, want)
	}
}
