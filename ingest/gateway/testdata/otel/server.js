// Test-only (ingest/gateway tests): an MCP server built with the official TypeScript SDK over
// Streamable HTTP (stateful: one session), instrumented, unchanged, by
// @shinzolabs/instrumentation-mcp, which traces the handlers of tools registered with the
// deprecated server.tool() and exports its spans with OTLP/HTTP to the mcpulse gateway.
//
// Env: GATEWAY_URL (the gateway; spans go to GATEWAY_URL/v1/traces), and
// OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer <key>, read by the exporter.
// Prints {"url": "http://127.0.0.1:<port>/mcp"} on stdout once listening; on stdin's end, flushes
// its spans, writes "spans flushed" to stderr and exits.
'use strict';
const http = require('node:http');
const { randomUUID } = require('node:crypto');
const { McpServer } = require('@modelcontextprotocol/sdk/server/mcp.js');
const { StreamableHTTPServerTransport } = require('@modelcontextprotocol/sdk/server/streamableHttp.js');
const { instrumentServer } = require('@shinzolabs/instrumentation-mcp');
const { z } = require('zod');

async function main() {
  const server = new McpServer({ name: 'otel-fixture-server', version: '3.0.0' });
  const telemetry = instrumentServer(server, {
    serverName: 'otel-fixture-shinzo',
    serverVersion: '1.1.0',
    exporterEndpoint: process.env.GATEWAY_URL + '/v1',
    enableMetrics: false,
    enableArgumentCollection: true,
    enablePIISanitization: false,
  });

  // Zod 3 objects drop undeclared keys when they validate: the handler never sees them.
  server.tool('lookup', 'Look a city up.', { city: z.string(), limit: z.number().optional() },
    async ({ city }) => ({ content: [{ type: 'text', text: `found ${city}` }] }));
  server.tool('explode', 'Always fails.', {}, async () => {
    throw new Error('the lookup backend is down');
  });

  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID() });
  await server.connect(transport);
  const httpServer = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      transport.handleRequest(req, res, body ? JSON.parse(body) : undefined).catch((err) => {
        console.error(err);
        res.statusCode = 500;
        res.end();
      });
    });
  });
  httpServer.listen(0, '127.0.0.1', () => {
    console.log(JSON.stringify({ url: `http://127.0.0.1:${httpServer.address().port}/mcp` }));
  });
  process.stdin.resume();
  process.stdin.on('end', async () => {
    await telemetry.shutdown();
    console.error('spans flushed');
    httpServer.close();
    process.exit(0);
  });
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
