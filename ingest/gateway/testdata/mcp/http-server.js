// Test-only (ingest/gateway tests): a real MCP server over Streamable HTTP, as a team runs one in
// production, and beside it a custom JSON-RPC dispatcher; both send their analytics through
// @posthog/mcp, unchanged, to a posthog-node client whose host is the mcpulse gateway (or any
// PostHog-capture recorder).
//
//   /mcp       The official TypeScript SDK's low-level Server behind StreamableHTTPServerTransport,
//              stateful: one Server and transport per session (Mcp-Session-Id), each wrapped by
//              instrument(). Tools are declared with zod, listed as JSON Schema the way McpServer
//              lists them (the SDK's toJsonSchemaCompat) and validated with zod the way McpServer
//              validates them (undeclared keys of a plain object dropped without a word;
//              a failure is an InvalidParams "Input validation error: ..."). What McpServer does
//              not do, and real servers do:
//                - per-session tool sets: the x-mcpulse-plan header of the session's initialize
//                  request picks the plan; a "beta" session's beta_radar declares radius_km, a
//                  "basic" session's does not;
//                - a paginated tools/list: PAGE_SIZE tools a page, nextCursor to the next;
//                - a runtime removal: legacy_report's first successful call removes it from its
//                  session and sends notifications/tools/list_changed on that call's stream.
//   /stateless The same Server, stateless (sessionIdGenerator undefined): a fresh Server and
//              transport per request, every tool on one page, the basic plan. The transport
//              issues no session, but @posthog/mcp mints its own session token at initialize
//              (sent as Mcp-Session-Id, replayed by the client), so the events of the client's
//              requests still share one $session_id.
//   /dispatch  No Server at all: a hand-written Streamable HTTP dispatcher (JSON responses,
//              sessions by Mcp-Session-Id) using @posthog/mcp's documented custom-dispatcher API,
//              PostHogMCP: prepareToolList + captureToolsList on tools/list, prepareToolCall +
//              captureToolCall on tools/call (parameters: the arguments the tool got), and
//              captureInitialize. The API has no server name to give.
//
// Env: GATEWAY_URL (the PostHog host), API_KEY (the project key). Listens on a loopback port and
// prints {"url": ...} on stdout. On SIGTERM or stdin's end it closes the sessions, flushes both
// clients and exits, writing "http: posthog flushed" to stderr once everything was sent.
'use strict';
const http = require('node:http');
const { randomUUID } = require('node:crypto');
const { Server } = require('@modelcontextprotocol/sdk/server/index.js');
const { StreamableHTTPServerTransport } = require('@modelcontextprotocol/sdk/server/streamableHttp.js');
const { toJsonSchemaCompat } = require('@modelcontextprotocol/sdk/server/zod-json-schema-compat.js');
const { getParseErrorMessage } = require('@modelcontextprotocol/sdk/server/zod-compat.js');
const {
  CallToolRequestSchema, ListToolsRequestSchema, McpError, ErrorCode, isInitializeRequest, LATEST_PROTOCOL_VERSION,
} = require('@modelcontextprotocol/sdk/types.js');
const { PostHog } = require('posthog-node');
const { instrument, PostHogMCP } = require('@posthog/mcp');
const { z } = require('zod');

const SERVER_INFO = { name: 'mcpulse-fixture-http', version: '3.1.0' };
const STATELESS_INFO = { name: 'mcpulse-fixture-stateless', version: '1.0.0' };
const PAGE_SIZE = 2;

