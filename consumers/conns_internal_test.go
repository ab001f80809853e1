package consumers

import (
	"testing"

	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/migrations"
)

// The default pool lets a streamed batch's INSERTs end while the next batch streams: a raw
// table added without raising stores.DefaultClickHouseConns would quietly end every batch's
// INSERTs before the next one streams.
func TestDefaultPoolEndsInsertsWhileTheNextBatchStreams(t *testing.T) {
	if stores.DefaultClickHouseConns < asyncEndConns || stores.DefaultClickHouseConns < streamConns {
		t.Errorf("stores.DefaultClickHouseConns = %d, want at least %d (2 × %d raw tables + %d feeds + 4)",
			stores.DefaultClickHouseConns, asyncEndConns, len(rawTables), len(migrations.ViewFeeds))
	}
}
