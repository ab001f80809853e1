package consumers

import "github.com/ClickHouse/clickhouse-go/v2/lib/driver"

// wrapClickHouse, when set (only by the faultinject build, faultinject.go), wraps the
// consumer's ClickHouse connection.
var wrapClickHouse func(driver.Conn) driver.Conn
