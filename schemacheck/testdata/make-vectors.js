#!/usr/bin/env node
// Regenerates jsvectors.json, the reference figures schema_test.go and corpus_test.go check
// the Go implementation against. Everything here is computed by JavaScript itself
// (JSON.parse, JSON.stringify, String.length), so the Go side is held to what a JS client
// measures, not to a second reading of the spec.
//
//   node schemacheck/testdata/make-vectors.js   (from the repository root; Node >= 12)
//
// Sections:
//   cases:  hand-picked and pseudo-random JSON texts -> JSON.stringify(JSON.parse(text)) and
//           its length in UTF-16 code units, or error: true when JSON.parse throws. Inputs
//           that are not valid UTF-8 are given as input_b64 and decoded the way a JS client
//           decodes bytes (TextDecoder, U+FFFD for invalid sequences, BOM kept).
//   corpus: for every tool of testdata/mcp-tool-schemas, the stringified length of its
//           inputSchema as served and after the context injection of the ratchet's definitions
//           (implemented below independently of the Go code, with a 615-character
//           description of which 8 characters JSON escapes, as the SDK's), and the nested description coverage figures (basic and full),
//           also implemented independently below.
'use strict';
const fs = require('fs');
const path = require('path');

const here = __dirname;
const corpusDir = path.join(here, '..', '..', 'testdata', 'mcp-tool-schemas');

// ---------- cases ----------

const cases = [];
function add(name, input) { cases.push({ name, input }); }
function addBytes(name, bytes) { cases.push({ name, input_b64: Buffer.from(bytes).toString('base64') }); }

// key order: array indices first (ascending), then insertion order; duplicates keep the
// first position and the last value
add('keys-plain', '{"b":1,"a":2,"c":3}');
add('keys-numeric', '{"b":1,"10":2,"9":3,"a":4,"0":5,"1":6}');
add('keys-index-bounds', '{"x":0,"4294967295":1,"4294967294":2,"4294967296":3,"99999999999":4,"01":5,"-1":6,"1.0":7,"1e3":8," 1":9,"00":10,"":11}');
add('keys-dup', '{"a":1,"b":2,"a":3}');
add('keys-dup-types', '{"a":{"x":1},"b":null,"a":[1,"two",{"3":3}]}');
add('keys-dup-numeric', '{"2":"a","1":"b","2":"c","x":1,"x":2}');
add('keys-dup-many', '{' + Array.from({ length: 40 }, (_, i) => `"k${i % 23}":${i}`).join(',') + '}');
add('keys-proto', '{"__proto__":{"a":1},"constructor":2,"toString":3,"hasOwnProperty":4}');
add('keys-nested-props', '{"type":"object","properties":{"required":{"type":"string"},"2":{"type":"number"},"properties":{"type":"object","properties":{"1":{},"0":{},"type":{}}}},"required":["required","2"]}');
add('keys-escaped', '{"a\\"b":1,"\\u0031":2,"\\u0030":3,"c\\\\d":4}');

// numbers: JS Number::toString
const nums = ['0', '-0', '1', '-1', '1.0', '1.50', '100', '1e0', '1E+2', '1e-0', '0.1', '0.5e1',
  '1e21', '1e20', '123456789012345678901', '999999999999999999999', '1e-6', '0.000001', '1e-7',
  '0.0000001', '1.5e-7', '-2.5e-7', '2.5e-5', '1234.5678e10', '1e300', '1.7976931348623157e308',
  '1.7976931348623158e308', '1e309', '-1e309', '1e400', '-1e400', '5e-324', '2e-324', '3e-324',
  '1e-400', '-1e-400', '4.35', '0.1e-6', '12345678901234567890', '9007199254740993',
  '9007199254740992', '-9007199254740993', '0.30000000000000004', '3.14159265358979323846',
  '123e-20', '1.23e-5', '100e-8', '0e10', '-0.0e-5', '1e+21', '1e+20', '4294967295',
  '4294967296.5', '0.000001234', '1.2345e-6', '9.999999999999999e20', '9.999999999999999e21',
  '1' + '0'.repeat(400), '0.' + '0'.repeat(400) + '1', '2.2250738585072014e-308', '4.9406564584124654e-324'];
add('numbers', '[' + nums.join(',') + ']');
for (const n of nums.slice(0, 30)) add('number ' + n, n);