const text = (s) => ({ content: [{ type: 'text', text: s }] });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// catalogue returns the tools of a session on plan ('basic' or 'beta'), in listing order: name,
// description, zod input schema (schema) and handler (run(args, session, extra)).
function catalogue(plan) {
  const radar = { region: z.string().describe('Region code') };
  if (plan === 'beta') {
    radar.radius_km = z.number().positive().describe('Radius around the region centre, in km (beta)');
  }
  return [
    {
      name: 'get_forecast', description: 'Weather forecast for a city.',
      schema: z.object({ city: z.string().describe('City name'), days: z.number().int().min(1).max(7).optional().describe('Days ahead') }),
      run: async ({ city, days }) => text(`${city}: sunny for ${days ?? 1} day(s)`),
    },
    {
      name: 'beta_radar', description: 'Precipitation radar for a region.',
      schema: z.object(radar),
      run: async (args) => text(JSON.stringify({ region: args.region, radius_km: args.radius_km ?? null })),
    },
    {
      name: 'list_alerts', description: 'Weather alerts in a region.',
      schema: z.object({ region: z.string().describe('Region code'), severity: z.enum(['minor', 'severe']).optional().describe('Least severity') }),
      run: async ({ region }) => text(`no alerts in ${region}`),
    },
    {
      name: 'legacy_report', description: 'The old station report; retired after its first use.',
      schema: z.object({ station: z.string().describe('Station id') }),
      run: async ({ station }, session, extra) => {
        session.tools.delete('legacy_report');
        await extra.sendNotification({ method: 'notifications/tools/list_changed' });
        return text(`report for ${station}`);
      },
    },
    {
      name: 'slow_export', description: 'Export a dataset; takes a while.',
      schema: z.object({ dataset: z.string().describe('Dataset name') }),
      run: async ({ dataset }) => {
        await sleep(150);
        return text(`exported ${dataset}`);
      },
    },
    {
      name: 'sync_stations', description: 'Sync station metadata from upstream.',
      schema: z.object({ force: z.boolean().optional().describe('Sync even when fresh') }),
      run: async () => ({ isError: true, content: [{ type: 'text', text: 'upstream station registry unavailable (HTTP 503)' }] }),
    },
  ];
}

// listed is a tool as tools/list shows it, its schema converted as McpServer converts one.
function listed(tool) {
  return { name: tool.name, description: tool.description, inputSchema: toJsonSchemaCompat(tool.schema, { strictUnions: true, pipeStrategy: 'input' }) };
}

// --- /mcp: the SDK's Server, stateful Streamable HTTP ---------------------------------------------

function mcpServer(plan, info = SERVER_INFO, pageSize = PAGE_SIZE) {
  const server = new Server(info, { capabilities: { tools: { listChanged: true } } });
  const session = { plan, tools: new Map(catalogue(plan).map((t) => [t.name, t])) };
  server.setRequestHandler(ListToolsRequestSchema, async (request) => {
    const all = [...session.tools.values()];
    const start = request.params?.cursor ? Number(Buffer.from(request.params.cursor, 'base64url').toString()) : 0;
    if (!Number.isInteger(start) || start < 0 || start > all.length) {
      throw new McpError(ErrorCode.InvalidParams, `Invalid cursor: ${request.params.cursor}`);
    }
    const page = { tools: all.slice(start, start + pageSize).map(listed) };
    if (start + pageSize < all.length) {
      page.nextCursor = Buffer.from(String(start + pageSize)).toString('base64url');
    }
    return page;
  });
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const { name } = request.params;
    const tool = session.tools.get(name);
    if (!tool) {
      throw new McpError(ErrorCode.InvalidParams, `Tool ${name} not found`);
    }
    const parsed = await tool.schema.safeParseAsync(request.params.arguments ?? {});
    if (!parsed.success) {
      throw new McpError(ErrorCode.InvalidParams, `Input validation error: Invalid arguments for tool ${name}: ${getParseErrorMessage(parsed.error)}`);
    }
    return tool.run(parsed.data, session, extra);
  });
  return server;
}

// --- /dispatch: a custom dispatcher on PostHogMCP -------------------------------------------------

