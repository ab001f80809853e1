// Test-only (ingest/gateway tests): an MCP client built with the official TypeScript SDK,
// instrumented, unchanged, by @traceloop/instrumentation-mcp through its manuallyInstrument, its
// spans exported by @opentelemetry/exporter-trace-otlp-http (OTLP/HTTP, JSON) to the mcpulse
// gateway. It lists the tools and makes CALLS over Streamable HTTP.
//
// Env: SERVER_URL (the MCP endpoint), and the exporter's own OTEL_EXPORTER_OTLP_ENDPOINT (the
// gateway) and OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer <key>.
// Prints {"calls": [{tool, arguments, is_error, error}]} on stdout once the spans are flushed.
'use strict';
const { NodeTracerProvider } = require('@opentelemetry/sdk-trace-node');
const { BatchSpanProcessor } = require('@opentelemetry/sdk-trace-base');
const { OTLPTraceExporter } = require('@opentelemetry/exporter-trace-otlp-http');
const { resourceFromAttributes } = require('@opentelemetry/resources');
const { McpInstrumentation } = require('@traceloop/instrumentation-mcp');
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');

// The calls, with the raw arguments the agent sends.
const CALLS = [
  { tool: 'lookup', arguments: { city: 'Oslo' } },
  { tool: 'lookup', arguments: { city: 'Bergen', country: 'NO' } },
  { tool: 'lookup', arguments: { city: 5 } },
  { tool: 'explode', arguments: {} },
  { tool: 'ghost', arguments: { q: 1 } },
];

async function main() {
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'otel-fixture-agent' }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
  });
  provider.register();
  const instrumentation = new McpInstrumentation();
  instrumentation.manuallyInstrument({ Client });

  const client = new Client({ name: 'otel-fixture-client', version: '0.2.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(process.env.SERVER_URL)));
  await client.listTools();
  const calls = [];
  for (const c of CALLS) {
    let isError = false;
    let error = '';
    try {
      const res = await client.callTool({ name: c.tool, arguments: c.arguments });
      isError = !!res.isError;
      if (isError) error = res.content[0].text;
    } catch (err) {
      isError = true;
      error = err.message;
    }
    calls.push({ tool: c.tool, arguments: c.arguments, is_error: isError, error });
  }
  await client.close();
  await provider.forceFlush();
  await provider.shutdown();
  console.log(JSON.stringify({ calls }));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
