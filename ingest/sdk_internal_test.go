package ingest

import (
	"crypto/sha256"
	"encoding/binary"
	"testing"
)

// The truncation flag of a served schema is decided once per schema content (its SHA-256), and
// the cache of those decisions stays within truncatedCacheSize entries.
func TestTruncationIsDecidedOncePerSchemaContent(t *testing.T) {
	var c truncatedCache
	cut := []byte(`{"type":"object","properties":{"deep":"[Object]"}}`)
	whole := []byte(`{"type":"object","properties":{"q":{"type":"string","description":"caf\u00e9"}}}`)
	cutSum, wholeSum := sha256.Sum256(cut), sha256.Sum256(whole)
	if !c.of(cutSum, cut) || c.of(wholeSum, whole) {
		t.Fatalf("of(cut) = %v, of(whole) = %v; want true, false", c.of(cutSum, cut), c.of(wholeSum, whole))
	}
	// Asked again by the same hash, the answer comes from the cache, not from the text.
	if !c.of(cutSum, whole) || c.of(wholeSum, cut) {
		t.Error("a schema seen before was decoded again instead of answered by its SHA-256")
	}

	for i := range truncatedCacheSize + 10 {
		var s [sha256.Size]byte
		binary.BigEndian.PutUint64(s[:], uint64(i)+1)
		c.of(s, whole)
		if n := len(c.m); n > truncatedCacheSize {
			t.Fatalf("the cache holds %d entries, more than its bound %d", n, truncatedCacheSize)
		}
	}
	if n := len(c.m); n == 0 || n > truncatedCacheSize {
		t.Fatalf("the cache holds %d entries after %d schemas, want 1..%d", n, truncatedCacheSize+10, truncatedCacheSize)
	}
}
