package migrations

import (
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// DefaultDDLTimeout bounds each ON CLUSTER statement's wait for every host when
// Options.DDLTimeout is 0. It stays under the client's 60 s read timeout
// (stores.OpenClickHouse), so the server's answer, which says how many hosts have not run the
// statement yet, arrives before the connection gives up.
const DefaultDDLTimeout = 30 * time.Second

// legacySettingsRevision is the last protocol revision at which clickhouse-go sends query
// settings in the old binary form (lib/proto/query.go, Setting.encode: revision <=
// DBMS_MIN_REVISION_WITH_SETTINGS_SERIALIZED_AS_STRINGS, 54429); ClickHouse 18.16 is 54412.
const legacySettingsRevision = 54429

// DDLTimeoutSettings returns the query settings that make conn's server wait at most timeout
// (whole seconds, at least 1) for the hosts of an ON CLUSTER statement:
// distributed_ddl_task_timeout, encoded so the server reads the number of seconds asked for.
//
// clickhouse-go sends every integer setting to a server of protocol revision 54429 or older
// (ClickHouse 18.16 and the like) as an unsigned varint, and such a server reads a signed
// setting (distributed_ddl_task_timeout is an Int64) as a zigzag varint: 15 arrives as -8, 30
// as 15 (docs/DESIGN.md §8, "clickhouse-go and signed settings on old servers"). So for those
// servers the value is sent zigzag-encoded (2 × seconds), which the server decodes to seconds;
// newer servers get settings as strings, and the plain number.
//
// Errors: timeout under a second, or the server's version unreadable.
func DDLTimeoutSettings(conn driver.Conn, timeout time.Duration) (clickhouse.Settings, error) {
	secs := int(timeout / time.Second)
	if secs < 1 {
		return nil, fmt.Errorf("DDL timeout %s: want at least 1s", timeout)
	}
	v, err := conn.ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("read the server's protocol revision: %w", err)
	}
	if v.Revision <= legacySettingsRevision {
		secs *= 2 // zigzag: the server decodes 2n as n
	}
	return clickhouse.Settings{"distributed_ddl_task_timeout": secs}, nil
}