// strings: JSON.stringify escaping, UTF-16 length
add('str-escapes', '"\\u0000\\u0001\\u0007\\b\\t\\n\\u000b\\f\\r\\u000e\\u001f\\u0020\\"\\\\\\/"');
add('str-upper-hex', '"\\u00E9\\u00e9\\uABCD\\uabcd"');
add('str-del-c1', '"\\u007f\\u0080\\u009f\\u00a0"');
add('str-line-seps', '"a\\u2028b\\u2029c"');
add('str-raw-nonascii', '"é ü ñ 中文 ☃ 😀 𝄞 \u2028 \u2029"');
add('str-pair-escaped', '"\\ud83d\\ude00\\uD834\\uDD1E"');
add('str-lone-high', '"x\\ud83dy"');
add('str-lone-low', '"x\\ude00y"');
add('str-high-high-low', '"\\ud83d\\ud83d\\ude00"');
add('str-low-high', '"\\udfff\\ud800"');
add('str-high-end', '"\\udbff"');
add('str-high-then-raw-astral', '"\\ud83d😀"');
add('str-max', '"\\udbff\\udfff\\uffff\\ufffe\\ufeff"');
add('str-lone-in-key', '{"\\ud800":1,"\\udc00":2,"\\ufffd":3}');
add('str-long', JSON.stringify('é😀"\\\n'.repeat(500)));
addBytes('utf8-invalid-truncated', [0x22, 0xe2, 0x82, 0x41, 0x22]);
addBytes('utf8-invalid-surrogate-bytes', [0x22, 0xed, 0xa0, 0x80, 0x22]);
addBytes('utf8-invalid-overlong', [0x22, 0xc0, 0xaf, 0xe0, 0x80, 0xaf, 0x22]);
addBytes('utf8-invalid-4byte', [0x22, 0xf0, 0x9f, 0x98, 0xc0, 0xf4, 0x90, 0x80, 0x80, 0xf8, 0x22]);
addBytes('utf8-invalid-lone-cont', [0x22, 0x80, 0xbf, 0x41, 0xff, 0xfe, 0x22]);
addBytes('utf8-invalid-end', [0x22, 0x61, 0xf0, 0x9f, 0x22]);
addBytes('utf8-valid-mixed', [0x22, 0xc3, 0xa9, 0xe2, 0x82, 0xac, 0xf0, 0x9f, 0x98, 0x80, 0x22]);
addBytes('utf8-invalid-in-key', [0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x2c, 0x22, 0xef, 0xbf, 0xbd, 0x22, 0x3a, 0x32, 0x7d]);

// structure and whitespace
add('ws', ' \t\r\n{ "a" : [ 1 , 2 ] ,\n"b":{ } , "c" : [ ] } \n');
add('scalars-true', 'true');
add('scalars-null', 'null');
add('scalar-string', '"x"');
add('empty-object', '{}');
add('empty-array', '[]');
add('nested-500', '['.repeat(500) + ']'.repeat(500));
add('nested-objects', '{"a":'.repeat(200) + '1' + '}'.repeat(200));
add('schema-like', '{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"q":{"type":"string","description":"Caf\\u00e9 \\ud83d\\ude00 query","default":1.0,"maximum":1e21}},"required":["q"],"additionalProperties":false}');

// errors: JSON.parse throws
for (const bad of ['', ' ', '{', '}', '[1,]', '{"a":1,}', '{"a" 1}', '{a:1}', "{'a':1}", '01', '-01', '1.', '.5',
  '+1', '-', '1e', '1e+', 'NaN', 'Infinity', '-Infinity', 'tru', 'nul', '"\\x"', '"\\u12"', '"\\u12G4"',
  '"abc', '"tab\there"', '"nl\nhere"', '[1] x', '[1]]', '\ufeff{}', '{"a":1}{}', '// c\n{}',
  '[1,,2]', '{,}', '{"a":1 "b":2}', '0x10', '1_000', '\u00a0{}', '{"a":[}', 'undefined', '"\u0000"']) {
  add('error ' + JSON.stringify(bad), bad);
}

// pseudo-random documents (deterministic)
let seed = 0x2545f491;
function rnd() { // xorshift32
  seed ^= seed << 13; seed >>>= 0;
  seed ^= seed >>> 17;
  seed ^= seed << 5; seed >>>= 0;
  return seed / 4294967296;
}
function pick(a) { return a[Math.floor(rnd() * a.length)]; }
const keyPool = ['a', 'b', 'type', 'properties', 'required', 'description', '0', '1', '2', '10', '4294967294',
  '4294967295', '01', '-1', 'é', '😀', '$ref', '$defs', 'context', 'items', '__proto__', ''];