function dispatcher(posthog) {
  const tools = [
    {
      name: 'convert_units', description: 'Convert a measurement between units.',
      inputSchema: {
        type: 'object',
        properties: {
          value: { type: 'number', description: 'The measurement' },
          from: { type: 'string', enum: ['c', 'f', 'k'], description: 'Unit of value' },
          to: { type: 'string', enum: ['c', 'f', 'k'], description: 'Unit wanted' },
        },
        required: ['value', 'from', 'to'],
      },
    },
    {
      name: 'station_info', description: 'Metadata of a weather station.',
      inputSchema: { type: 'object', properties: { station: { type: 'string', description: 'Station id' } }, required: ['station'] },
    },
  ];
  const sessions = new Map(); // Mcp-Session-Id -> { protocolVersion }
  const toC = { c: (v) => v, f: (v) => (v - 32) * 5 / 9, k: (v) => v - 273.15 };
  const fromC = { c: (v) => v, f: (v) => v * 9 / 5 + 32, k: (v) => v + 273.15 };

  async function call(name, args) {
    switch (name) {
      case 'convert_units': {
        if (typeof args.value !== 'number') {
          throw new McpError(ErrorCode.InvalidParams, `Input validation error: Invalid arguments for tool ${name}: data/value must be number`);
        }
        if (!(args.from in toC) || !(args.to in fromC)) {
          throw new McpError(ErrorCode.InvalidParams, `Input validation error: Invalid arguments for tool ${name}: data/from and data/to must be equal to one of the allowed values`);
        }
        return text(String(fromC[args.to](toC[args.from](args.value))));
      }
      case 'station_info':
        return text(JSON.stringify({ station: args.station, elevation_m: 112 }));
      default:
        throw new McpError(ErrorCode.InvalidParams, `Tool ${name} not found`);
    }
  }

  // handle answers one JSON-RPC message; it returns [status, body, headers].
  return async function handle(msg, headers) {
    const sessionId = headers['mcp-session-id'];
    if (msg.id === undefined) {
      return [202, undefined, {}]; // a notification
    }
    const reply = (result) => ({ jsonrpc: '2.0', id: msg.id, result });
    const started = Date.now();
    if (msg.method === 'initialize') {
      const id = randomUUID();
      const protocolVersion = msg.params?.protocolVersion ?? LATEST_PROTOCOL_VERSION;
      sessions.set(id, { protocolVersion });
      const result = { protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'mcpulse-fixture-dispatch', version: '0.9.0' } };
      posthog.captureInitialize({
        sessionId: id, protocolVersion, clientName: msg.params?.clientInfo?.name, clientVersion: msg.params?.clientInfo?.version,
        parameters: msg.params, response: result, durationMs: Date.now() - started,
      });
      return [200, reply(result), { 'mcp-session-id': id }];
    }
    const session = sessions.get(sessionId);
    if (!session) {
      return [404, { jsonrpc: '2.0', id: msg.id, error: { code: -32001, message: 'Session not found' } }, {}];
    }
    const common = { sessionId, protocolVersion: session.protocolVersion };
    switch (msg.method) {
      case 'tools/list': {
        const prepared = posthog.prepareToolList(tools);
        const result = { tools: prepared };
        posthog.captureToolsList({ ...common, toolNames: prepared.map((t) => t.name), parameters: msg.params, response: result, durationMs: Date.now() - started });
        return [200, reply(result), {}];
      }
      case 'tools/call': {
        const name = msg.params?.name;
        const originalTool = tools.find((t) => t.name === name);
        const { intent, intentSource, args } = posthog.prepareToolCall(name, msg.params?.arguments, { originalTool });
        const data = { ...common, toolName: name, toolDescription: originalTool?.description, intent, intentSource, parameters: args ?? {} };
        try {
          const result = await call(name, args ?? {});
          posthog.captureToolCall({ ...data, response: result, isError: false, durationMs: Date.now() - started });
          return [200, reply(result), {}];
        } catch (err) {
          posthog.captureToolCall({ ...data, isError: true, error: err, durationMs: Date.now() - started });
          return [200, { jsonrpc: '2.0', id: msg.id, error: { code: err.code ?? ErrorCode.InternalError, message: err.message } }, {}];
        }
      }
      case 'ping':
        return [200, reply({}), {}];
      default:
        return [200, { jsonrpc: '2.0', id: msg.id, error: { code: ErrorCode.MethodNotFound, message: `Method not found: ${msg.method}` } }, {}];
    }
  };
}

