package consumers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"golang.org/x/sync/errgroup"
)

// Replays dropped by a current server (DESIGN.md §5, "Replays dedup at insert").
//
// A current ClickHouse hashes each inserted block, before splitting it by partition, so a
// replayed batch, whose rows arrive in other chunks and another order, is stored again. With
// insert_deduplication_token set, it hashes the token instead of the rows: the token, suffixed
// by each block's number (and, where it squashes several blocks into one, combined over them),
// names what is dropped. The consumer therefore sends one only where a token stands for a
// fixed set of rows:
//
//   - Only the single streamed INSERT of one raw table for one batch bears a token: never a
//     chunk stored as a batch of its own (a failed streamed batch read again, a batch beyond
//     migrations.MaxPartitionsPerInsert partitions, refused rows split by insertSplitting).
//   - Its token is the batch's nonce and the table's name, "<nonce>/<database.table>". The
//     settings go with the INSERT's query, before the batch's end offsets are known, so the
//     token is not derived from the ranges: a batch read for the first time draws a fresh
//     random nonce (96 bits), and the record of its ranges (ranges.go) carries it. A batch
//     replaying a recorded one reuses the record's nonce, only when the member holds every
//     range of the record (a rebalance can split a record between members: the rows of a part
//     of it under the first attempt's token would be dropped although the first attempt may
//     never have stored them), and only while it holds nothing outside the record's ranges; it
//     closes exactly on the recorded ranges, or its INSERTs are aborted and its offsets are
//     stored a chunk per batch (streamFailed). Every other batch draws a fresh nonce, so a
//     nonce never stands for two sets of rows.
//   - The record carries the nonce only when every one of the batch's INSERTs is stored all or
//     nothing: the server writes an INSERT's squashed blocks once they reach
//     min_insert_block_size_rows or min_insert_block_size_bytes, so an INSERT past either (its
//     rows; its bytes as chwrite.OpenInsert.Bytes bounds them, doubled) could leave its first
//     blocks stored by a member that died before the rest, and a replay under the same token,
//     its rows in other blocks, would be dropped in part. Below both the server writes the
//     INSERT's rows when it ends, every partition's part of them; the rows a replay sends are
//     the recorded ranges' rows, the same as the first attempt's (or fewer, where the log no
//     longer holds some), so whatever of the replay the server drops it holds already. The
//     rows of each INSERT are sent whole (chwrite.OpenInsert.Flush) before the record is
//     written: a member that dies after it leaves nothing unsent that a server completing
//     the INSERT on its own would miss.
//   - The blocks of a token-bearing INSERT are cut at rawBlockRows rows only, not where a
//     chunk ends (chwrite.OpenInsert.Write; openBatch.insert flushes each chunk's last rows
//     only for an INSERT without a token), so a replay holding the same rows sends as many
//     blocks, and is dropped. A replay that sends another number of blocks (rows the dedup
//     windows decide otherwise) hashes to another token and is stored again: a duplicate,
//     collapsed at merges, never a loss.
//   - An INSERT that the member aborts, or whose member dies, is not completed by a current
//     server: clickhouse-go ends it by closing its connection (never a Cancel packet, which a
//     server may take for the end of the data), and a server that loses the connection
//     mid-INSERT fails it (18.16 completed such an INSERT with the blocks it had, but bears no
//     token). So a replay under a recorded nonce that is cut, aborted, stores none of its part.
//   - If the record cannot be written (Redis did not answer within rangeWriteTimeout), the
//     INSERTs are completed anyway: no replay can know the nonce, so none is dropped (each is
//     stored again), and a later batch draws its own. A record left from an earlier attempt
//     under the same field names its own nonce and ranges, which keep their meaning.
//   - Only on a server that knows the setting (dedupTokens): ClickHouse 18.16 refuses an
//     INSERT with a setting it does not know. A single current server drops a token's blocks
//     only with non_replicated_deduplication_window set on the table
//     (migrations.EnableInsertDedup); a replicated table always does. An INSERT run with
//     insert_deduplicate = 0 ignores the token.

