// Test-only: records what @posthog/mcp (through posthog-node) really sends, to refresh the
// fixtures in ../sdk. It starts a PostHog-capture recorder on a loopback port, runs a client
// against it (which starts its servers with their host set to the recorder), and writes:
//   <out>/<requests file>  every request: path, the headers that matter, the body as decoded JSON
//   <out>/<name>.json      one event per case named in the mode's picks, exactly as the SDK
//                          serialized it inside its batch (compact JSON, key order kept)
// Modes:
//   node record.js ../sdk        client.js, the two stdio servers of server.js: requests.jsonl,
//                                PICKS
//   node record.js ../sdk http   http-client.js, the Streamable HTTP server and the custom
//                                dispatcher of http-server.js: requests_http.jsonl, HTTP_PICKS
'use strict';
const nodeHTTP = require('node:http');
const zlib = require('node:zlib');
const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');

const API_KEY = 'phc_fixture_project_key_0123456789';

// extractEvents returns the raw JSON text of each element of body.batch, unchanged.
function extractEvents(text) {
  const start = text.indexOf('"batch":[');
  if (start < 0) return [];
  const out = [];
  let i = start + '"batch":['.length;
  while (text[i] !== ']') {
    if (text[i] === ',') i++;
    const from = i;
    let depth = 0;
    let inString = false;
    for (; i < text.length; i++) {
      const ch = text[i];
      if (inString) {
        if (ch === '\\') i++;
        else if (ch === '"') inString = false;
      } else if (ch === '"') inString = true;
      else if (ch === '{' || ch === '[') depth++;
      else if (ch === '}' || ch === ']') {
        depth--;
        if (depth === 0) { i++; break; }
      }
    }
    out.push(text.slice(from, i));
  }
  return out;
}

// PICKS names each fixture and how to find its event.
const PICKS = [
  ['initialize', (e) => e.event === '$mcp_initialize' && e.properties.$mcp_server_name === 'mcpulse-fixture-zod'],
  ['tools_list_zod', (e) => e.event === '$mcp_tools_list' && e.properties.$mcp_server_name === 'mcpulse-fixture-zod'],
  ['tools_list_json', (e) => e.event === '$mcp_tools_list' && e.properties.$mcp_server_name === 'mcpulse-fixture-json'],
  ['tool_call_ok', (e) => isCall(e, 'get-sum', { a: 1, b: 2 })],
  ['tool_call_misnamed_top_level', (e) => isCall(e, 'get-sum', { c: 3 })],
  ['tool_call_wrong_type', (e) => isCall(e, 'get-sum', { b: 'two' })],
  ['tool_call_missing_required', (e) => isCall(e, 'get-sum') && !('b' in args(e))],
  ['tool_call_nested_zod', (e) => isCall(e, 'create-order')],
  ['tool_call_strict_refused', (e) => isCall(e, 'update-settings')],
  ['tool_call_open_objects', (e) => isCall(e, 'tag-resource')],
  ['tool_call_ref_unions', (e) => isCall(e, 'plan-route')],
  ['tool_call_unknown_tool_zod', (e) => isCall(e, 'get-product')],
  ['tool_call_nested_json', (e) => isCall(e, 'search-logs', { verbose: true })],
  ['tool_call_wrong_type_json', (e) => isCall(e, 'search-logs', { limit: 'ten' })],
  ['tool_call_missing_required_json', (e) => isCall(e, 'search-logs') && !('query' in args(e))],
  ['tool_call_truncated', (e) => isCall(e, 'search-logs') && Array.isArray(args(e).series) && args(e).series.length > 100],
  ['tool_call_response_ignored_keys', (e) => isCall(e, 'query-insights')],
  ['tool_call_notice_ignored_keys', (e) => isCall(e, 'summarize-text')],
  ['tool_call_composition', (e) => isCall(e, 'annotate') && 'display' in args(e)],
  ['tool_call_deep_arguments', (e) => isCall(e, 'annotate') && 'extra' in args(e) && 'l1' in args(e).extra],
  ['tool_call_redacted_arguments', (e) => isCall(e, 'connect-source')],
  ['tool_call_root_union', (e) => isCall(e, 'lookup-person')],
  ['tool_call_unknown_tool_json', (e) => isCall(e, 'delete-everything')],
  ['exception_wrong_type', (e) => e.event === '$exception' && e.properties.$mcp_tool_name === 'get-sum' && /expected number/.test(JSON.stringify(e.properties.$exception_list))],
  ['exception_unknown_tool_json', (e) => e.event === '$exception' && e.properties.$mcp_tool_name === 'delete-everything'],
];