// --- main ----------------------------------------------------------------------------------------

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

async function main() {
  const posthog = new PostHog(process.env.API_KEY, { host: process.env.GATEWAY_URL });
  posthog.on('error', (err) => process.stderr.write(`posthog error: ${err && (err.message || err)}\n`));
  const posthogMCP = new PostHogMCP(process.env.API_KEY, { host: process.env.GATEWAY_URL });
  posthogMCP.on('error', (err) => process.stderr.write(`posthog error: ${err && (err.message || err)}\n`));
  const dispatch = dispatcher(posthogMCP);
  const transports = new Map(); // Mcp-Session-Id -> StreamableHTTPServerTransport

  const httpServer = http.createServer(async (req, res) => {
    try {
      const url = new URL(req.url, 'http://localhost');
      if (url.pathname === '/dispatch') {
        if (req.method !== 'POST') {
          res.writeHead(405, { Allow: 'POST' }).end();
          return;
        }
        const [status, body, headers] = await dispatch(JSON.parse(await readBody(req)), req.headers);
        res.writeHead(status, { ...headers, ...(body ? { 'Content-Type': 'application/json' } : {}) });
        res.end(body ? JSON.stringify(body) : undefined);
        return;
      }
      if (url.pathname === '/stateless') {
        // Stateless: a fresh Server and transport per request, no Mcp-Session-Id, as the SDK's
        // stateless example serves; one page, the basic plan.
        if (req.method !== 'POST') {
          res.writeHead(405, { Allow: 'POST' }).end();
          return;
        }
        const body = JSON.parse(await readBody(req));
        const server = mcpServer('basic', STATELESS_INFO, Infinity);
        instrument(server, posthog);
        const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
        res.on('close', () => {
          transport.close();
          server.close();
        });
        await server.connect(transport);
        await transport.handleRequest(req, res, body);
        return;
      }
      if (url.pathname !== '/mcp') {
        res.writeHead(404).end();
        return;
      }
      const sessionId = req.headers['mcp-session-id'];
      let transport = sessionId ? transports.get(sessionId) : undefined;
      let body;
      if (req.method === 'POST') {
        body = JSON.parse(await readBody(req));
        if (!transport && !sessionId && isInitializeRequest(body)) {
          const plan = req.headers['x-mcpulse-plan'] === 'beta' ? 'beta' : 'basic';
          transport = new StreamableHTTPServerTransport({
            sessionIdGenerator: () => randomUUID(),
            onsessioninitialized: (id) => transports.set(id, transport),
          });
          transport.onclose = () => transport.sessionId && transports.delete(transport.sessionId);
          const server = mcpServer(plan);
          instrument(server, posthog);
          await server.connect(transport);
        }
      }
      if (!transport) {
        res.writeHead(sessionId ? 404 : 400, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32000, message: sessionId ? 'Session not found' : 'No session' } }));
        return;
      }
      await transport.handleRequest(req, res, body);
    } catch (err) {
      process.stderr.write(`http: ${err && (err.stack || err)}\n`);
      if (!res.headersSent) {
        res.writeHead(500).end();
      }
    }
  });
  await new Promise((r) => httpServer.listen(0, '127.0.0.1', r));
  process.stdout.write(JSON.stringify({ url: `http://127.0.0.1:${httpServer.address().port}` }) + '\n');

  let stopping = null;
  const stop = () => {
    stopping ??= (async () => {
      await Promise.all([...transports.values()].map((t) => t.close()));
      httpServer.close();
      await Promise.all([posthog.shutdown(10000), posthogMCP.shutdown(10000)]);
      process.stderr.write('http: posthog flushed\n');
      process.exit(0);
    })();
    return stopping;
  };
  process.stdin.on('end', stop);
  process.stdin.resume();
  process.on('SIGTERM', stop);
}

main().catch((err) => {
  process.stderr.write(`http server: ${err && (err.stack || err)}\n`);
  process.exit(1);
});
