// Package faults proves DESIGN.md §5's guarantees under injected faults: real
// `mcpulse consume` processes run against a real redis-server, clickhouse-server and an
// in-process Kafka broker (stack) while the tests SIGKILL and restart them, stop
// Redis and ClickHouse for 30 s, restart the broker, and let members join and leave the
// consumer group. One test runs on a replicated ClickHouse cluster instead (one shard, two
// clickhouse-server replicas and a ZooKeeper, migrated ON CLUSTER): a replica SIGKILLed and
// restarted, ZooKeeper stopped for 20 s, consumers dying mid-insert; it checks each replica
// after each fault and logs the raw rows inserted twice (rawDuplicatesWithoutFinal). After
// each run every figure the stores hold (raw row counts, every rollup
// row, every suppression record) must equal the generated corpus's expected outcome exactly
// (outcome.Compare, the comparison `mcpulse demo` makes), consumption must resume within
// 10 s of a store returning, and no consumer may log an error or report anything as lost.
//
// The package holds only tests; it runs on Linux (consumer processes die with the test
// through Pdeathsig). Faults happen at points chosen from seeded random generators and
// measured in stored rows, never in wall time, and the corpus is published in parts as the
// run advances, so each fault lands mid-run however fast the consumer is.
package faults
