// Test-only (ingest/gateway tests): the official MCP client drives http-server.js over Streamable
// HTTP the way agents would: two sessions on /mcp (a "basic" and a "beta" user, told apart by the
// x-mcpulse-plan header), each listing every page of the paginated tools/list and listing again
// when the server says its list changed, one on the stateless server /stateless, and one on the
// custom dispatcher /dispatch.
//
//   node http-client.js                 starts http-server.js (its env passed on), runs CALLS,
//                                       prints one JSON line per call, stops the server
//   node http-client.js --print-calls   prints CALLS as JSON
'use strict';
const path = require('node:path');
const readline = require('node:readline');
const { spawn } = require('node:child_process');
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');
const { ToolListChangedNotificationSchema } = require('@modelcontextprotocol/sdk/types.js');

const intent = 'Checking the weather data so the user can plan a field trip for their team.';

// CALLS is every tool call, in order. `session` is basic, beta (both on /mcp), stateless or
// dispatch.
// `expect` is what mcpulse must store for the call (see client.js): ignored keys and their
// source or why not measurable, the error class, and `unlisted`: whether the tool was absent
// from the listing the call's own session saw last before the call (all pages of it, a
// list_changed re-listing from its time on). `per_session_schema` marks a call whose ignored
// keys (or their absence: no schema) depend on that session's own listing of the tool.
const CALLS = [
  // A page-1 tool: listed, though page 2 and 3 came after page 1.
  { session: 'basic', tool: 'get_forecast', case: 'page_one_ok', expect: { source: 'schema', keys: [] }, args: { city: 'Oslo', days: 2, context: intent } },
  { session: 'basic', tool: 'get_forecast', case: 'wrong_type', expect: { source: 'schema', keys: [], error: 'validation_type' }, args: { city: 'Oslo', days: 'two', context: intent } },
  { session: 'basic', tool: 'get_forecast', case: 'missing_required', expect: { source: 'schema', keys: [], error: 'validation_required' }, args: { days: 1, context: intent } },
  // The basic plan's beta_radar does not declare radius_km: zod dropped it.
  { session: 'basic', tool: 'beta_radar', case: 'basic_radius_dropped', per_session_schema: true, expect: { source: 'schema', keys: ['radius_km'] }, args: { region: 'NO-03', radius_km: 25, context: intent } },
  // The beta plan's does.
  { session: 'beta', tool: 'beta_radar', case: 'beta_radius_kept', per_session_schema: true, expect: { source: 'schema', keys: [] }, args: { region: 'NO-03', radius_km: 25, context: intent } },
  // A page-2 tool, with a misnamed key.
  { session: 'basic', tool: 'list_alerts', case: 'page_two_misnamed', expect: { source: 'schema', keys: ['level'] }, args: { region: 'NO-03', level: 'severe', context: intent } },
  // A page-3 tool that takes a while.
  { session: 'basic', tool: 'slow_export', case: 'slow', min_duration_ms: 150, expect: { source: 'schema', keys: [] }, args: { dataset: 'daily', context: intent } },
  // A tool error: an isError result.
  { session: 'basic', tool: 'sync_stations', case: 'tool_error', expect: { source: 'schema', keys: [], error: 'other' }, args: { force: true, context: intent } },
  // Succeeds, then the server removes the tool from this session (list_changed); the client
  // lists again.
  { session: 'basic', tool: 'legacy_report', case: 'before_removal', expect: { source: 'schema', keys: [] }, args: { station: 'OSL-1', context: intent } },
  // After the removal, in the same session: unlisted (so no schema to judge it by), and
  // refused as unknown.
  { session: 'basic', tool: 'legacy_report', case: 'after_removal', per_session_schema: true, expect: { source: 'not_measurable', reason: 'no_schema', error: 'unknown_tool', unlisted: true }, args: { station: 'OSL-1', context: intent } },
  // The beta session still lists it: its call is listed (and removes it there in turn).
  { session: 'beta', tool: 'legacy_report', case: 'other_session_still_listed', expect: { source: 'schema', keys: [] }, args: { station: 'BGO-2', context: intent } },
  // A tool no session ever listed.
  { session: 'beta', tool: 'get_weather', case: 'unknown_tool', expect: { source: 'not_measurable', reason: 'no_schema', error: 'unknown_tool', unlisted: true }, args: { city: 'Bergen', context: intent } },
  // The stateless server: the transport keeps no session; the SDK's own token ties the
  // requests into one $session_id.
  { session: 'stateless', tool: 'get_forecast', case: 'stateless_misnamed', expect: { source: 'schema', keys: ['hours'] }, args: { city: 'Tromso', hours: 6, context: intent } },
  { session: 'stateless', tool: 'get_forecast', case: 'stateless_wrong_type', expect: { source: 'schema', keys: [], error: 'validation_type' }, args: { city: 'Tromso', days: 'many', context: intent } },
  { session: 'stateless', tool: 'get_weather', case: 'stateless_unknown_tool', expect: { source: 'not_measurable', reason: 'no_schema', error: 'unknown_tool', unlisted: true }, args: { city: 'Tromso', context: intent } },
  // The custom dispatcher (PostHogMCP's API): measured like the wrapped server.
  { session: 'dispatch', tool: 'convert_units', case: 'dispatch_ok', expect: { source: 'schema', keys: [] }, args: { value: 20, from: 'c', to: 'f', context: intent } },
  { session: 'dispatch', tool: 'convert_units', case: 'dispatch_misnamed', expect: { source: 'schema', keys: ['precision'] }, args: { value: 0, from: 'c', to: 'k', precision: 2, context: intent } },
  { session: 'dispatch', tool: 'convert_units', case: 'dispatch_wrong_type', expect: { source: 'schema', keys: [], error: 'validation_type' }, args: { value: 'hot', from: 'c', to: 'f', context: intent } },
  { session: 'dispatch', tool: 'delete_station', case: 'dispatch_unknown_tool', expect: { source: 'not_measurable', reason: 'no_schema', error: 'unknown_tool', unlisted: true }, args: { station: 'OSL-1', context: intent } },
];

