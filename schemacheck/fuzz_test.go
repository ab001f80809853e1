package schemacheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// FuzzCheck feeds arbitrary bytes as an input schema, and an arbitrary string as the tool and
// server name, to the check. Nothing may panic (checkTool is called directly, without the
// recover Check adds), and the JSON model must hold its invariants:
//
//   - the parser accepts exactly what encoding/json accepts (below the nesting bound);
//   - JSON.stringify output is valid JSON and a fixed point (stringify(parse(out)) == out);
//   - SerializedSize equals the UTF-16 length of the output and the size Check reports
//     without injection; an injected schema is itself canonical;
//   - the full coverage walk covers at least what the basic one does.
//
// Seeds: testdata/fuzz/FuzzCheck (corpus schemas, $ref cycles, deep nesting, odd numbers,
// lone surrogates, invalid UTF-8, odd names) and the cases below.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`,
		`{"$defs":{"A":{"$ref":"#/$defs/B"},"B":{"$ref":"#/$defs/A"}},"properties":{"p":{"$ref":"#/$defs/A"}}}`,
		`{"$ref":"#"}`,
		`[1e400,-0,5e-324,1e21,1e-7,123456789012345678901234567890]`,
		`{"properties":{"required":{"properties":{"properties":{"type":"object"}}}},"required":["required"]}`,
		`"\ud800\udfff\ud83d"`,
		`{"a":1,"a":2,"1":0,"0":1}`,
		`{"properties":{"o":{"properties":{"x":true,"y":false,"z":"s"}}}}`,
	} {
		f.Add([]byte(s), "tool-name")
	}
	f.Fuzz(func(t *testing.T, data []byte, name string) {
		tool := Tool{Name: name, InputSchema: data}
		on, _ := checkTool(tool, Settings{ServerName: name}.resolved(), nil)
		off, _ := checkTool(tool, Settings{ServerName: name, InjectContext: new(false)}.resolved(), nil)
		r := Check([]Tool{tool, tool}, Settings{ServerName: name, MaxTools: 1, MaxToolChars: 10})
		if _, err := json.Marshal(r); err != nil {
			t.Fatalf("report does not marshal: %v", err)
		}
		if on.FullNested < on.Nested || on.FullDescribed < on.Described || on.Described > on.Nested || on.FullDescribed > on.FullNested {
			t.Fatalf("coverage invariants: %+v", on)
		}

		v, err := parseJS(data)
		if errors.Is(err, errTooDeep) {
			return
		}
		if (err == nil) != json.Valid(data) {
			t.Fatalf("parseJS err = %v, json.Valid = %v", err, json.Valid(data))
		}
		if err != nil {
			if on.SchemaChars != 0 || len(on.Problems) == 0 {
				t.Fatalf("invalid JSON must be a problem with size 0: %+v", on)
			}
			return
		}
		out := appendJS(nil, v)
		if !json.Valid(out) {
			t.Fatalf("stringify output is not JSON: %q", out)
		}
		again, err := Stringify(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not a fixed point:\n%q\n%q (%v)", out, again, err)
		}
		size, err := SerializedSize(data)
		if err != nil || size != utf16Len(out) || size != off.SchemaChars {
			t.Fatalf("sizes: SerializedSize %d (%v), utf16Len %d, Check without injection %d", size, err, utf16Len(out), off.SchemaChars)
		}
		inj, ok, err := InjectContext(data, "")
		if err != nil || ok != on.Injected {
			t.Fatalf("InjectContext: %v %v, Check injected %v", ok, err, on.Injected)
		}
		if ok {
			canon, err := Stringify(inj)
			if err != nil || !bytes.Equal(canon, inj) || utf16Len(inj) != on.SchemaChars {
				t.Fatalf("injected schema: %v, size %d vs %d", err, utf16Len(inj), on.SchemaChars)
			}
		} else if on.SchemaChars != off.SchemaChars {
			t.Fatalf("not injected but sizes differ: %d vs %d", on.SchemaChars, off.SchemaChars)
		}
	})
}
