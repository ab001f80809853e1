package misuse

import (
	"crypto/sha256"
	"slices"
	"sync"
	"unsafe"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// The derivation from the arguments (fromParameters) depends on the served schema and on the
// arguments' shape only: their member names, nesting and array lengths, the kind of each scalar
// (string, number, true, false, null), and of string values only whether they are the SDK's
// markers (all of which begin with '['), MarkerArgumentsValidated (which does too) or
// "tools/call" (a captured request's method). Calls of one tool by one client repeat a few
// shapes with other values, so DeriveCache keeps the outcome by (the schema text's SHA-256, the
// shape), and a repeated shape costs a scan of the bytes and a map lookup instead of the
// walk against the schema.

// DefaultDeriveCacheEntries is how many outcomes a DeriveCache keeps by default.
const DefaultDeriveCacheEntries = 4096

// MaxShapeBytes is the most bytes of shape (its encoding, below) and outcome key paths one
// DeriveCache entry holds; the arguments of a longer shape are walked each time, and an
// outcome past it is not kept. With DefaultDeriveCacheEntries it bounds what the cache holds
// to 4 MiB of text (about 5 MiB with the entries' headers).
const MaxShapeBytes = 1024

// maxMarkerBytes is the longest quoted string that can be one of the markers the walk
// compares string values with (MarkerArgumentsValidated, 44 bytes quoted, is the longest).
const maxMarkerBytes = 64

// DeriveCacheStats are a DeriveCache's counts, for metrics and benchmarks.
type DeriveCacheStats struct {
	// Hits and Misses count the lookups of cacheable calls; Uncached the calls not looked up
	// (no compiled schema with its text's hash, not known to be valid JSON, a shape over
	// MaxShapeBytes, a reported or response-derived outcome).
	Hits, Misses, Uncached uint64
	// Entries is how many outcomes are held now.
	Entries int
}

// DeriveCache is Derive with the derivation from the arguments cached by (served-schema hash,
// argument shape), least recently used evicted first: its size is bounded by its entries
// (each at most MaxShapeBytes of shape and key paths), however many calls it sees. Create it with NewDeriveCache; it is safe for concurrent use. Its
// outcomes equal Derive's for every Call.
type DeriveCache struct {
	mu    sync.Mutex
	lru   *simplelru.LRU[shapeKey, IgnoredKeys]
	stats DeriveCacheStats
	bufs  sync.Pool // *[]byte scratch for shapes
}

type shapeKey struct {
	schema [sha256.Size]byte
	shape  string
}

// NewDeriveCache returns an empty cache of at most entries outcomes (DefaultDeriveCacheEntries
// when entries < 1).
func NewDeriveCache(entries int) *DeriveCache {
	if entries < 1 {
		entries = DefaultDeriveCacheEntries
	}
	lru, err := simplelru.NewLRU[shapeKey, IgnoredKeys](entries, nil)
	if err != nil {
		panic("BUG: " + err.Error()) // only for a size < 1
	}
	c := &DeriveCache{lru: lru}
	c.bufs.New = func() any { b := make([]byte, 0, 256); return &b }
	return c
}

// Derive is Derive(call), the derivation from call.Parameters against call.Schema looked up
// first when call.Valid and call.Schema is a usable compiled schema with its text's hash (one
// that Listings compiled). The returned Keys are the caller's own.
func (c *DeriveCache) Derive(call Call) IgnoredKeys {
	if call.Reported || !call.Valid || call.Schema == nil || !call.Schema.hashed || call.Schema.unusable() != "" {
		c.count(func(s *DeriveCacheStats) { s.Uncached++ })
		return Derive(call)
	}
	if len(call.Response) > 0 {
		if keys, total, ok := FromResponse(call.Response); ok {
			c.count(func(s *DeriveCacheStats) { s.Uncached++ })
			return IgnoredKeys{Keys: keys, Total: total, Source: SourceResponse}
		}
	}
	bp := c.bufs.Get().(*[]byte)
	defer c.bufs.Put(bp)
	shape, ok := appendShape((*bp)[:0], call.Parameters, MaxShapeBytes)
	*bp = shape[:0]
	if !ok {
		c.count(func(s *DeriveCacheStats) { s.Uncached++ })
		return fromParameters(call.Schema, call.Parameters, true)
	}
	// The lookup's key views the scratch bytes: Get does not keep it.
	probe := shapeKey{schema: call.Schema.sum, shape: unsafe.String(unsafe.SliceData(shape), len(shape))}
	c.mu.Lock()
	k, hit := c.lru.Get(probe)
	if hit {
		c.stats.Hits++
		c.mu.Unlock()
		k.Keys = slices.Clone(k.Keys)
		return k
	}
	c.stats.Misses++
	c.mu.Unlock()
	k = fromParameters(call.Schema, call.Parameters, true)
	size := len(shape)
	for _, key := range k.Keys {
		size += len(key)
	}
	if size > MaxShapeBytes {
		return k // an entry holds at most MaxShapeBytes of shape and keys
	}
	held := k
	held.Keys = slices.Clone(k.Keys)
	c.mu.Lock()
	c.lru.Add(shapeKey{schema: call.Schema.sum, shape: string(shape)}, held)
	c.mu.Unlock()
	return k
}

func (c *DeriveCache) count(f func(*DeriveCacheStats)) {
	c.mu.Lock()
	f(&c.stats)
	c.mu.Unlock()
}

// Stats returns the cache's counts.
func (c *DeriveCache) Stats() DeriveCacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Entries = c.lru.Len()
	return s
}