const charPool = ['a', 'Z', ' ', '"', '\\\\', '\\/', '\\n', '\\t', '\\u0000', '\\u001f', '\\u007f', 'é', '中', '😀',
  '\\ud83d\\ude00', '\\ud800', '\\udfff', '\\u2028', '\\ufffd', '\u2029', '\\b', '\\f', '\\r'];
function rstr() {
  let s = '';
  const n = Math.floor(rnd() * 8);
  for (let i = 0; i < n; i++) s += pick(charPool);
  return '"' + s + '"';
}
function rnum() {
  let s = rnd() < 0.3 ? '-' : '';
  s += rnd() < 0.2 ? '0' : String(1 + Math.floor(rnd() * 9)) + String(Math.floor(rnd() * 1e6)).slice(0, Math.floor(rnd() * 7));
  if (rnd() < 0.5) s += '.' + String(Math.floor(rnd() * 1e9));
  if (rnd() < 0.5) s += pick(['e', 'E']) + pick(['', '+', '-']) + String(Math.floor(rnd() * 330));
  return s;
}
function rval(d) {
  const r = rnd();
  if (d > 5 || r < 0.25) return rstr();
  if (r < 0.45) return rnum();
  if (r < 0.5) return pick(['true', 'false', 'null']);
  if (r < 0.7) {
    const n = Math.floor(rnd() * 5);
    return '[' + Array.from({ length: n }, () => rval(d + 1)).join(',') + ']';
  }
  const n = Math.floor(rnd() * 7);
  return '{' + Array.from({ length: n }, () => JSON.stringify(pick(keyPool)) + ':' + rval(d + 1)).join(',') + '}';
}
for (let i = 0; i < 300; i++) add('random ' + i, rval(0));

const out = [];
const td = new TextDecoder('utf-8', { ignoreBOM: true });
for (const c of cases) {
  const text = c.input_b64 !== undefined ? td.decode(Buffer.from(c.input_b64, 'base64')) : c.input;
  const rec = Object.assign({}, c);
  try {
    const s = JSON.stringify(JSON.parse(text));
    rec.output = s;
    rec.length = s.length;
  } catch (e) {
    rec.error = true;
  }
  out.push(rec);
}

// ---------- corpus ----------

// DefaultContextDescription's shape: the length of the PostHog MCP SDK's default description
// (615 characters) with as many characters JSON escapes (8 double quotes), so an injected
// schema serializes to the size the SDK serves.
const DESC = '"q"'.repeat(4) + 'x'.repeat(615 - 12);

// inject follows the ratchet's definitions, "Context injection".
function inject(schema) {
  if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) return null;
  const has = (o, k) => Object.prototype.hasOwnProperty.call(o, k);
  const props = schema.properties;
  const propsIsMap = props !== null && typeof props === 'object' && !Array.isArray(props);
  if (propsIsMap && has(props, 'context')) return null;
  for (const k of ['$ref', 'oneOf', 'anyOf', 'allOf']) if (has(schema, k)) return null;
  const out = Object.assign({}, schema);
  out.properties = Object.assign({}, propsIsMap ? props : {}, { context: { type: 'string', description: DESC } });
  if (Array.isArray(schema.required)) {
    out.required = schema.required.includes('context') ? schema.required : schema.required.concat(['context']);
  } else {
    out.required = ['context'];
  }
  if (out.additionalProperties === false) delete out.additionalProperties;
  return out;
}

const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const isDescribed = (v) => isObj(v) && typeof v.description === 'string' && v.description.length > 0;

// resolve a local JSON pointer reference ("#", "#/a/b"); null when it does not resolve.
function resolve(root, ref) {
  if (typeof ref !== 'string' || !ref.startsWith('#')) return null;
  let frag;
  try { frag = decodeURIComponent(ref.slice(1)); } catch (e) { return null; }
  if (frag === '') return root;
  if (!frag.startsWith('/')) return null;
  let cur = root;
  for (let tok of frag.slice(1).split('/')) {
    tok = tok.replace(/~1/g, '/').replace(/~0/g, '~');
    if (cur === null || typeof cur !== 'object' || !Object.prototype.hasOwnProperty.call(cur, tok)) return null;
    cur = cur[tok];
  }
  return cur;
}

