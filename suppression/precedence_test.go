package suppression_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gopkg.in/yaml.v3"

	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/stack"
	"github.com/mcpulse/mcpulse/suppression"
)

// precedenceTable is testdata/precedence.yaml.
type precedenceTable struct {
	Now   time.Time        `yaml:"now"`
	Cases []precedenceCase `yaml:"cases"`
}

type precedenceCase struct {
	Name      string `yaml:"name"`
	Held      string `yaml:"held"`
	HeldTTL   string `yaml:"held_ttl"`
	Reset     string `yaml:"reset"`
	ResetAt   string `yaml:"reset_at"`
	Responses []struct {
		Answer     string `yaml:"answer"`
		At         string `yaml:"at"`
		Campaign   string `yaml:"campaign"`
		DistinctID string `yaml:"distinct_id"`
		Want       string `yaml:"want"`
	} `yaml:"responses"`
	Want *struct {
		State      string `yaml:"state"`
		At         string `yaml:"at"`
		Campaign   string `yaml:"campaign"`
		DistinctID string `yaml:"distinct_id"`
		Held       bool   `yaml:"held"`
	} `yaml:"want"`
}

// loadedCase is a case with its times resolved.
type loadedCase struct {
	precedenceCase
	now       time.Time
	heldTTL   time.Duration
	reset     string // the :reset value, "" for none
	responses []suppression.Response
	outcomes  []suppression.Outcome
	want      string        // the :response value left, "" for none
	wantTTL   time.Duration // 0 for none
}

func loadPrecedence(t *testing.T) []loadedCase {
	t.Helper()
	data, err := os.ReadFile("testdata/precedence.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var table precedenceTable
	if err := yaml.Unmarshal(data, &table); err != nil {
		t.Fatal(err)
	}
	now := table.Now
	when := func(c, s string) time.Time {
		if d, err := time.ParseDuration(s); err == nil {
			return now.Add(d)
		}
		at, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatalf("case %q: time %q: want a duration from now or RFC 3339", c, s)
		}
		return at
	}
	or := func(s, def string) string {
		if s == "" {
			return def
		}
		return s
	}
	var out []loadedCase
	for _, c := range table.Cases {
		lc := loadedCase{precedenceCase: c, now: now, reset: c.Reset, want: c.Held}
		if c.HeldTTL != "" {
			if lc.heldTTL, err = time.ParseDuration(c.HeldTTL); err != nil {
				t.Fatalf("case %q: held_ttl: %v", c.Name, err)
			}
		}
		if c.ResetAt != "" {
			v, _ := json.Marshal(suppression.ResetWatermark{ResetAt: suppression.FormatTime(when(c.Name, c.ResetAt)), Actor: "ops", Reason: "asked"})
			lc.reset = string(v)
		}
		for _, r := range c.Responses {
			lc.responses = append(lc.responses, suppression.NewResponse(or(r.DistinctID, "d"), or(r.Campaign, "c"), r.Answer, when(c.Name, r.At)))
			lc.outcomes = append(lc.outcomes, suppression.Outcome(r.Want))
		}
		switch w := c.Want; {
		case w == nil:
			lc.want = ""
		case w.Held:
			lc.wantTTL = lc.heldTTL
		default:
			answer := map[string]string{suppression.StateAccepted: "accept", suppression.StateDeclined: "decline", suppression.StateCooldown: "cancel"}[w.State]
			r := suppression.NewResponse(or(w.DistinctID, "d"), or(w.Campaign, "c"), answer, when(c.Name, w.At))
			lc.want, lc.wantTTL = r.Value(), r.TTL(now)
		}
		out = append(out, lc)
	}
	if len(out) < 20 {
		t.Fatalf("only %d precedence cases", len(out))
	}
	return out
}

// TestPrecedenceFold runs every case through the Go fold, in the table's order (each step's
// outcome, the record left) and in every other order (the record left must not change).
func TestPrecedenceFold(t *testing.T) {
	for _, c := range loadPrecedence(t) {
		t.Run(c.Name, func(t *testing.T) {
			h := suppression.Held{Record: c.Held, ResetAt: suppression.ParseResetValue(c.reset)}
			for i, r := range c.responses {
				if got := h.Apply(r, c.now); got != c.outcomes[i] {
					t.Errorf("step %d (%s at %s): %s, want %s", i+1, r.Record.Response, suppression.FormatTime(r.At), got, c.outcomes[i])
				}
			}
			if h.Record != c.want {
				t.Errorf("record %q, want %q", h.Record, c.want)
			}
			for _, order := range permutations(len(c.responses)) {
				h := suppression.Held{Record: c.Held, ResetAt: suppression.ParseResetValue(c.reset)}
				for _, i := range order {
					h.Apply(c.responses[i], c.now)
				}
				if h.Record != c.want {
					t.Errorf("order %v: record %q, want %q", order, h.Record, c.want)
				}
			}
			if c.Held == "" {
				win, want := suppression.Fold(suppression.ParseResetValue(c.reset), c.responses, c.now), ""
				if win >= 0 {
					want = c.responses[win].Value()
				}
				if want != c.want {
					t.Errorf("Fold picked %d (%q), want %q", win, want, c.want)
				}
			}
		})
	}
}

