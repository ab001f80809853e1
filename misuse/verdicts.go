package misuse

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Schema verdicts: what the listing state decided about an input schema text, by the SHA-256
// of the text, once. A consumer stores each new verdict with the served-schema registry
// (table schema_verdicts) before it commits the batch that decided it, and reads verdicts back
// at start and with a server version's stored listing (PutVerdicts), so that a schema found
// over a limit is never checked or compiled again, by this process or the next.

// VerdictKind is what was decided about a schema.
type VerdictKind string

const (
	// VerdictMeasured: the schema was within the limits and compiled; its calls are measured.
	VerdictMeasured VerdictKind = "measured"
	// VerdictOverLimit: the schema passed a SchemaLimits bound (SchemaVerdict.Over) and was
	// never compiled; its calls are not measured (ReasonSchemaOverLimit).
	VerdictOverLimit VerdictKind = "over_limit"
	// VerdictUnsupported: the schema was within the limits but could not be compiled
	// (ReasonSchemaUnsupported or ReasonSchemaTruncated).
	VerdictUnsupported VerdictKind = "unsupported"
)

// SchemaVerdict is the verdict on one schema text.
type SchemaVerdict struct {
	// Sum is the SHA-256 of the schema's JSON text exactly as served (served_tool_schemas'
	// schema_sha256).
	Sum  [sha256.Size]byte
	Kind VerdictKind
	// Over names the limit, its value and how far the text went (VerdictOverLimit only).
	Over OverLimit
	// At is when it was decided.
	At time.Time
}

// ParseSchemaSum reads a schema hash as stored: 64 lowercase or uppercase hex digits.
func ParseSchemaSum(s string) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	if len(s) != 2*sha256.Size {
		return sum, fmt.Errorf("misuse: schema hash of %d characters, want %d hex digits", len(s), 2*sha256.Size)
	}
	if _, err := hex.Decode(sum[:], []byte(s)); err != nil {
		return sum, fmt.Errorf("misuse: schema hash: %w", err)
	}
	return sum, nil
}

// DefaultMaxVerdicts bounds the verdicts a Listings keeps (ListingsConfig.MaxVerdicts): 288
// bytes each held (measured, Go 1.26 amd64), 4.5 MiB in all, and more than the 10,000 a
// consumer reads at start.
const DefaultMaxVerdicts = 16384

// limitValue is lim's value of limit l; ok is false for a limit SchemaLimits does not know
// (one added later, or stored by a newer consumer).
func (lim SchemaLimits) limitValue(l Limit) (v int, ok bool) {
	switch l {
	case LimitBytes:
		return lim.MaxBytes, true
	case LimitProperties:
		return lim.MaxProperties, true
	case LimitMembers:
		return lim.MaxMembers, true
	case LimitDepth:
		return lim.MaxDepth, true
	case LimitTools:
		return lim.MaxToolsPerListing, true
	case LimitTime: // in milliseconds, as OverLimit gives it
		return int(lim.MaxCompileTime.Milliseconds()), true
	}
	return 0, false
}

// reusable reports whether a stored verdict still holds under limits lim: an over-limit
// verdict holds unless its limit was raised since (to at least what the text was seen at:
// the text is then checked again); a limit lim does not know keeps its verdict. A measured or
// unsupported verdict holds; a kind this package does not know does not (the text is checked).
func (v SchemaVerdict) reusable(lim SchemaLimits) bool {
	switch v.Kind {
	case VerdictMeasured, VerdictUnsupported:
		return true
	case VerdictOverLimit:
	default:
		return false
	}
	now, known := lim.limitValue(v.Over.Limit)
	return !known || now <= v.Over.Max || now < v.Over.Seen
}

// newVerdicts returns the bounded verdict cache of a Listings.
func newVerdicts(n int) *simplelru.LRU[[sha256.Size]byte, SchemaVerdict] {
	c, _ := simplelru.NewLRU[[sha256.Size]byte, SchemaVerdict](n, nil)
	return c
}

// PutVerdicts adds verdicts read from a store (the most recent at start, or those of a server
// version's stored listing) to the state: a schema text with one is not checked again, and
// one over a limit is not compiled. A verdict already held is kept; one over a limit that
// was raised since is left out (the text is checked again).
func (l *Listings) PutVerdicts(vs []SchemaVerdict) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, v := range vs {
		if !v.reusable(l.cfg.Schemas) || l.verdicts.Contains(v.Sum) {
			continue
		}
		l.verdicts.Add(v.Sum, v)
	}
}

// PendingVerdicts returns the verdicts decided since they were last stored (VerdictsStored),
// oldest first: the verdicts a batch stores before its offsets are committed. A batch that
// fails leaves them pending for the next. At most MaxVerdicts are pending; past that the
// oldest are let go unstored (counted in ListingStats.VerdictsUnstored).
func (l *Listings) PendingVerdicts() []SchemaVerdict {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]SchemaVerdict, 0, len(l.pending))
	for _, k := range l.pendingOrder {
		if v, ok := l.pending[k]; ok {
			out = append(out, v)
		}
	}
	return out
}

// VerdictsStored marks verdicts as stored: they are no longer pending.
func (l *Listings) VerdictsStored(vs []SchemaVerdict) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, v := range vs {
		delete(l.pending, v.Sum)
	}
	kept := l.pendingOrder[:0]
	for _, k := range l.pendingOrder {
		if _, ok := l.pending[k]; ok {
			kept = append(kept, k)
		}
	}
	clear(l.pendingOrder[len(kept):])
	l.pendingOrder = kept
}

// decided records a verdict this process reached, under l.mu: cached and pending storage.
func (l *Listings) decided(v SchemaVerdict) {
	l.verdicts.Add(v.Sum, v)
	if _, ok := l.pending[v.Sum]; ok {
		return
	}
	if len(l.pending) >= l.cfg.MaxVerdicts {
		oldest := l.pendingOrder[0]
		l.pendingOrder = l.pendingOrder[1:]
		delete(l.pending, oldest)
		l.stats.VerdictsUnstored++
	}
	l.pending[v.Sum] = v
	l.pendingOrder = append(l.pendingOrder, v.Sum)
}

// storedVerdict returns the held verdict on sum and counts its reuse, under l.mu.
func (l *Listings) storedVerdict(sum [sha256.Size]byte) (SchemaVerdict, bool) {
	v, ok := l.verdicts.Get(sum)
	if ok {
		l.stats.VerdictsReused++
	}
	return v, ok
}

// newSchema notes a schema text the state took in, under l.mu, for UnjudgedSchemas (at most
// MaxVerdicts between two asks; past that a text is checked without its stored verdict being
// looked up, which costs a linear check, not a compile).
func (l *Listings) newSchema(sum [sha256.Size]byte) {
	if len(l.fresh) < l.cfg.MaxVerdicts {
		l.fresh = append(l.fresh, sum)
	}
}

// UnjudgedSchemas returns the hashes of the schema texts taken in (Observe, PutStored) since it
// was last asked that are still held, not yet checked and have no verdict held: those whose
// stored verdicts a consumer reads (PutVerdicts) before it judges calls by them.
func (l *Listings) UnjudgedSchemas() [][sha256.Size]byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out [][sha256.Size]byte
	for _, sum := range l.fresh {
		if r := l.schemas[sum]; r != nil && !r.checked && !l.verdicts.Contains(sum) {
			out = append(out, sum)
		}
	}
	clear(l.fresh)
	l.fresh = l.fresh[:0]
	return out
}
