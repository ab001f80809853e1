package misuse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/go-json-experiment/json/jsontext"
)

// SchemaLimits bounds the input schemas the listing state compiles and the listings it keeps.
// Compiling takes time linear in a schema's size (resolve.go), so the size limits bound it, and
// MaxCompileTime bounds what a slow or shared machine adds: a schema past a limit is never
// compiled (or, past the time budget, stops compiling) and its calls are not measured
// (ReasonSchemaOverLimit). (github.com/santhosh-tekuri/jsonschema/v6 v6.0.1, used before, took
// time quadratic in the subschemas of a document: DESIGN.md §8.) A zero field takes its
// default.
type SchemaLimits struct {
	// MaxBytes is the most bytes of one schema's JSON text (default DefaultSchemaMaxBytes).
	MaxBytes int
	// MaxProperties is the most members of any one JSON object in a schema: a `properties`,
	// `$defs` or `patternProperties` map, or a schema object itself (default
	// DefaultSchemaMaxProperties).
	MaxProperties int
	// MaxMembers is the most members of all the JSON objects of a schema together (default
	// DefaultSchemaMaxMembers): what bounds the subschemas a compile resolves.
	MaxMembers int
	// MaxDepth is the deepest nesting of JSON objects and arrays in a schema, the root object
	// at depth 1 (default DefaultSchemaMaxDepth).
	MaxDepth int
	// MaxToolsPerListing is the most tools one listing keeps, all its pages together (default
	// DefaultListingMaxTools). A listing past it keeps its first tools by name and is never
	// complete: a call of a tool it cut is judged as if the listing lacked the tool, so it is
	// never reported as unknown.
	MaxToolsPerListing int
	// MaxCompileTime is the most time one schema's compilation may take (default
	// DefaultSchemaMaxCompileTime): past it the compilation stops and the schema is over the
	// `time` limit. Within the other limits it takes milliseconds; the budget bounds what a
	// slow or shared machine may add.
	MaxCompileTime time.Duration
}

// Defaults of SchemaLimits.
const (
	// DefaultSchemaMaxBytes: the MCP analytics SDK (@posthog/mcp) keeps a whole event under
	// 100 KB, so every schema it captures is smaller; 256 KiB leaves room for schemas read
	// back from served_tool_schemas or sent by other producers.
	DefaultSchemaMaxBytes = 256 << 10
	// DefaultSchemaMaxProperties: the SDK keeps 100 keys of an object it captures, and
	// hand-written tools declare tens. Compiling one object of 1,000 properties takes about
	// 5 ms of CPU (BenchmarkCompileProperties, 2 shared cores), 10,000 about 60 ms.
	DefaultSchemaMaxProperties = 1000
	// DefaultSchemaMaxMembers: a tool of 200 properties, each with a type, a description and
	// a few more keywords, has about 1,000 members. The worst schema within the defaults,
	// 9,961 members all subschemas, compiles in about 25 ms of CPU
	// (BenchmarkWorstListing/worst_within_limits, 2 shared cores).
	DefaultSchemaMaxMembers = 10_000
	// DefaultSchemaMaxDepth: the SDK cuts captures at depth 10; generated schemas of nested
	// models rarely pass 20.
	DefaultSchemaMaxDepth = 64
	// DefaultListingMaxTools: 10 pages of the SDK's 100 tools; servers list tens.
	DefaultListingMaxTools = 1000
	// DefaultSchemaMaxCompileTime: the worst schema within the other defaults compiles in
	// about 25 ms of CPU; a quarter second bounds how long one schema may hold its batch (and
	// the other partitions' events in it), with room for a loaded machine.
	DefaultSchemaMaxCompileTime = 250 * time.Millisecond
)

// Limit names a bound of SchemaLimits, as the label of the over-limit metric and the log.
type Limit string