// coverage: the ratchet's definitions, "Nested description coverage" (see coverage.go for depth).
function coverage(root, full) {
  const c = { nested: 0, described: 0 };
  function walk(s, depth) {
    if (!isObj(s)) return;
    if (isObj(s.properties)) {
      for (const k of Object.keys(s.properties)) {
        const p = s.properties[k];
        if (depth >= 1) { c.nested++; if (isDescribed(p)) c.described++; }
        walk(p, depth + 1);
      }
    }
    for (const k of ['anyOf', 'oneOf', 'allOf']) if (Array.isArray(s[k])) for (const b of s[k]) walk(b, depth);
    if (isObj(s.items)) walk(s.items, depth);
    if (!full) return;
    if (Array.isArray(s.items)) for (const b of s.items) walk(b, depth);
    if (Array.isArray(s.prefixItems)) for (const b of s.prefixItems) walk(b, depth);
    if (isObj(s.additionalProperties)) walk(s.additionalProperties, depth + 1);
    if (isObj(s.patternProperties)) for (const k of Object.keys(s.patternProperties)) walk(s.patternProperties[k], depth + 1);
    if (typeof s.$ref === 'string') {
      const t = resolve(root, s.$ref);
      const key = (depth === 0 ? 'top:' : 'deep:');
      if (isObj(t)) {
        if (!t.__seen) Object.defineProperty(t, '__seen', { value: new Set(), enumerable: false });
        if (!t.__seen.has(key)) { t.__seen.add(key); walk(t, depth); }
      }
    }
  }
  walk(root, 0);
  return c;
}

// The corpus layouts (the same mapping as corpus_test.go's reader):
//   github-mcp-server/*.snap        one tool object each
//   posthog/*.json                  a bare input schema named after the file, or a tool
//                                   object (exec-tool.json)
//   sentry-mcp/toolDefinitions.json, kubernetes-mcp-server/*.json   arrays of tool objects
//   posthog-mcp-standalone/         skipped: tool-definitions.json has no schemas and
//                                   tool-inputs.json does not say which schema is whose
function corpusTools() {
  const tools = [];
  const sets = fs.readdirSync(corpusDir).filter((d) => fs.statSync(path.join(corpusDir, d)).isDirectory()).sort();
  for (const set of sets) {
    if (set === 'posthog-mcp-standalone') continue;
    const files = fs.readdirSync(path.join(corpusDir, set)).sort();
    for (const f of files) {
      if (!f.endsWith('.json') && !f.endsWith('.snap')) continue;
      const rel = set + '/' + f;
      const text = fs.readFileSync(path.join(corpusDir, set, f), 'utf8');
      const v = JSON.parse(text);
      if (Array.isArray(v)) {
        v.forEach((t, i) => tools.push({ file: rel, index: i, name: t.name, schema: t.inputSchema }));
      } else if (isObj(v) && Array.isArray(v.tools)) {
        v.tools.forEach((t, i) => tools.push({ file: rel, index: i, name: t.name, schema: t.inputSchema }));
      } else if (isObj(v) && v.inputSchema !== undefined) {
        tools.push({ file: rel, index: 0, name: v.name, schema: v.inputSchema });
      } else {
        tools.push({ file: rel, index: 0, name: f.replace(/\.(json|snap)$/, ''), schema: v });
      }
    }
  }
  return tools;
}

// The raw text of each schema is re-parsed from its own serialization so that the checks
// below see exactly what JSON.parse gives.
const corpus = corpusTools().map((t) => {
  const raw = JSON.stringify(t.schema);
  const schema = JSON.parse(raw);
  const inj = inject(schema);
  const basic = coverage(JSON.parse(raw), false);
  const full = coverage(JSON.parse(raw), true);
  return {
    file: t.file, index: t.index, name: t.name,
    raw_length: raw.length,
    injected: inj !== null,
    injected_length: inj !== null ? JSON.stringify(inj).length : raw.length,
    nested: basic.nested, described: basic.described,
    full_nested: full.nested, full_described: full.described,
  };
});

const doc = { generator: 'make-vectors.js', node: process.version, cases: out, corpus };
fs.writeFileSync(path.join(here, 'jsvectors.json'), JSON.stringify(doc, null, 1) + '\n');
console.log(`wrote ${out.length} cases, ${corpus.length} corpus tools`);