// dedupTokenSetting is the query setting naming an INSERT's blocks for deduplication.
const dedupTokenSetting = "insert_deduplication_token"

// tokenServer is what the consumer's ClickHouse says about insert tokens, asked once.
type tokenServer struct {
	known bool // the server knows dedupTokenSetting
	// minRows and minBytes are the server's min_insert_block_size_rows and _bytes: an
	// INSERT's squashed blocks are written once either is reached (0: no such bound).
	minRows, minBytes int64
}

// dedupTokenQuery reads the settings tokenServer holds, name → value.
const dedupTokenQuery = "SELECT name, value FROM system.settings WHERE name IN ('" + dedupTokenSetting +
	"', 'min_insert_block_size_rows', 'min_insert_block_size_bytes')"

// loadTokenServer asks conn's server about insert tokens. A server that does not know the
// setting (ClickHouse 18.16) gives known false. Errors are the query's.
func loadTokenServer(ctx context.Context, conn driver.Conn) (tokenServer, error) {
	rows, err := conn.Query(ctx, dedupTokenQuery)
	if err != nil {
		return tokenServer{}, fmt.Errorf("look up %s: %w", dedupTokenSetting, err)
	}
	defer rows.Close()
	var ts tokenServer
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return tokenServer{}, fmt.Errorf("look up %s: %w", dedupTokenSetting, err)
		}
		switch name {
		case dedupTokenSetting:
			ts.known = true
		case "min_insert_block_size_rows":
			ts.minRows, err = strconv.ParseInt(value, 10, 64)
		case "min_insert_block_size_bytes":
			ts.minBytes, err = strconv.ParseInt(value, 10, 64)
		}
		if err != nil {
			return tokenServer{}, fmt.Errorf("look up %s: %s = %q: %w", dedupTokenSetting, name, value, err)
		}
	}
	if err := rows.Err(); err != nil {
		return tokenServer{}, fmt.Errorf("look up %s: %w", dedupTokenSetting, err)
	}
	return ts, nil
}

// onePiece reports whether the server writes an INSERT of rows rows, of at most bytes bytes
// (chwrite.OpenInsert.Bytes), only when it ends: below min_insert_block_size_rows and half
// min_insert_block_size_bytes (a bound of 0 is none; both 0 squash nothing).
func (ts tokenServer) onePiece(rows, bytes int64) bool {
	if ts.minRows <= 0 && ts.minBytes <= 0 {
		return false
	}
	return (ts.minRows <= 0 || rows < ts.minRows) && (ts.minBytes <= 0 || 2*bytes < ts.minBytes)
}

// tokens caches the consumer's tokenServer: asked at the first generation, and again at the
// next while asking fails (no token meanwhile).
type tokens struct {
	server atomic.Pointer[tokenServer]
}

// dedupTokens returns what the consumer's ClickHouse says about insert tokens (asked once per
// Consumer, that is per connection pool), or ok false when it could not be asked (logged):
// batches then bear no token.
func (c *Consumer) dedupTokens(ctx context.Context) (tokenServer, bool) {
	if ts := c.tokens.server.Load(); ts != nil {
		return *ts, true
	}
	ts, err := loadTokenServer(ctx, c.cfg.ClickHouse)
	if err != nil {
		c.cfg.Logger.Warn("asking ClickHouse whether it knows insert_deduplication_token failed; batches bear no token until it answers", "err", err)
		return tokenServer{}, false
	}
	c.tokens.server.Store(&ts)
	if ts.known {
		c.cfg.Logger.Debug("streamed batches bear an insert_deduplication_token: a replay of a recorded one is dropped",
			"min_insert_block_size_rows", ts.minRows, "min_insert_block_size_bytes", ts.minBytes)
	}
	return ts, true
}