const (
	LimitNone       Limit = ""
	LimitBytes      Limit = "bytes"      // SchemaLimits.MaxBytes
	LimitProperties Limit = "properties" // SchemaLimits.MaxProperties
	LimitMembers    Limit = "members"    // SchemaLimits.MaxMembers
	LimitDepth      Limit = "depth"      // SchemaLimits.MaxDepth
	LimitTools      Limit = "tools"      // SchemaLimits.MaxToolsPerListing
	LimitTime       Limit = "time"       // SchemaLimits.MaxCompileTime
)

// Limits lists every Limit, for metrics that export a zero per label.
var Limits = []Limit{LimitBytes, LimitProperties, LimitMembers, LimitDepth, LimitTools, LimitTime}

// withDefaults returns lim with its zero (or negative) fields set to their defaults.
func (lim SchemaLimits) withDefaults() SchemaLimits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&lim.MaxBytes, DefaultSchemaMaxBytes)
	def(&lim.MaxProperties, DefaultSchemaMaxProperties)
	def(&lim.MaxMembers, DefaultSchemaMaxMembers)
	def(&lim.MaxDepth, DefaultSchemaMaxDepth)
	def(&lim.MaxToolsPerListing, DefaultListingMaxTools)
	if lim.MaxCompileTime <= 0 {
		lim.MaxCompileTime = DefaultSchemaMaxCompileTime
	}
	return lim
}

// Validate refuses a negative limit (0 means the default), naming it.
func (lim SchemaLimits) Validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		v    int
	}{{"MaxBytes", lim.MaxBytes}, {"MaxProperties", lim.MaxProperties}, {"MaxMembers", lim.MaxMembers}, {"MaxDepth", lim.MaxDepth}, {"MaxToolsPerListing", lim.MaxToolsPerListing}} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("misuse: schema limit %s must not be negative (0: the default), got %d", f.name, f.v))
		}
	}
	if lim.MaxCompileTime < 0 {
		errs = append(errs, fmt.Errorf("misuse: schema limit MaxCompileTime must not be negative (0: the default), got %s", lim.MaxCompileTime))
	}
	return errors.Join(errs...)
}

// OverLimit is the first schema limit an input schema's JSON text passes.
type OverLimit struct {
	Limit Limit
	// Max is the limit's value; Seen how far the text went when it was found past it (for
	// bytes its length, for the others Max+1: the scan stops there).
	Max, Seen int
}

func (o OverLimit) Error() string {
	return fmt.Sprintf("input schema over the %s limit: %d, more than %d", o.Limit, o.Seen, o.Max)
}

// CheckSchema reports the first limit of lim (zero fields: defaults) the schema text passes,
// in one pass over its tokens (time linear in its length), or nil when it passes none. Text
// that is not JSON is not over a limit for what was read before the error: CompileSchema
// refuses it (ReasonSchemaUnsupported) without compiling. MaxToolsPerListing is not a
// schema's and is not checked here.
func CheckSchema(inputSchema []byte, lim SchemaLimits) *OverLimit {
	lim = lim.withDefaults()
	if len(inputSchema) > lim.MaxBytes {
		return &OverLimit{Limit: LimitBytes, Max: lim.MaxBytes, Seen: len(inputSchema)}
	}
	members := 0
	dec := jsontext.NewDecoder(bytes.NewReader(inputSchema), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	for {
		tok, err := dec.ReadToken()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return nil // not JSON: CompileSchema's parse says so
		}
		switch tok.Kind() {
		case '{', '[':
			if d := dec.StackDepth(); d > lim.MaxDepth {
				return &OverLimit{Limit: LimitDepth, Max: lim.MaxDepth, Seen: d}
			}
		case '"':
			// A member name: the enclosing object's length counts its names and values.
			if kind, n := dec.StackIndex(dec.StackDepth()); kind == '{' && n%2 == 1 {
				if inObject := int(n/2 + 1); inObject > lim.MaxProperties {
					return &OverLimit{Limit: LimitProperties, Max: lim.MaxProperties, Seen: inObject}
				}
				if members++; members > lim.MaxMembers {
					return &OverLimit{Limit: LimitMembers, Max: lim.MaxMembers, Seen: members}
				}
			}
		}
	}
}
