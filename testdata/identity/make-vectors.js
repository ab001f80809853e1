// make-vectors.js computes the identity-hash test vectors (DESIGN.md §3) with Node.js itself,
// so the Go implementation (ingest.IdentityHash) is checked against JavaScript, not against
// itself:
//
//   hash = sha256hex(utf8(JSON.stringify([instanceUrl, distinctId])))
//
// Run from the repository root:  node testdata/identity/make-vectors.js > testdata/identity/vectors.json
//
// Each vector carries the inputs as JSON strings (JSON.stringify escapes nothing Go cannot read
// back), the exact JSON.stringify output, and the hash.
//
// Left out on purpose: lone UTF-16 surrogates (e.g. "\ud800"). JavaScript strings may hold
// them and JSON.stringify writes them as "\ud800" escapes, but a Go string cannot hold a lone
// surrogate (encoding/json decodes one to U+FFFD), so no Go input could reproduce that hash.
'use strict';
const crypto = require('crypto');

const url = 'https://us.posthog.com';
const cases = [
  ['plain', url, 'user-123'],
  ['eu instance', 'https://eu.posthog.com', 'user-123'],
  ['self-hosted with port and path', 'http://localhost:8010/posthog', 'user-123'],
  ['trailing slash url', 'https://us.posthog.com/', 'user-123'],
  ['empty url', '', 'user-123'],
  ['empty distinct id', url, ''],
  ['both empty', '', ''],
  ['double quotes', url, 'say "hi"'],
  ['backslashes', url, 'C:\\Users\\me\\'],
  ['quote and backslash mix', url, '\\"\\\\"'],
  ['backspace', url, 'a\bb'],
  ['form feed', url, 'a\fb'],
  ['newline', url, 'a\nb'],
  ['carriage return', url, 'a\rb'],
  ['tab', url, 'a\tb'],
  ['NUL', url, 'a\u0000b'],
  ['unit separator U+001F', url, 'a\u001fb'],
  ['every C0 control', url, Array.from({ length: 32 }, (_, i) => String.fromCharCode(i)).join('')],
  ['DEL U+007F', url, 'a\u007fb'],
  ['C1 control U+0085 and U+009F', url, 'a\u0085\u009fb'],
  ['line separator U+2028', url, 'a\u2028b'],
  ['paragraph separator U+2029', url, 'a\u2029b'],
  ['html specials', url, '<script>&amp;</script>'],
  ['solidus', url, 'a/b'],
  ['emoji (astral, surrogate pair in JS)', url, 'user-\u{1F600}-\u{1F469}\u200D\u{1F4BB}'],
  ['combining marks (NFD)', url, 'Cafe\u0301 n\u0303'],
  ['precomposed (NFC) differs from NFD', url, 'Caf\u00e9 \u00f1'],
  ['CJK', url, '\u7528\u6237\u540d-\u30e6\u30fc\u30b6\u30fc-\uc0ac\uc6a9\uc790'],
  ['right-to-left', url, '\u0645\u0633\u062a\u062e\u062f\u0645'],
  ['BOM and zero-width', url, '\ufeffa\u200bb'],
  ['U+FFFD replacement char', url, 'a\ufffdb'],
  ['200-char ascii id', url, 'x'.repeat(200)],
  ['200-char non-BMP id', url, '\u{1F680}'.repeat(200)],
  ['url with query and unicode host', 'https://b\u00fccher.example/?a=1&b=2', 'id'],
  ['uuid-like id', url, '0190d2a4-7b1e-7c3a-9f00-0123456789ab'],
];

const vectors = cases.map(([name, instanceUrl, distinctId]) => {
  const stringified = JSON.stringify([instanceUrl, distinctId]);
  return {
    name,
    instance_url: instanceUrl,
    distinct_id: distinctId,
    stringified,
    hash: crypto.createHash('sha256').update(stringified, 'utf8').digest('hex'),
  };
});

process.stdout.write(JSON.stringify({ generator: 'testdata/identity/make-vectors.js', node: process.version, vectors }, null, 2) + '\n');