// appendShape appends the shape of doc, which must be valid JSON, to dst: '{', '}', '[' and
// ']' as they come, a member name as its raw quoted text, a string value as its raw quoted
// text when it begins with '[' and is at most maxMarkerBytes long, 'T' for "tools/call" and
// 's' for any other, 'n' for a number, 't', 'f' and 'z' for true, false and null. Quoted
// texts delimit themselves and the rest is one byte per token, so two documents have the same
// shape exactly when they differ only in what the walk does not look at. ok is false (and dst
// is then partial) when the shape would be longer than limit bytes.
func appendShape(dst, doc []byte, limit int) ([]byte, bool) {
	base := len(dst)
	for i := 0; i < len(doc); {
		if len(dst)-base > limit {
			return dst, false
		}
		switch b := doc[i]; b {
		case ' ', '\t', '\n', '\r', ',', ':':
			i++
		case '{', '}', '[', ']':
			dst = append(dst, b)
			i++
		case '"':
			end := quotedEnd(doc, i)
			s := doc[i:end]
			j := end
			for j < len(doc) && (doc[j] == ' ' || doc[j] == '\t' || doc[j] == '\n' || doc[j] == '\r') {
				j++
			}
			switch {
			case j < len(doc) && doc[j] == ':': // a member name
				dst = append(dst, s...)
			case len(s) > 1 && s[1] == '[' && len(s) <= maxMarkerBytes:
				dst = append(dst, s...)
			case string(s) == toolsCallMethod:
				dst = append(dst, 'T')
			default:
				dst = append(dst, 's')
			}
			i = end
		case 't':
			dst = append(dst, 't')
			i += len("true")
		case 'f':
			dst = append(dst, 'f')
			i += len("false")
		case 'n':
			dst = append(dst, 'z')
			i += len("null")
		default: // a number
			dst = append(dst, 'n')
			for i++; i < len(doc); i++ {
				if c := doc[i]; !(c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
					break
				}
			}
		}
	}
	return dst, len(dst)-base <= limit
}

// quotedEnd returns the offset just after the JSON string that starts at doc[i] (a '"').
func quotedEnd(doc []byte, i int) int {
	for j := i + 1; j < len(doc); j++ {
		switch doc[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(doc)
}