// TestPrecedenceScript runs every case through the Redis script on a single redis-server and
// on a three-master Redis Cluster: the same step outcomes as the table (and so as the fold),
// the same stored value byte for byte, the TTL the fold gives, and, applied in reverse order,
// the same record.
func TestPrecedenceScript(t *testing.T) {
	cases := loadPrecedence(t)
	t.Run("single node", func(t *testing.T) {
		t.Parallel()
		s := stack.ForTest(t)
		rdb, err := stores.OpenRedis(context.Background(), s.RedisURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rdb.Close() })
		testPrecedenceScript(t, rdb, cases)
		testParseTimeAgainstScript(t, rdb)
	})
	t.Run("three-master cluster", func(t *testing.T) {
		t.Parallel()
		rdb, err := stores.OpenRedis(context.Background(), stack.RedisClusterForTest(t).URL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rdb.Close() })
		cc, ok := rdb.(*redis.ClusterClient)
		if !ok {
			t.Fatalf("a cluster URL opened as %T", rdb)
		}
		hashes := testPrecedenceScript(t, rdb, cases)
		// The cases only prove something about the cluster if their keys live on every master.
		masters := map[string]bool{}
		for _, h := range hashes {
			node, err := cc.MasterForKey(context.Background(), suppression.ResponseKey(h))
			if err != nil {
				t.Fatal(err)
			}
			masters[node.Options().Addr] = true
		}
		if len(masters) != 3 {
			t.Errorf("the cases' identities live on %d masters, want 3", len(masters))
		}
	})
}

func testPrecedenceScript(t *testing.T, rdb redis.UniversalClient, cases []loadedCase) (hashes []string) {
	ctx := context.Background()
	for _, c := range cases {
		for _, reverse := range []bool{false, true} {
			sum := sha256.Sum256([]byte(c.Name + map[bool]string{false: "", true: "/reversed"}[reverse]))
			hash := hex.EncodeToString(sum[:])
			hashes = append(hashes, hash)
			name := c.Name
			if reverse {
				name += " (reversed)"
			}
			t.Run(name, func(t *testing.T) {
				if c.Held != "" {
					if err := rdb.Set(ctx, suppression.ResponseKey(hash), c.Held, c.heldTTL).Err(); err != nil {
						t.Fatal(err)
					}
				}
				if c.reset != "" {
					if err := rdb.Set(ctx, suppression.ResetKey(hash), c.reset, 0).Err(); err != nil {
						t.Fatal(err)
					}
				}
				order := make([]int, len(c.responses))
				for i := range order {
					order[i] = i
				}
				if reverse {
					slices.Reverse(order)
				}
				for _, i := range order {
					r := c.responses[i]
					got, err := suppression.ApplyResponse(ctx, rdb, hash, r, c.now)
					if err != nil {
						t.Fatal(err)
					}
					if !reverse && got != c.outcomes[i] {
						t.Errorf("step %d (%s at %s): %s, want %s", i+1, r.Record.Response, suppression.FormatTime(r.At), got, c.outcomes[i])
					}
				}
				got, err := rdb.Get(ctx, suppression.ResponseKey(hash)).Result()
				if err == redis.Nil {
					got, err = "", nil
				}
				if err != nil {
					t.Fatal(err)
				}
				if got != c.want {
					t.Errorf("stored %q, want %q", got, c.want)
				}
				if got == "" {
					return
				}
				ttl, err := rdb.PTTL(ctx, suppression.ResponseKey(hash)).Result()
				if err != nil {
					t.Fatal(err)
				}
				// The TTL is set from the table's now; Redis counts down in real time meanwhile.
				if c.wantTTL == 0 && ttl >= 0 || c.wantTTL > 0 && (ttl > c.wantTTL || ttl < c.wantTTL-time.Minute) {
					t.Errorf("TTL %s, want %s (0: none)", ttl, c.wantTTL)
				}
			})
		}
	}
	return hashes
}

// permutations lists every order of n items.
func permutations(n int) [][]int {
	if n == 0 {
		return [][]int{{}}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for i := 0; i <= len(p); i++ {
			q := append(append(append([]int{}, p[:i]...), n-1), p[i:]...)
			out = append(out, q)
		}
	}
	return out
}

