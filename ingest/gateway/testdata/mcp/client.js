// Test-only (ingest/gateway tests): the official MCP client drives the two fixture servers of
// server.js over stdio the way an agent would: it lists their tools, then calls them with correct
// arguments, misnamed top-level keys, misnamed nested and array-item keys, a wrong type, a
// missing required key, oversized arguments the analytics SDK truncates, and a tool name the
// server does not list. Each call is in CALLS below; the Go tests read the same table through
// `node client.js --print-calls` and derive what the pipeline must store from it.
//
// Env: GATEWAY_URL and API_KEY are passed on to the servers. Prints one JSON line per call:
// {"server","tool","case","outcome":"ok"|"tool_error"|"rpc_error","text"}; with --print-calls,
// prints CALLS as one JSON array instead and exits.
'use strict';
const path = require('node:path');
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');

const intent = 'Checking the numbers for a weekly report so the user can review their project.';

// Oversized arguments: 120 series (the SDK keeps 100 entries of an array) and a 40,000-character
// query (it keeps 32,768 characters of a string; a long string that looks like base64 is replaced
// whole).
const manySeries = Array.from({ length: 120 }, (_, i) => ({ event: `event-${i}`, math: 'total' }));

// CALLS is every tool call the client makes, in order. `case` names what the call exercises;
// `expect` is what mcpulse must derive from what the SDK sends: where the call's ignored keys
// come from (`schema`: the arguments against the tool's served schema, JSON Schema semantics,
// undeclared keys of an object without additionalProperties counted as dropped as zod drops
// them; `response`: the tool said so; `not_measurable` with a reason), the dotted key paths
// (array items by index), and the error class of a failed call.
const CALLS = [
  // mcpulse-fixture-zod: McpServer + zod.
  { server: 'zod', tool: 'get-sum', case: 'ok', expect: { source: 'schema', keys: [] }, args: { a: 1, b: 2, context: intent } },
  { server: 'zod', tool: 'get-sum', case: 'misnamed_top_level', expect: { source: 'schema', keys: ['c'] }, args: { a: 1, b: 2, c: 3, context: intent } },
  { server: 'zod', tool: 'get-sum', case: 'wrong_type', expect: { source: 'schema', keys: [], error: 'validation_type' }, args: { a: 1, b: 'two', context: intent } },
  { server: 'zod', tool: 'get-sum', case: 'missing_required', expect: { source: 'schema', keys: [], error: 'validation_required' }, args: { a: 1, context: intent } },
  {
    server: 'zod', tool: 'create-order', case: 'misnamed_nested_and_array_item', expect: { source: 'schema', keys: ['customer.mail', 'items.1.qty', 'note'] }, args: {
      customer: { name: 'Ada', mail: 'ada@example.com', email: 'ada@example.com' },
      items: [{ sku: 'A-1', quantity: 2 }, { sku: 'B-2', qty: 3 }],
      note: 'leave at the door',
      context: intent,
    },
  },
  {
    server: 'zod', tool: 'update-settings', case: 'strict_unknown_key_refused', expect: { source: 'schema', keys: ['notifications.sms'], error: 'validation_unknown_key' }, args: {
      theme: 'dark', notifications: { email: true, sms: true }, context: intent,
    },
  },
  {
    server: 'zod', tool: 'tag-resource', case: 'open_objects', expect: { source: 'schema', keys: ['colour'] }, args: {
      id: 'res-1', labels: { env: 'prod', team: 'core' }, meta: { source: 'ci', run: 7 },
      limits: { max: 3, burst: 5 }, colour: 'red', context: intent,
    },
  },
  {
    server: 'zod', tool: 'plan-route', case: 'ref_and_unions', expect: { source: 'schema', keys: ['origin.alt', 'stops.1.lng', 'vehicle.colour', 'window.start_at'] }, args: {
      origin: { lat: 1, lon: 2, alt: 3 },
      stops: [{ lat: 3, lon: 4 }, { lat: 5, lng: 6, lon: 6 }],
      vehicle: { kind: 'car', seats: 4, colour: 'blue' },
      window: { duration_minutes: 30, start_at: 'now' },
      context: intent,
    },
  },
  { server: 'zod', tool: 'get-product', case: 'unknown_tool', expect: { source: 'not_measurable', reason: 'no_schema', error: 'unknown_tool' }, args: { id: 7, context: intent } },

  // mcpulse-fixture-json: Server + hand-written JSON Schema.
  {
    server: 'json', tool: 'search-logs', case: 'misnamed_nested_pattern_and_array_item', expect: { source: 'schema', keys: ['filters.severity', 'headers.Authorization', 'series.1.maths', 'verbose'] }, args: {
      query: 'timeout',
      filters: { level: 'error', severity: 'high' },
      headers: { 'x-team': 'core', Authorization: 'Bearer abc' },
      series: [{ event: 'a', math: 'total' }, { event: 'b', maths: 'dau' }],
      verbose: true,
      context: intent,
    },
  },
  { server: 'json', tool: 'search-logs', case: 'wrong_type', expect: { source: 'schema', keys: [], error: 'validation_type' }, args: { query: 'timeout', limit: 'ten', context: intent } },
  { server: 'json', tool: 'search-logs', case: 'missing_required', expect: { source: 'schema', keys: [], error: 'validation_required' }, args: { filters: { level: 'warn' }, context: intent } },
  {
    server: 'json', tool: 'search-logs', case: 'truncated_arguments', expect: { source: 'not_measurable', reason: 'arguments_truncated' }, args: {
      query: 'timeout '.repeat(5000), series: manySeries, filters: { level: 'info', sevrity: 'x' }, context: intent,
    },
  },
  {
    server: 'json', tool: 'query-insights', case: 'response_reports_ignored_keys', expect: { source: 'response', keys: ['title', 'query.source.serie'] }, args: {
      kind: 'TrendsQuery', title: 'Weekly signups',
      query: { source: { serie: [{ event: 'x' }], series: [{ event: 'signup', math: 'dau' }] } },
      context: intent,
    },
  },
  {
    server: 'json', tool: 'summarize-text', case: 'notice_reports_ignored_keys', expect: { source: 'response', keys: ['maxWords'] }, args: {
      text: 'one two three four five six seven', max_words: 3, maxWords: 2, context: intent,
    },
  },
  {
    server: 'json', tool: 'annotate', case: 'composition', expect: { source: 'schema', keys: ['target.dashbord_id', 'annotation.author', 'display.size'] }, args: {
      target: { insight_id: 3, tile: 1, dashbord_id: 9 },
      annotation: { date: '2026-11-20', note: 'release', author: 'ada' },
      display: { style: 'badge', color: 'red', size: 2 },
      extra: { anything: { goes: true } },
      scores: { a: 1, b: 2 },
      context: intent,
    },
  },
  {
    server: 'json', tool: 'annotate', case: 'deep_arguments', expect: { source: 'schema', keys: [] }, args: {
      target: { dashboard_id: 4 },
      annotation: { date: '2026-11-21' },
      extra: { l1: { l2: { l3: { l4: { l5: { l6: { l7: 'deep' } } } } } } },
      context: intent,
    },
  },
  {
    server: 'json', tool: 'connect-source', case: 'redacted_arguments', expect: { source: 'schema', keys: ['options.retry'] }, args: {
      url: 'https://ada:secret@example.com/data?token=abc123&page=2',
      api_key: 'sk-live-0123456789',
      options: { retries: 2, retry: 3 },
      context: intent,
    },
  },
  { server: 'json', tool: 'lookup-person', case: 'root_union', expect: { source: 'not_measurable', reason: 'root_union' }, args: { id: 5, name: 'Ada' } },
  { server: 'json', tool: 'delete-everything', case: 'unknown_tool', expect: { source: 'not_measurable', reason: 'no_schema', error: 'unknown_tool' }, args: { confirm: true, context: intent } },
  { server: 'json', tool: 'search-logs', case: 'ok_without_context', expect: { source: 'schema', keys: [] }, args: { query: 'no context given' } },
];

