package chdb

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"

	chproto "github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
	"github.com/ClickHouse/clickhouse-go/v2/lib/proto"
)

// Engine runs one SQL statement on an embedded ClickHouse engine (chDB's libchdb.so) and
// returns its output in the named ClickHouse output format ("Native", "TabSeparated", ...).
// A refused statement's error text is ClickHouse's own, "Code: N. DB::Exception: ...".
type Engine interface {
	Query(query, format string) ([]byte, error)
}

// ServerInfo is what the server says about itself in the protocol's hello.
type ServerInfo struct {
	Version  string // the engine's version(), e.g. "26.7.2.1"
	Timezone string // the engine's timezone(), e.g. "Etc/UTC"
}

// Revision is the native-protocol revision the server speaks: the newest before per-column
// custom serialization (54454) and server-side query parameters (54459), so clickhouse-go
// binds "?" arguments into the query text itself, exactly as it does against ClickHouse 18.16
// (revision 54413), and data blocks keep the plain Native layout of the engine's output.
const Revision = 54453

// Server answers ClickHouse's native TCP protocol (the subset clickhouse-go uses: hello,
// ping, queries, and INSERT ... FORMAT Native with data blocks; no compression) by running
// each statement on an Engine, so mcpulse's own code — migrations.Up, the consumer's batch
// inserts, the jobs, dashboards.Run — runs unchanged against the engine. Statements run one
// at a time (the engine has one session).
type Server struct {
	Engine Engine
	Info   ServerInfo
	// TempDir holds the Native files INSERT data is handed to the engine through.
	TempDir string
	// Log receives one line per refused statement and per connection error. Default: discard.
	Log *slog.Logger

	mu   sync.Mutex // serializes Engine calls and the temporary file
	next int        // temporary file counter
}

// Serve accepts connections on ln until it is closed.
func (s *Server) Serve(ln net.Listener) error {
	if s.Log == nil {
		s.Log = slog.New(slog.DiscardHandler)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			if err := s.serveConn(c); err != nil && !errors.Is(err, io.EOF) {
				s.Log.Warn("connection ended", "remote", c.RemoteAddr().String(), "err", err)
			}
		}()
	}
}

// session is one client connection.
type session struct {
	s        *Server
	r        *chproto.Reader
	w        net.Conn
	buf      *chproto.Buffer
	revision uint64
}

func (s *Server) serveConn(c net.Conn) error {
	ss := &session{s: s, r: chproto.NewReader(c), w: c, buf: new(chproto.Buffer)}
	code, err := ss.r.UVarInt()
	if err != nil {
		return err
	}
	if chproto.ClientCode(code) != chproto.ClientCodeHello {
		return fmt.Errorf("first packet %d, want hello", code)
	}
	var hello chproto.ClientHello
	if err := hello.Decode(ss.r); err != nil {
		return fmt.Errorf("client hello: %w", err)
	}
	ss.revision = min(uint64(hello.ProtocolVersion), Revision)
	if ss.revision < proto.DBMS_MIN_REVISION_WITH_SETTINGS_SERIALIZED_AS_STRINGS+1 {
		return fmt.Errorf("client protocol revision %d is older than this server supports", hello.ProtocolVersion)
	}
	major, minor, patch := splitVersion(s.Info.Version)
	sh := chproto.ServerHello{Name: "ClickHouse", Major: major, Minor: minor, Revision: Revision,
		Timezone: s.Info.Timezone, DisplayName: "chdb", Patch: patch}
	sh.EncodeAware(ss.buf, int(ss.revision))
	if err := ss.flush(); err != nil {
		return err
	}
	for {
		code, err := ss.r.UVarInt()
		if err != nil {
			return err
		}
		switch chproto.ClientCode(code) {
		case chproto.ClientCodePing:
			chproto.ServerCodePong.Encode(ss.buf)
			if err := ss.flush(); err != nil {
				return err
			}
		case chproto.ClientCodeQuery:
			if err := ss.query(); err != nil {
				return err
			}
		case chproto.ClientCodeCancel:
			// Statements run to completion; the client reads and drops what is left.
		default:
			return fmt.Errorf("unsupported client packet %d", code)
		}
	}
}

func splitVersion(v string) (major, minor, patch int) {
	parts := strings.Split(v, ".")
	nums := make([]int, 3)
	for i := 0; i < len(parts) && i < 3; i++ {
		nums[i], _ = strconv.Atoi(parts[i])
	}
	return nums[0], nums[1], nums[2]
}