// parseTimeSpots are stored times with the instants they name, and (unreadable) ones that
// name none.
var (
	parseTimeSpots = map[string]string{
		"2026-11-29T10:00:00.000Z":       "2026-11-29T10:00:00Z",
		"2026-11-29T10:00:00+02:00":      "2026-11-29T08:00:00Z",
		"2026-11-29 10:00:00":            "2026-11-29T10:00:00Z",
		"2026-11-29t10:00:00.9999z":      "2026-11-29T10:00:00.999Z",
		"2026-11-29T10:00:00-0130":       "2026-11-29T11:30:00Z",
		"2024-02-29T00:00:00Z":           "2024-02-29T00:00:00Z",
		"1969-12-31T23:59:59.5Z":         "1969-12-31T23:59:59.5Z",
		"0000-03-01T00:00:00Z":           "0000-03-01T00:00:00Z",
		"2026-13-01T00:00:00Z":           "2027-01-01T00:00:00Z", // carried, as the script does
		"2100-02-29T00:00:00Z":           "2100-03-01T00:00:00Z",
		"2026-11-29T10:00:00.000+00:00":  "2026-11-29T10:00:00Z",
		"2026-11-29T10:00:00.000000001Z": "2026-11-29T10:00:00Z",
	}
	parseTimeUnreadable = []string{"", "2026-11-29", "2026-11-29T10:00Z", "2026-11-29T10:00:00+2", "2026-11-29T10:00:00 Z",
		"2026-11-29T10:00:00.Z", "２０２６-11-29T10:00:00Z", "2026-11-29T10:00:00Z\n"}
)

// ParseTime reads what the script reads: spot checks against hand-computed instants here, and
// against the script itself in testParseTimeAgainstScript.
func TestParseTimeReadsTheScriptsGrammar(t *testing.T) {
	for in, want := range parseTimeSpots {
		got, ok := suppression.ParseTime(in)
		w, err := time.Parse(time.RFC3339Nano, want)
		if err != nil {
			t.Fatal(err)
		}
		if !ok || !got.Equal(w) {
			t.Errorf("ParseTime(%q) = %s, %v; want %s", in, got, ok, want)
		}
	}
	for _, in := range parseTimeUnreadable {
		if got, ok := suppression.ParseTime(in); ok {
			t.Errorf("ParseTime(%q) = %s, want unreadable", in, got)
		}
	}
}

// testParseTimeAgainstScript has the script's own reader (epoch_ms) read the spot checks and a
// few thousand mutations of valid times, and wants ParseTime to agree on every one; and has the
// reset script's writer (iso_ms) write random instants, wanting FormatTime's text.
func testParseTimeAgainstScript(t *testing.T, rdb redis.UniversalClient) {
	ctx := context.Background()
	inputs := slices.Collect(maps.Keys(parseTimeSpots))
	inputs = append(inputs, parseTimeUnreadable...)
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("0123456789-:.+TtZz 9")
	for range 3000 {
		b := []byte(suppression.FormatTime(time.UnixMilli(rng.Int64N(5e12) - 1e12)))
		switch rng.IntN(4) {
		case 0:
			b[rng.IntN(len(b))] = alphabet[rng.IntN(len(alphabet))]
		case 1:
			b = b[:rng.IntN(len(b))]
		case 2:
			b = append(b[:len(b)-1], []string{"+05:30", "-0800", "", "z", ".5Z", "Z "}[rng.IntN(6)]...)
		case 3:
			i := rng.IntN(len(b))
			b = append(b[:i:i], append([]byte{alphabet[rng.IntN(len(alphabet))]}, b[i:]...)...)
		}
		inputs = append(inputs, string(b))
	}
	read := redis.NewScript(suppression.LuaEpochMs + `
local out = {}
for i = 1, #ARGV do
  local ms = epoch_ms(ARGV[i])
  if ms then out[i] = string.format('%.0f', ms) else out[i] = '' end
end
return out`)
	args := make([]any, len(inputs))
	for i, in := range inputs {
		args[i] = in
	}
	got, err := read.Run(ctx, rdb, []string{suppression.ResponseKey(strings.Repeat("0", 64))}, args...).StringSlice()
	if err != nil {
		t.Fatal(err)
	}
	readable := 0
	for i, in := range inputs {
		want := ""
		if at, ok := suppression.ParseTime(in); ok {
			want = strconv.FormatInt(at.UnixMilli(), 10)
			readable++
		}
		if got[i] != want {
			t.Errorf("%q: the script reads %q ms, ParseTime %q", in, got[i], want)
		}
	}
	if readable < 1000 || readable > len(inputs)-500 {
		t.Errorf("%d of %d inputs readable: the mutations do not probe both sides", readable, len(inputs))
	}

	// The reset script's writer (iso_ms) writes what FormatTime writes, which epoch_ms reads back.
	write := redis.NewScript(suppression.LuaEpochMs + suppression.LuaISOMs + `
local out = {}
for i = 1, #ARGV do
  local s = iso_ms(tonumber(ARGV[i]))
  out[i] = s .. ' ' .. string.format('%.0f', epoch_ms(s))
end
return out`)
	ms := []any{int64(0), int64(-1), int64(951782400000), int64(4107542399999), int64(1764410400123), int64(-62135596800000)}
	for range 2000 {
		ms = append(ms, rng.Int64N(4e12)-5e11)
	}
	written, err := write.Run(ctx, rdb, []string{suppression.ResponseKey(strings.Repeat("0", 64))}, ms...).StringSlice()
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range ms {
		at := time.UnixMilli(m.(int64))
		if want := suppression.FormatTime(at) + " " + strconv.FormatInt(m.(int64), 10); written[i] != want {
			t.Errorf("%d ms: the script writes %q, want %q", m, written[i], want)
		}
	}
}
