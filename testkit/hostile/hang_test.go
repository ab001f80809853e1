package hostile

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/consumers"
	"github.com/mcpulse/mcpulse/internal/shutdown"
	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/testkit/testenv"
)

// hangingProxy forwards TCP connections to a server until it is frozen: from then on it
// passes no byte in either direction and closes nothing, as a server that stopped answering
// with its connections open looks to a client.
type hangingProxy struct {
	ln     net.Listener
	frozen atomic.Bool
	mu     sync.Mutex
	conns  []net.Conn
}

func newHangingProxy(t *testing.T, target string) *hangingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &hangingProxy{ln: ln}
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			c.Close()
		}
	})
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go p.pipe(in, out)
			go p.pipe(out, in)
		}
	}()
	return p
}

// pipe copies src to dst chunk by chunk, holding every chunk read once frozen.
func (p *hangingProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		for p.frozen.Load() {
			time.Sleep(10 * time.Millisecond)
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil { // io.EOF or a closed connection: the proxy is done with it
			return
		}
	}
}

// A consumer told to stop while ClickHouse hangs mid-batch (its connection open, nothing
// answered) returns from Run and Close within shutdown.Grace each, having committed nothing
// ClickHouse did not store: a consumer started once ClickHouse answers again stores every
// event exactly once.
func TestConsumerStopsWithinTheGraceWhileClickHouseHangs(t *testing.T) {
	e := env{testenv.New(t, testenv.Options{}), t}
	dsn, err := url.Parse(e.Stack.ClickHouseDSN)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newHangingProxy(t, dsn.Host)
	dsn.Host = proxy.ln.Addr().String()
	ch, err := stores.OpenClickHouse(context.Background(), dsn.String())
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()

	const first, second = 200, 200
	for i := range first {
		e.publish(call(1000+i, fmt.Sprintf("hang-%03d", i%50), "ses-hang", "srv", "claude-code", "search", map[string]any{"q": "x"}))
	}
	c, err := consumers.New(consumers.Config{
		Brokers: e.Stack.KafkaBrokers, Redis: e.Redis, ClickHouse: ch, DeadLetters: e.Publisher,
		BatchWait: 100 * time.Millisecond, IdleToDrain: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()
	count := func() uint64 {
		n := query[uint64](t, e.ClickHouse, "SELECT count() FROM mcpulse.tool_calls WHERE startsWith(distinct_id, 'hang-')")
		return n[0]
	}
	for deadline := time.Now().Add(time.Minute); count() < first; {
		if time.Now().After(deadline) {
			t.Fatalf("the first events were not stored within a minute (%d of %d)", count(), first)
		}
		time.Sleep(20 * time.Millisecond)
	}
	proxy.frozen.Store(true)
	for i := range second {
		e.publish(call(2000+i, fmt.Sprintf("hang-%03d", i%50), "ses-hang", "srv", "claude-code", "search", map[string]any{"q": "y"}))
	}
	time.Sleep(time.Second) // the hang's length before the stop, not a synchronization
	cancel()
	stopped := time.Now()
	select {
	case err := <-ran:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(shutdown.Grace):
		t.Fatalf("Run still running %s after its context ended, while ClickHouse hangs", shutdown.Grace)
	}
	if err := shutdown.Within(shutdown.Grace, "Close", c.Close); err != nil {
		t.Errorf("Close while ClickHouse hangs: %v", err)
	}
	t.Logf("the consumer stopped %s after its context ended", time.Since(stopped).Round(time.Millisecond))

	proxy.frozen.Store(false)
	e.drain()
	if n := query[uint64](t, e.ClickHouse, "SELECT count() FROM mcpulse.tool_calls FINAL WHERE startsWith(distinct_id, 'hang-')"); n[0] != first+second {
		t.Errorf("stored %d events once restarted, want %d", n[0], first+second)
	}
	if n := query[uint64](t, e.ClickHouse, "SELECT sum(calls) FROM mcpulse.v_tool_call_stats_hourly WHERE client_name = 'claude-code' AND server_name = 'srv' AND tool_name = 'search'"); n[0] != first+second {
		t.Errorf("the rollup counts %d calls, want %d (none lost or doubled)", n[0], first+second)
	}
}