func (ss *session) flush() error {
	_, err := ss.w.Write(ss.buf.Buf)
	ss.buf.Reset()
	return err
}

// readBlocks reads client data packets up to the empty block that ends them.
func (ss *session) readBlocks() ([]*proto.Block, error) {
	var out []*proto.Block
	for {
		code, err := ss.r.UVarInt()
		if err != nil {
			return nil, err
		}
		if chproto.ClientCode(code) != chproto.ClientCodeData {
			return nil, fmt.Errorf("client packet %d where a data block was due", code)
		}
		if _, err := ss.r.Str(); err != nil { // external table name
			return nil, err
		}
		b := proto.NewBlock()
		if err := b.Decode(ss.r, ss.revision); err != nil {
			return nil, fmt.Errorf("client data block: %w", err)
		}
		if len(b.Columns) == 0 && b.Rows() == 0 {
			return out, nil
		}
		out = append(out, b)
	}
}

// query answers one Query packet: the query, its (empty) external tables, then either the
// statement's result blocks or, for INSERT ... FORMAT Native, the table's header and the
// client's data blocks.
func (ss *session) query() error {
	var q chproto.Query
	if err := q.DecodeAware(ss.r, int(ss.revision)); err != nil {
		return fmt.Errorf("query packet: %w", err)
	}
	if q.Compression != chproto.CompressionDisabled {
		// The client's data blocks follow compressed, which this server cannot read: say
		// why, then close the connection.
		if err := ss.fail(errors.New("Code: 48. DB::Exception: the chDB test server does not support compression (NOT_IMPLEMENTED)")); err != nil {
			return err
		}
		return errors.New("client asked for compression")
	}
	if _, err := ss.readBlocks(); err != nil { // external tables: clickhouse-go sends none
		return err
	}
	settings := make([]setting, 0, len(q.Settings))
	for _, st := range q.Settings {
		settings = append(settings, setting{st.Key, st.Value})
	}
	if m := streamingInsert.FindStringSubmatch(q.Body); m != nil {
		return ss.insert(m[1], m[2], m[3], settings)
	}
	out, err := ss.s.run(q.Body, "Native", settings)
	if err != nil {
		return ss.fail(err)
	}
	blocks, err := decodeNative(out)
	if err != nil {
		return ss.fail(fmt.Errorf("Code: 1001. DB::Exception: reading the engine's Native output: %v", err))
	}
	if ReturnsRows(q.Body) {
		// The engine's Native output names DateTime('UTC') plain DateTime (it writes types
		// for a client of revision 0, which predates time zones in type names) and writes
		// nothing at all for an empty result, so the result's types come from DESCRIBE.
		h, err := ss.s.header(q.Body, settings)
		if err != nil {
			return ss.fail(err)
		}
		for _, b := range blocks {
			if err := retype(b, h); err != nil {
				return ss.fail(fmt.Errorf("Code: 1001. DB::Exception: %v", err))
			}
		}
		if len(blocks) == 0 {
			blocks = []*proto.Block{h}
		}
	}
	for _, b := range blocks {
		if err := ss.sendBlock(b); err != nil {
			return err
		}
	}
	chproto.ServerCodeEndOfStream.Encode(ss.buf)
	return ss.flush()
}

func (ss *session) sendBlock(b *proto.Block) error {
	chproto.ServerCodeData.Encode(ss.buf)
	ss.buf.PutString("")
	if b.Rows() == 0 {
		// A header: names and types only. A column's own encoding would write a state
		// prefix (LowCardinality) that a client reads only when there are rows.
		if err := b.EncodeHeader(ss.buf, ss.revision); err != nil {
			return err
		}
		for _, c := range b.Columns {
			ss.buf.PutString(c.Name())
			ss.buf.PutString(string(c.Type()))
		}
		return ss.flush()
	}
	if err := b.Encode(ss.buf, ss.revision); err != nil {
		return err
	}
	return ss.flush()
}

// fail sends an engine error as a ClickHouse exception; clickhouse-go returns it as
// *clickhouse.Exception with the same code.
func (ss *session) fail(err error) error {
	ss.s.Log.Info("statement refused", "err", err)
	code, name, msg := parseException(err.Error())
	chproto.ServerCodeException.Encode(ss.buf)
	e := chproto.Exception{Code: chproto.Error(code), Name: name, Message: msg}
	e.EncodeAware(ss.buf, int(ss.revision))
	return ss.flush()
}