// HTTP_PICKS are the http mode's: the custom dispatcher's events (PostHogMCP: no server name,
// $mcp_parameters the arguments themselves) and the first session's paginated listing.
const HTTP_PICKS = [
  ['initialize_dispatcher', (e) => e.event === '$mcp_initialize' && !e.properties.$mcp_server_name],
  ['tools_list_dispatcher', (e) => e.event === '$mcp_tools_list' && !e.properties.$mcp_server_name],
  ['tool_call_dispatcher_ok', (e) => isDispatched(e, 'convert_units', { value: 20 })],
  ['tool_call_dispatcher_misnamed', (e) => isDispatched(e, 'convert_units', { precision: 2 })],
  ['tool_call_dispatcher_wrong_type', (e) => isDispatched(e, 'convert_units', { value: 'hot' })],
  ['tool_call_dispatcher_unknown_tool', (e) => isDispatched(e, 'delete_station')],
  ['exception_dispatcher_wrong_type', (e) => e.event === '$exception' && !e.properties.$mcp_server_name && e.properties.$mcp_tool_name === 'convert_units'],
  ['tools_list_http_page_1', (e) => isHTTPPage(e, undefined)],
  ['tools_list_http_page_2', (e) => isHTTPPage(e, 'Mg')],
  ['tools_list_http_page_3', (e) => isHTTPPage(e, 'NA')],
  ['tool_call_http_page_one', (e) => isCall(e, 'get_forecast', { city: 'Oslo', days: 2 })],
];

function args(e) {
  return e.properties?.$mcp_parameters?.request?.params?.arguments ?? {};
}

function isDispatched(e, tool, has) {
  if (e.event !== '$mcp_tool_call' || e.properties.$mcp_server_name || e.properties.$mcp_tool_name !== tool) return false;
  const a = e.properties.$mcp_parameters ?? {};
  return !has || Object.entries(has).every(([k, v]) => JSON.stringify(a[k]) === JSON.stringify(v));
}

function isHTTPPage(e, cursor) {
  return e.event === '$mcp_tools_list' && e.properties.$mcp_server_name === 'mcpulse-fixture-http' &&
    e.properties.$mcp_parameters?.request?.params?.cursor === cursor;
}

function isCall(e, tool, has) {
  if (e.event !== '$mcp_tool_call' || e.properties.$mcp_tool_name !== tool) return false;
  const a = args(e);
  return !has || Object.entries(has).every(([k, v]) => JSON.stringify(a[k]) === JSON.stringify(v));
}

async function main() {
  const out = process.argv[2];
  if (!out) throw new Error('usage: node record.js <output dir> [http]');
  const http = process.argv[3] === 'http';
  const [client, requestsFile, picks] = http ? ['http-client.js', 'requests_http.jsonl', HTTP_PICKS] : ['client.js', 'requests.jsonl', PICKS];
  fs.mkdirSync(out, { recursive: true });
  const requests = [];
  const server = nodeHTTP.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      let body = Buffer.concat(chunks);
      if (req.headers['content-encoding'] === 'gzip' || (body[0] === 0x1f && body[1] === 0x8b)) body = zlib.gunzipSync(body);
      requests.push({
        method: req.method, url: req.url,
        headers: Object.fromEntries(['content-type', 'content-encoding', 'user-agent'].filter((h) => req.headers[h]).map((h) => [h, req.headers[h]])),
        text: body.toString('utf8'),
      });
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end('{"status":1}');
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${server.address().port}`;
  const code = await new Promise((resolve) => {
    const child = spawn(process.execPath, [path.join(__dirname, client)], {
      env: { ...process.env, GATEWAY_URL: url, API_KEY }, stdio: ['ignore', 'inherit', 'inherit'],
    });
    child.on('exit', resolve);
  });
  server.close();
  if (code !== 0) throw new Error(`${client} exited ${code}`);

  fs.writeFileSync(path.join(out, requestsFile), requests.map((r) => JSON.stringify({ ...r, text: undefined, body: JSON.parse(r.text) })).join('\n') + '\n');
  const events = requests.flatMap((r) => extractEvents(r.text)).map((raw) => ({ raw, e: JSON.parse(raw) }));
  for (const [name, pick] of picks) {
    const found = events.find(({ e }) => pick(e));
    if (!found) throw new Error(`no event for fixture ${name}`);
    fs.writeFileSync(path.join(out, `${name}.json`), found.raw + '\n');
  }
  const first = requests.find((r) => r.text.includes('"batch"'));
  const batch = JSON.parse(first.text);
  process.stderr.write(`recorded ${requests.length} requests, ${events.length} events; first batch keys: ${Object.keys(batch).join(',')}\n`);
}

main().catch((err) => {
  process.stderr.write(`record: ${err && (err.stack || err)}\n`);
  process.exit(1);
});