// withCase returns a call's arguments with its case named in the context argument, which the
// SDK records as $mcp_intent: the tests find each call's stored row by it.
function withCase(call) {
  return { ...call.args, context: `${call.args.context} Case ${call.case}.` };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// connect opens a session on url with the official client; headers go on every request.
async function connect(url, headers) {
  const client = new Client({ name: 'mcpulse-fixture-http-client', version: '1.2.0' });
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  await client.connect(transport);
  const session = { client, transport, changed: false, pages: 0 };
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
    session.changed = true;
  });
  return session;
}

// listAll fetches every page of the session's tools/list.
async function listAll(session) {
  const names = [];
  let cursor;
  do {
    const page = await session.client.listTools(cursor === undefined ? undefined : { cursor });
    session.pages++;
    names.push(...page.tools.map((t) => t.name));
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return names;
}

// startServer runs http-server.js and resolves with its process and base URL.
function startServer() {
  const child = spawn(process.execPath, [path.join(__dirname, 'http-server.js')], {
    env: process.env, stdio: ['pipe', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    const lines = readline.createInterface({ input: child.stdout });
    lines.once('line', (line) => resolve({ child, url: JSON.parse(line).url }));
    child.once('exit', (code) => reject(new Error(`http-server.js exited ${code} before listening`)));
  });
}

async function main() {
  if (process.argv.includes('--print-calls')) {
    process.stdout.write(JSON.stringify(CALLS) + '\n');
    return;
  }
  const { child, url } = await startServer();
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const sessions = {
    basic: await connect(`${url}/mcp`, { 'x-mcpulse-plan': 'basic' }),
    beta: await connect(`${url}/mcp`, { 'x-mcpulse-plan': 'beta' }),
    stateless: await connect(`${url}/stateless`, {}),
    dispatch: await connect(`${url}/dispatch`, {}),
  };
  for (const s of Object.values(sessions)) {
    await listAll(s);
  }
  // Event times order the listings and the calls: keep them apart by more than a millisecond.
  await sleep(20);
  for (const call of CALLS) {
    const s = sessions[call.session];
    const line = { session: call.session, tool: call.tool, case: call.case };
    const started = Date.now();
    try {
      const res = await s.client.callTool({ name: call.tool, arguments: withCase(call) });
      line.outcome = res.isError ? 'tool_error' : 'ok';
      line.text = (res.content ?? []).filter((b) => b.type === 'text').map((b) => b.text).join(' ').slice(0, 300);
    } catch (err) {
      line.outcome = 'rpc_error';
      line.text = String(err && err.message).slice(0, 300);
    }
    line.ms = Date.now() - started;
    await sleep(20);
    if (s.changed) {
      s.changed = false;
      line.relisted = await listAll(s);
      await sleep(20);
    }
    process.stdout.write(JSON.stringify(line) + '\n');
  }
  process.stdout.write(JSON.stringify({ pages: Object.fromEntries(Object.entries(sessions).map(([k, s]) => [k, s.pages])) }) + '\n');
  for (const s of Object.values(sessions)) {
    await s.transport.terminateSession().catch(() => {}); // /dispatch does not do DELETE
    await s.client.close();
  }
  child.kill('SIGTERM');
  const code = await exited;
  if (code !== 0) throw new Error(`http-server.js exited ${code}`);
}

main().catch((err) => {
  process.stderr.write(`http client: ${err && (err.stack || err)}\n`);
  process.exit(1);
});
