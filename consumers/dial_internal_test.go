package consumers

import (
	"bufio"
	"bytes"
	"io"
	"math/rand/v2"
	"net"
	"testing"
)

// countingConn counts the reads of the connection it wraps.
type countingConn struct {
	net.Conn
	reads int
}

func (c *countingConn) Read(p []byte) (int, error) {
	c.reads++
	return c.Conn.Read(p)
}

// A partition reader's connection hands kafka-go's 4 KiB reads the bytes the socket sent, in
// order, with one socket read per fetchReadBuffer bytes instead of one per 4 KiB.
func TestBufferedReadsReturnTheStreamWithFewerSocketReads(t *testing.T) {
	want := make([]byte, 3<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range want {
		want[i] = byte(rng.Uint32())
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = c.Write(want)
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	counted := &countingConn{Conn: conn}
	r := bufio.NewReaderSize(bufferReads(counted), 4096) // as kafka-go reads a connection
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes that differ from the %d sent", len(got), len(want))
	}
	// Loopback hands over at most what the socket buffer holds per read, so a read may return
	// less than fetchReadBuffer; 4 KiB reads would have taken 768.
	if limit := len(want) / 4096 / 4; counted.reads > limit {
		t.Errorf("%d socket reads for %d bytes, want at most %d", counted.reads, len(want), limit)
	}
}
