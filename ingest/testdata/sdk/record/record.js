// Test-only: records what @posthog/mcp 0.16.3 (through posthog-node) really sends for its
// reports and requests besides tool calls: an McpServer (@modelcontextprotocol/sdk) with one
// tool, two resources (one whose read fails) and a prompt, instrumented unchanged with
// reportMissing, collectFeedback and identify, driven by the official client over an in-memory
// transport; posthog-node's host is a PostHog-capture recorder on loopback. It writes one event
// per name in PICKS into <out>/recorded_<name>.json, exactly as the SDK serialized it.
// The packages are the gateway fixtures' (pinned by ../../../gateway/testdata/mcp/package-lock.json):
//   (cd ../../../gateway/testdata/mcp && npm ci)
//   NODE_PATH=../../../gateway/testdata/mcp/node_modules node record.js ..
'use strict';
const http = require('node:http');
const zlib = require('node:zlib');
const fs = require('node:fs');
const path = require('node:path');
const { PostHog } = require('posthog-node');
const { instrument } = require('@posthog/mcp');
const { McpServer, ResourceTemplate } = require('@modelcontextprotocol/sdk/server/mcp.js');
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { InMemoryTransport } = require('@modelcontextprotocol/sdk/inMemory.js');
const { z } = require('zod');

const PICKS = [
  ['missing_capability', (e) => e.event === '$mcp_missing_capability'],
  ['feedback', (e) => e.event === '$mcp_feedback'],
  ['resources_list', (e) => e.event === '$mcp_resources_list'],
  ['resource_read', (e) => e.event === '$mcp_resource_read' && e.properties.$mcp_is_error === false],
  ['resource_read_error', (e) => e.event === '$mcp_resource_read' && e.properties.$mcp_is_error === true],
  ['identify', (e) => e.event === '$identify'],
];

function eventsOf(text) {
  const body = JSON.parse(text);
  const raw = [];
  // Keep each event's own JSON text (key order as sent) by re-serializing: posthog-node builds
  // the batch with JSON.stringify, so this is the same text.
  for (const e of body.batch || []) raw.push(JSON.stringify(e));
  return raw;
}

async function main() {
  const out = process.argv[2];
  if (!out) throw new Error('usage: node record.js <output dir>');
  const requests = [];
  const recorder = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      let body = Buffer.concat(chunks);
      if (body[0] === 0x1f && body[1] === 0x8b) body = zlib.gunzipSync(body);
      requests.push(body.toString('utf8'));
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end('{"status":1}');
    });
  });
  await new Promise((r) => recorder.listen(0, '127.0.0.1', r));
  const posthog = new PostHog('phc_fixture_project_key_0123456789', { host: `http://127.0.0.1:${recorder.address().port}`, flushAt: 1 });

  const server = new McpServer({ name: 'mcpulse-fixture-reports', version: '2.1.0' });
  server.registerTool('get-sum', { description: 'Adds two numbers.', inputSchema: { a: z.number(), b: z.number() } },
    async ({ a, b }) => ({ content: [{ type: 'text', text: String(a + b) }] }));
  server.registerResource('hogql-reference', 'posthog://docs/hogql-reference', { mimeType: 'text/markdown' },
    async (uri) => ({ contents: [{ uri: uri.href, text: '# HogQL' }] }));
  server.registerResource('insight', new ResourceTemplate('posthog://insights/{id}', { list: undefined }), {},
    async (uri, { id }) => { throw new Error(`Insight ${id} not found`); });
  server.registerPrompt('weekly-report', { description: "Summarize the week's metrics", argsSchema: { team: z.string() } },
    ({ team }) => ({ messages: [{ role: 'user', content: { type: 'text', text: `Report for ${team}` } }] }));
  instrument(server, posthog, {
    reportMissing: true,
    collectFeedback: true,
    identify: async () => ({ distinctId: 'user_2f9c', properties: { plan: 'team', email: 'ada@example.com' } }),
  });

  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: 'mcpulse-fixture-client', version: '1.0.0' });
  await client.connect(clientSide);
  await client.listTools();
  await client.callTool({ name: 'get_more_tools', arguments: { context: 'Needs a tool to delete several cohorts in one call; only single-cohort deletion exists.' } });
  await client.callTool({ name: 'send_feedback', arguments: {
    feedback_type: 'issue', summary: 'get-sum rejects numbers given as strings with an unclear error.',
    details: 'Sent a: "2" as the user typed it; contact ada@example.com for the transcript.',
    tool_name: 'get-sum', sentiment: 'negative', task_completed: true,
  } });
  await client.listResources();
  await client.readResource({ uri: 'posthog://docs/hogql-reference' });
  await client.readResource({ uri: 'posthog://insights/42' }).catch(() => {});
  await client.listPrompts();
  await client.getPrompt({ name: 'weekly-report', arguments: { team: 'growth' } });
  await client.close();
  await posthog.shutdown(10000);
  recorder.close();

  const events = requests.flatMap(eventsOf).map((raw) => ({ raw, e: JSON.parse(raw) }));
  const names = [...new Set(events.map(({ e }) => e.event))].sort();
  process.stderr.write(`recorded ${requests.length} requests, ${events.length} events: ${names.join(', ')}\n`);
  for (const [name, pick] of PICKS) {
    const found = events.find(({ e }) => pick(e));
    if (!found) throw new Error(`no event for fixture ${name}`);
    fs.writeFileSync(path.join(out, `recorded_${name}.json`), found.raw + '\n');
  }
}

main().catch((err) => {
  process.stderr.write(`record: ${err && (err.stack || err)}\n`);
  process.exit(1);
});
