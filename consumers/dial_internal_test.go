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
	// As kafka-go reads a fetch response: a 4 KiB bufio.Reader, each message value read
	// whole into a slice of its size (2,600 bytes: an SDK-shaped event).
	r := bufio.NewReaderSize(bufferReads(counted), 4096)
	var got []byte
	for len(got) < len(want) {
		value := make([]byte, min(2600, len(want)-len(got)))
		if _, err := io.ReadFull(r, value); err != nil {
			t.Fatal(err)
		}
		got = append(got, value...)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes that differ from the %d sent", len(got), len(want))
	}
	// Loopback hands over at most what the socket buffer holds per read, so a read may return
	// less than fetchReadBuffer; reads of the 4 KiB buffer alone take about 770.
	if limit := len(want) / 4096 / 4; counted.reads > limit {
		t.Errorf("%d socket reads for %d bytes, want at most %d", counted.reads, len(want), limit)
	}
}