// withCase returns a call's arguments with its case named in the context argument, which the
// SDK records as $mcp_intent: the tests find each call's stored row by it.
function withCase(call) {
  if (typeof call.args.context !== 'string') return call.args;
  return { ...call.args, context: `${call.args.context} Case ${call.case}.` };
}

async function connect(kind) {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [path.join(__dirname, 'server.js'), kind],
    env: { ...process.env },
    stderr: 'inherit',
  });
  const client = new Client({ name: 'mcpulse-fixture-client', version: '0.3.0' });
  await client.connect(transport);
  return client;
}

async function main() {
  if (process.argv.includes('--print-calls')) {
    process.stdout.write(JSON.stringify(CALLS) + '\n');
    return;
  }
  const [zod, json] = await Promise.all([connect('zod'), connect('json')]);
  const clients = { zod, json };
  await Promise.all(Object.values(clients).map((c) => c.listTools()));
  for (const call of CALLS) {
    const line = { server: call.server, tool: call.tool, case: call.case };
    try {
      const res = await clients[call.server].callTool({ name: call.tool, arguments: withCase(call) });
      line.outcome = res.isError ? 'tool_error' : 'ok';
      line.text = (res.content ?? []).filter((b) => b.type === 'text').map((b) => b.text).join(' ').slice(0, 300);
    } catch (err) {
      line.outcome = 'rpc_error';
      line.text = String(err && err.message).slice(0, 300);
    }
    process.stdout.write(JSON.stringify(line) + '\n');
  }
  // Closing ends each server's stdin; the server then flushes its events and exits.
  await Promise.all(Object.values(clients).map((c) => c.close()));
}

main().catch((err) => {
  process.stderr.write(`client: ${err && (err.stack || err)}\n`);
  process.exit(1);
});