var exceptionText = regexp.MustCompile(`(?s)^Code: (\d+)\. (DB::Exception): (.*)$`)

// parseException splits ClickHouse's "Code: N. DB::Exception: message" text.
func parseException(text string) (code int32, name, message string) {
	if m := exceptionText.FindStringSubmatch(strings.TrimSpace(text)); m != nil {
		n, _ := strconv.ParseInt(m[1], 10, 32)
		return int32(n), m[2], m[3]
	}
	return 1001, "DB::Exception", text // STD_EXCEPTION
}

// streamingInsert matches the INSERT clickhouse-go's PrepareBatch sends: the statement, then
// FORMAT Native and no data (the data follows as blocks). Groups: table, column list, and
// any SETTINGS clause.
var streamingInsert = regexp.MustCompile(`(?is)^\s*INSERT\s+INTO\s+([^\s(]+)\s*(\([^)]*\))?\s*(SETTINGS\s+.*?)?\s*FORMAT\s+Native\s*$`)

// insert answers a streaming INSERT: the header with the listed columns' types, then the
// client's blocks, handed to the engine as one INSERT ... FROM INFILE of a Native file.
func (ss *session) insert(table, columnList, settingsClause string, settings []setting) error {
	header, err := ss.s.insertHeader(table, columnList)
	if err != nil {
		return ss.fail(err)
	}
	if err := ss.sendBlock(header); err != nil {
		return err
	}
	blocks, err := ss.readBlocks()
	if err != nil {
		return err
	}
	var data chproto.Buffer
	for _, b := range blocks {
		if err := b.Encode(&data, 0); err != nil {
			return ss.fail(fmt.Errorf("Code: 1001. DB::Exception: re-encoding the client's block: %v", err))
		}
	}
	if len(blocks) > 0 {
		if err := ss.s.insertNative(table, columnList, settingsClause, data.Buf, settings); err != nil {
			return ss.fail(err)
		}
	}
	chproto.ServerCodeEndOfStream.Encode(ss.buf)
	return ss.flush()
}

// insertHeader is the empty block naming the columns an INSERT fills, in its order: the
// listed ones, or every column that is neither MATERIALIZED nor ALIAS.
func (s *Server) insertHeader(table, columnList string) (*proto.Block, error) {
	out, err := s.run("DESCRIBE TABLE "+table, "TabSeparated", nil)
	if err != nil {
		return nil, err
	}
	types := map[string]string{}
	var all []string
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		f := strings.Split(line, "\t")
		if len(f) < 3 {
			continue
		}
		f[0], f[1] = unescapeTSV(f[0]), unescapeTSV(f[1])
		types[f[0]] = f[1]
		if f[2] != "MATERIALIZED" && f[2] != "ALIAS" && f[2] != "EPHEMERAL" {
			all = append(all, f[0])
		}
	}
	names := all
	if columnList != "" {
		names = nil
		for _, c := range strings.Split(strings.Trim(columnList, "()"), ",") {
			names = append(names, strings.Trim(strings.TrimSpace(c), "`\""))
		}
	}
	b := proto.NewBlock()
	for _, n := range names {
		t, ok := types[n]
		if !ok {
			return nil, fmt.Errorf("Code: 16. DB::Exception: No such column %s in table %s (NO_SUCH_COLUMN_IN_TABLE)", n, table)
		}
		if err := b.AddColumn(n, column.Type(t)); err != nil {
			return nil, fmt.Errorf("Code: 1001. DB::Exception: column %s of type %s: %v", n, t, err)
		}
	}
	return b, nil
}

// insertNative hands Native data to the engine through a temporary file.
func (s *Server) insertNative(table, columnList, settingsClause string, data []byte, settings []setting) error {
	s.mu.Lock()
	s.next++
	path := filepath.Join(s.TempDir, fmt.Sprintf("insert-%d.native", s.next))
	s.mu.Unlock()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return err
	}
	defer os.Remove(path)
	stmt := fmt.Sprintf("INSERT INTO %s %s FROM INFILE '%s' %s FORMAT Native", table, columnList, path, settingsClause)
	_, err := s.run(stmt, "TabSeparated", settings)
	return err
}

