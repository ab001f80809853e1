// Regenerates the SDK fixtures of package misuse: what @posthog/mcp 0.16.3 (with posthog-node
// 5.70.0) sends for tools/list and tools/call on real MCP servers built with the official
// TypeScript SDK, v1 (@modelcontextprotocol/sdk 1.32.2 with zod 3 or zod 4) and v2
// (@modelcontextprotocol/server 2.4.0 with zod 4), driven by the official client over an
// in-memory transport. The PostHog host is a local HTTP server that records every batch.
//
// Run from a directory whose node_modules holds those packages (see README.md here):
//   node generate.mjs v1z3 > v1z3.json
//   node generate.mjs v1z4 > v1z4.json
//   node generate.mjs v2   > v2.json
import http from 'node:http'
import { PostHog } from 'posthog-node'
import { instrument } from '@posthog/mcp'

const flavor = process.argv[2]
const v2 = flavor === 'v2'
const { McpServer, Client, InMemoryTransport, z } = v2
  ? {
      ...(await import('@modelcontextprotocol/server')),
      ...(await import('@modelcontextprotocol/client')),
      z: (await import('zod')).z,
    }
  : {
      McpServer: (await import('@modelcontextprotocol/sdk/server/mcp.js')).McpServer,
      Client: (await import('@modelcontextprotocol/sdk/client/index.js')).Client,
      InMemoryTransport: (await import('@modelcontextprotocol/sdk/inMemory.js')).InMemoryTransport,
      z: (await import('zod')).z,
    }

const batches = []
const sink = http.createServer((req, res) => {
  let body = ''
  req.on('data', (c) => (body += c))
  req.on('end', () => {
    try {
      batches.push(JSON.parse(body))
    } catch {
      batches.push({ unparsed: body })
    }
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end('{"status":1}')
  })
})
await new Promise((r) => sink.listen(0, '127.0.0.1', r))
const host = `http://127.0.0.1:${sink.address().port}`

const posthog = new PostHog('phc_fixture', { host, flushAt: 1000, flushInterval: 0, disableCompression: true })
const server = new McpServer({ name: 'fixture-server', version: '1.2.3' })
const obj = (shape) => (v2 ? z.object(shape) : shape)
const text = (s) => ({ content: [{ type: 'text', text: s }] })

server.registerTool('get-sum', { description: 'Adds two numbers', inputSchema: obj({ a: z.number(), b: z.number() }) },
  async ({ a, b }) => text(String(a + b)))
server.registerTool('create-insight', {
  description: 'Creates an insight',
  inputSchema: obj({
    name: z.string(),
    query: z.object({
      kind: z.enum(['TrendsQuery', 'FunnelsQuery']),
      series: z.array(z.object({ event: z.string(), math: z.string().optional() })),
    }),
    tags: z.record(z.string(), z.string()).optional(),
    filters: z.object({}).passthrough().optional(),
  }),
}, async (args) => text(JSON.stringify({ ok: true, received: args })))
server.registerTool('strict-tool', { description: 'Refuses unknown keys', inputSchema: z.object({ a: z.string() }).strict() },
  async ({ a }) => text(a))
// A server that reports the keys its schema dropped, in the shape PostHog's MCP server uses
// (an object result carrying _ignoredKeys and _ignoredKeysNote; a text result with the notice).
server.registerTool('report-object', { description: 'Reports ignored keys in an object result', inputSchema: obj({ a: z.string() }) },
  async () => text(JSON.stringify({ ok: true, _ignoredKeys: ['title', 'query.source.serie'],
    _ignoredKeysNote: 'Ignored input keys: "title", "query.source.serie". These keys are not part of the tool\'s input schema, so the tool did not use them.' })))
server.registerTool('report-text', { description: 'Reports ignored keys in a text result', inputSchema: obj({ a: z.string() }) },
  async () => text('Done.\n\nIgnored input keys: "title", "x\\ny". These keys are not part of the tool\'s input schema, so the tool did not use them.'))

instrument(server, posthog)

const [clientTransport, serverTransport] = InMemoryTransport.createLinkedPair()
await server.connect(serverTransport)
const client = new Client({ name: 'fixture-client', version: '9.9.9' })
await client.connect(clientTransport)

const calls = [
  ['ok', 'get-sum', { a: 1, b: 2 }],
  ['wrong_type', 'get-sum', { a: 'x', b: 2 }],
  ['missing_required', 'get-sum', { a: 1 }],
  ['extra_keys', 'get-sum', { a: 1, b: 2, c: 3, context: 'the agent explains why' }],
  ['nested_keys', 'create-insight', { name: 'n', title: 't', query: { kind: 'TrendsQuery', serie: [], series: [{ event: 'e', math: 'total', maht: 'x' }, { event: 'f', propery: 1 }] }, tags: { any: 'thing' }, filters: { free: { form: 1 } } }],
  ['unrecognized_key', 'strict-tool', { a: 'x', b: 1 }],
  ['enum_and_missing', 'create-insight', { query: { kind: 'Bad', series: [] } }],
  ['unknown_tool', 'no-such-tool', { a: 1 }],
  ['redacted', 'create-insight', { name: 'n', query: { kind: 'TrendsQuery', series: [] }, password: { nested: 1 }, tags: { token: 'x' } }],
  ['deep', 'create-insight', { name: 'n', query: { kind: 'TrendsQuery', series: [{ event: 'e', l1: { l2: { l3: { l4: { l5: { l6: {} } } } } } }] } }],
  ['report_object', 'report-object', { a: 'x', title: 't' }],
  ['report_text', 'report-text', { a: 'x', title: 't' }],
]
await client.listTools()
const outcomes = {}
for (const [label, name, args] of calls) {
  try {
    const r = await client.callTool({ name, arguments: args })
    outcomes[label] = { result: r }
  } catch (e) {
    outcomes[label] = { thrown: e.message, code: e.code }
  }
}
await new Promise((r) => setTimeout(r, 200))
await posthog.shutdown()
await client.close()
sink.close()

const events = batches.flatMap((b) => b.batch ?? [])
for (const e of events) {
  // Volatile fields: replaced so the fixtures are stable across runs.
  for (const k of ['$session_id', '$mcp_duration_ms', '$lib_version']) if (k in e.properties) e.properties[k] = k === '$mcp_duration_ms' ? 1 : 'fixed'
  delete e.timestamp
  delete e.uuid
  delete e.distinct_id
  if (e.properties.$exception_list) for (const x of e.properties.$exception_list) delete x.stacktrace
}
process.stdout.write(JSON.stringify({ flavor, calls: calls.map(([label, name, args]) => ({ label, name, arguments: args, client_outcome: outcomes[label] })), events }, null, 2) + '\n')