// newNonce draws a batch's nonce: 96 random bits, in hex.
func newNonce() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// validNonce reports whether s has newNonce's shape.
func validNonce(s string) bool {
	if len(s) != 24 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// dedupToken is the token of table's INSERT (database.name) in the batch of nonce.
func dedupToken(nonce, table string) string { return nonce + "/" + table }

// withDedupToken returns ctx for table's INSERT in the batch of nonce: with its token, or
// ctx itself for no nonce. The token replaces the query settings ctx holds (clickhouse-go
// keeps one map); settings applied after it replace it.
func withDedupToken(ctx context.Context, nonce, table string) context.Context {
	if nonce == "" {
		return ctx
	}
	return clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{dedupTokenSetting: dedupToken(nonce, table)}))
}

// reusableNonce is the nonce a member replaying a record reuses: the record's (nonce, "" for
// none) when the member holds every one of the record's ranges (mine of recorded), "" when
// it holds a part of them (the group rebalanced between the attempts).
func reusableNonce(recorded, mine map[topicPartition]batchRange, nonce string) string {
	if len(mine) < len(recorded) {
		return ""
	}
	for tp, rg := range recorded {
		if mine[tp] != rg {
			return ""
		}
	}
	return nonce
}

// drawNonce sets the nonce of streamed batch b, whose first chunk is p: none unless the server
// knows tokens (ts; nil while unknown); the nonce of the recorded batch rp replays when it
// may be reused (rp.current) and p lies within its ranges; a fresh one otherwise.
func (b *openBatch) drawNonce(ts *tokenServer, rp *replay, p *prepared) {
	b.nonce, b.replays, b.replaySeq = "", nil, 0
	if ts == nil || !ts.known {
		return
	}
	if ranges, nonce, seq, ok := rp.current(); ok && nonce != "" && within(ranges, p) {
		b.nonce, b.replays, b.replaySeq = nonce, ranges, seq
		return
	}
	b.nonce = newNonce()
}

// admits reports whether chunk p may join b: always, unless b reuses a recorded batch's nonce
// and p holds an event offset outside that batch's ranges.
func (b *openBatch) admits(p *prepared) bool {
	return b.replays == nil || within(b.replays, p)
}

// within reports whether every event message of p lies in ranges.
func within(ranges map[topicPartition]batchRange, p *prepared) bool {
	for i := range p.msgs {
		m := &p.msgs[i]
		if !dedupTopic(m.Topic) {
			continue
		}
		rg, ok := ranges[topicPartition{m.Topic, m.Partition}]
		if !ok || m.Offset < rg.start || m.Offset >= rg.end {
			return false
		}
	}
	return true
}

// wholeReplay reports whether b, which reuses a recorded batch's nonce, may close with it as
// it stands: no chunk failed (failed false), the recorded batch is still the one rp replays,
// and b holds it whole. A batch that reuses none always may.
func (b *openBatch) wholeReplay(rp *replay, failed bool) bool {
	if b.replays == nil {
		return true
	}
	return !failed && rp.at(b.replaySeq) && rp.complete(b.lastOffsets())
}

// errReplayCut: a batch that reuses a recorded batch's nonce could not close holding it whole.
var errReplayCut = errors.New("a replay of a recorded batch under its first attempt's insert tokens could not close on the recorded ranges: its inserts are aborted")

// flush sends every row b's INSERTs were written (rawInsert.flush), all at once.
func (b *openBatch) flush(ctx context.Context) error {
	g, _ := errgroup.WithContext(ctx)
	for i, in := range b.inserts {
		if in != nil {
			g.Go(func() error {
				if err := in.flush(); err != nil {
					return fmt.Errorf("insert %s: %w", rawTables[i].name, err)
				}
				return nil
			})
		}
	}
	return g.Wait()
}

// recordNonce is the nonce b's record carries: b's, when the server stores each of its
// INSERTs all or nothing (tokenServer.onePiece); "" otherwise, and for a batch without one.
func (b *openBatch) recordNonce(ts *tokenServer) string {
	if b.nonce == "" || ts == nil {
		return ""
	}
	for _, in := range b.inserts {
		if in == nil {
			continue
		}
		if rows, bytes := in.size(); !ts.onePiece(rows, bytes) {
			return ""
		}
	}
	return b.nonce
}