// header is the empty result block of a row-returning statement, from DESCRIBE.
func (s *Server) header(query string, settings []setting) (*proto.Block, error) {
	out, err := s.run("DESCRIBE TABLE ("+query+"\n)", "TabSeparated", settings)
	if err != nil {
		return nil, err
	}
	b := proto.NewBlock()
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		f := strings.Split(line, "\t")
		if len(f) < 2 {
			continue
		}
		name, typ := unescapeTSV(f[0]), unescapeTSV(f[1])
		if err := b.AddColumn(name, column.Type(typ)); err != nil {
			return nil, fmt.Errorf("Code: 1001. DB::Exception: result column %s of type %s: %v", name, typ, err)
		}
	}
	return b, nil
}

// zoneInType matches the time zone argument of DateTime('tz') and DateTime64(p, 'tz').
var zoneInType = regexp.MustCompile(`(DateTime(?:64\(\d+)?)(?:\(|, )'[^']*'\)`)

// retype gives b's columns the types of header h where they differ only by a time zone,
// which the Native encoding does not carry (the bytes are the same).
func retype(b, h *proto.Block) error {
	if len(b.Columns) != len(h.Columns) {
		return fmt.Errorf("result has %d columns, DESCRIBE says %d", len(b.Columns), len(h.Columns))
	}
	for i, c := range b.Columns {
		want := h.Columns[i].Type()
		if c.Type() == want || zoneInType.ReplaceAllStringFunc(string(want), stripZone) != string(c.Type()) {
			continue
		}
		var data chproto.Buffer
		c.Encode(&data)
		nc, err := want.Column(c.Name(), b.ServerContext)
		if err != nil {
			return err
		}
		if err := nc.Decode(data.Reader(), c.Rows()); err != nil {
			return fmt.Errorf("column %s as %s: %w", c.Name(), want, err)
		}
		b.Columns[i] = nc
	}
	return nil
}

// stripZone turns DateTime('tz') into DateTime and DateTime64(p, 'tz') into DateTime64(p).
func stripZone(t string) string {
	m := zoneInType.FindStringSubmatch(t)
	if strings.HasPrefix(m[1], "DateTime64") {
		return m[1] + ")"
	}
	return m[1]
}

// unescapeTSV undoes TabSeparated escaping of one field.
func unescapeTSV(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case '0':
			b.WriteByte(0)
		case 'r':
			b.WriteByte('\r')
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// setting is one query-level setting the client sent.
type setting struct{ name, value string }

var settingName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// run runs one statement with the client's settings applied for it alone.
func (s *Server) run(query, format string, settings []setting) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var applied []string
	defer func() {
		for _, name := range applied {
			_, _ = s.Engine.Query("SET "+name+" = DEFAULT", "TabSeparated")
		}
	}()
	for _, st := range settings {
		if !settingName.MatchString(st.name) {
			return nil, fmt.Errorf("Code: 115. DB::Exception: Unknown setting %q (UNKNOWN_SETTING)", st.name)
		}
		if _, err := s.Engine.Query(fmt.Sprintf("SET %s = '%s'", st.name, escapeString(st.value)), "TabSeparated"); err != nil {
			return nil, err
		}
		applied = append(applied, st.name)
	}
	return s.Engine.Query(query, format)
}

func escapeString(v string) string {
	return strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v)
}

// decodeNative splits the engine's Native output into blocks.
func decodeNative(out []byte) ([]*proto.Block, error) {
	rd := bytes.NewReader(out)
	r := chproto.NewReader(rd)
	var blocks []*proto.Block
	for {
		// A clean end of the output is io.EOF at the start of a block; inside one it is
		// io.ErrUnexpectedEOF, an error.
		b := proto.NewBlock()
		err := b.Decode(r, 0)
		if errors.Is(err, io.EOF) {
			return blocks, nil
		}
		if err != nil {
			return nil, err
		}
		blocks = append(blocks, b)
	}
}

// leadingNoise is whitespace, comments and opening parentheses before a statement's keyword.
var leadingNoise = regexp.MustCompile(`^(?:\s+|--[^\n]*\n?|/\*(?s:.*?)\*/|\()*`)

// ReturnsRows reports whether a statement is a query with a result (SELECT, WITH ...), after
// any leading comments and parentheses.
func ReturnsRows(query string) bool {
	rest := strings.ToUpper(query[len(leadingNoise.FindString(query)):])
	return strings.HasPrefix(rest, "SELECT") || strings.HasPrefix(rest, "WITH")
}
