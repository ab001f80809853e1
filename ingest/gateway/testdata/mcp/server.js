// Test-only (ingest/gateway tests): a real MCP server on stdio, built with the official TypeScript
// SDK and instrumented, unchanged, with @posthog/mcp around a posthog-node client whose host is
// the mcpulse gateway (or any PostHog-capture recorder).
//
//   node server.js zod    McpServer (high-level), tools declared with zod: the SDK converts them to
//                         JSON Schema (draft-07: definitions/$ref, anyOf, oneOf,
//                         additionalProperties false / {} / a schema) and validates with zod, which
//                         drops undeclared keys of a plain object without a word.
//   node server.js json   Server (low-level), tools declared as hand-written JSON Schema
//                         ($defs/$ref, allOf/anyOf/oneOf, patternProperties, additionalProperties
//                         false / true / a schema), validated with the SDK's Ajv validator set to
//                         remove undeclared keys where additionalProperties is false. Two of its
//                         tools report the keys they dropped the way PostHog's own MCP server does
//                         (`_ignoredKeys` in an object result, an "Ignored input keys: ..." notice
//                         appended to a text result).
//
// Env: GATEWAY_URL (the PostHog host), API_KEY (the project key).
// On stdin's end (the client closed the transport) or SIGTERM, the server flushes posthog-node and
// exits; it writes "posthog flushed" to stderr once everything was sent.
'use strict';
const { McpServer } = require('@modelcontextprotocol/sdk/server/mcp.js');
const { Server } = require('@modelcontextprotocol/sdk/server/index.js');
const { StdioServerTransport } = require('@modelcontextprotocol/sdk/server/stdio.js');
const { CallToolRequestSchema, ListToolsRequestSchema, McpError, ErrorCode } = require('@modelcontextprotocol/sdk/types.js');
const { AjvJsonSchemaValidator } = require('@modelcontextprotocol/sdk/validation/ajv');
const { PostHog } = require('posthog-node');
const { instrument } = require('@posthog/mcp');
const { z } = require('zod');
const Ajv = require('ajv');
const addFormats = require('ajv-formats');

const text = (s) => ({ content: [{ type: 'text', text: s }] });

// --- the zod server ------------------------------------------------------------------------------

function zodServer() {
  const server = new McpServer({ name: 'mcpulse-fixture-zod', version: '1.4.0' });

  server.registerTool('get-sum', {
    description: 'Add two numbers and return their sum.',
    inputSchema: { a: z.number().describe('First addend'), b: z.number().describe('Second addend') },
  }, async ({ a, b }) => text(String(a + b)));

  server.registerTool('create-order', {
    description: 'Create an order for a customer from a list of line items.',
    inputSchema: {
      customer: z.object({
        name: z.string().describe('Full name'),
        email: z.string().describe('Contact email'),
      }).describe('Who the order is for'),
      items: z.array(z.object({
        sku: z.string().describe('Stock keeping unit'),
        quantity: z.number().int().default(1).describe('How many'),
      })).min(1).describe('Line items'),
      notes: z.string().optional().describe('Free-text notes'),
    },
  }, async ({ customer, items }) => text(JSON.stringify({ ok: true, customer: customer.name, lines: items.length })));

  server.registerTool('update-settings', {
    description: 'Update notification settings; unknown keys are refused.',
    inputSchema: z.strictObject({
      theme: z.enum(['light', 'dark']).describe('Colour theme'),
      notifications: z.strictObject({
        email: z.boolean().describe('Send email notifications'),
        digest: z.enum(['daily', 'weekly']).optional().describe('Digest frequency'),
      }).describe('Notification preferences'),
    }),
  }, async (args) => text(JSON.stringify({ ok: true, theme: args.theme })));

  server.registerTool('tag-resource', {
    description: 'Attach labels and metadata to a resource.',
    inputSchema: {
      id: z.string().describe('Resource id'),
      labels: z.record(z.string(), z.string()).describe('Any label name to a string value'),
      meta: z.looseObject({ source: z.string().describe('Where the tag came from') }).optional().describe('Metadata; other keys are kept'),
      limits: z.object({ max: z.number().describe('Upper bound') }).catchall(z.number()).optional().describe('Named numeric limits'),
    },
  }, async ({ id, labels }) => text(JSON.stringify({ ok: true, id, labels: Object.keys(labels).length })));

  const Stop = z.object({
    lat: z.number().describe('Latitude'),
    lon: z.number().describe('Longitude'),
  }).meta({ id: 'Stop' });
  server.registerTool('plan-route', {
    description: 'Plan a route between stops for a vehicle within a time window.',
    inputSchema: {
      origin: Stop,
      stops: z.array(Stop).describe('Stops in order'),
      vehicle: z.discriminatedUnion('kind', [
        z.object({ kind: z.literal('car'), seats: z.number().int().describe('Seats') }),
        z.object({ kind: z.literal('truck'), payload_kg: z.number().describe('Payload in kg') }),
      ]).describe('The vehicle'),
      window: z.union([
        z.object({ start: z.string().describe('ISO start'), end: z.string().describe('ISO end') }),
        z.object({ duration_minutes: z.number().describe('Minutes from now') }),
      ]).optional().describe('When'),
    },
  }, async ({ stops }) => text(JSON.stringify({ ok: true, legs: stops.length + 1 })));

  return server;
}

// --- the JSON Schema server ----------------------------------------------------------------------

const seriesItem = {
  type: 'object',
  properties: {
    event: { type: 'string', description: 'Event name' },
    math: { type: 'string', enum: ['total', 'dau', 'weekly_active'], description: 'Aggregation' },
  },
  required: ['event'],
  additionalProperties: false,
};

const jsonTools = [
  {
    name: 'search-logs',
    description: 'Search log lines by query, filters, request headers and event series.',
    inputSchema: {
      type: 'object',
      properties: {
        query: { type: 'string', description: 'Full-text query' },
        filters: {
          type: 'object',
          description: 'Exact-match filters',
          properties: {
            level: { type: 'string', enum: ['debug', 'info', 'warn', 'error'], description: 'Log level' },
            service: { type: 'string', description: 'Service name' },
          },
          additionalProperties: false,
        },
        headers: {
          type: 'object',
          description: 'Request headers to match; only x- headers',
          patternProperties: { '^x-[a-z-]+$': { type: 'string' } },
          additionalProperties: false,
        },
        series: { type: 'array', description: 'Event series to chart', items: { $ref: '#/$defs/seriesItem' } },
        limit: { type: 'integer', minimum: 1, maximum: 1000, description: 'Most lines to return' },
      },
      required: ['query'],
      additionalProperties: false,
      $defs: { seriesItem },
    },
  },
  {
    name: 'query-insights',
    description: 'Run an insight query; reports input keys it ignored.',
    inputSchema: {
      type: 'object',
      properties: {
        kind: { type: 'string', enum: ['TrendsQuery', 'FunnelsQuery'], description: 'Query kind' },
        query: {
          type: 'object',
          description: 'The query',
          properties: {
            source: {
              type: 'object',
              description: 'Data source',
              properties: { series: { type: 'array', items: { $ref: '#/$defs/seriesItem' }, description: 'Series' } },
              additionalProperties: false,
            },
          },
          additionalProperties: false,
        },
      },
      required: ['kind', 'query'],
      additionalProperties: false,
      $defs: { seriesItem },
    },
  },
  {
    name: 'summarize-text',
    description: 'Summarize a text; appends a notice naming input keys it ignored.',
    inputSchema: {
      type: 'object',
      properties: {
        text: { type: 'string', description: 'The text' },
        max_words: { type: 'integer', minimum: 1, description: 'Longest summary' },
      },
      required: ['text'],
      additionalProperties: false,
    },
  },
  {
    name: 'annotate',
    description: 'Annotate a dashboard or an insight.',
    inputSchema: {
      type: 'object',
      properties: {
        target: {
          description: 'What to annotate',
          anyOf: [
            { type: 'object', properties: { dashboard_id: { type: 'integer' } }, required: ['dashboard_id'] },
            { type: 'object', properties: { insight_id: { type: 'integer' }, tile: { type: 'integer' } }, required: ['insight_id'] },
          ],
        },
        annotation: {
          description: 'The annotation',
          allOf: [
            { $ref: '#/$defs/base' },
            { type: 'object', properties: { note: { type: 'string', description: 'Text' } } },
          ],
        },
        display: {
          description: 'How to show it',
          oneOf: [
            { type: 'object', properties: { style: { const: 'badge' }, color: { type: 'string' } }, required: ['style'] },
            { type: 'object', properties: { style: { const: 'line' }, width: { type: 'integer' } }, required: ['style'] },
          ],
        },
        extra: { type: 'object', description: 'Anything else, kept as is', additionalProperties: true },
        scores: { type: 'object', description: 'Named scores', additionalProperties: { type: 'number' } },
      },
      required: ['target', 'annotation'],
      $defs: {
        base: {
          type: 'object',
          properties: { date: { type: 'string', description: 'ISO date' }, scope: { type: 'string', enum: ['project', 'organization'] } },
          required: ['date'],
        },
      },
    },
  },
  {
    name: 'connect-source',
    description: 'Connect a data source by URL with an API key.',
    inputSchema: {
      type: 'object',
      properties: {
        url: { type: 'string', format: 'uri', description: 'Source URL' },
        api_key: { type: 'string', description: 'The source API key' },
        options: {
          type: 'object',
          description: 'Connection options',
          properties: { retries: { type: 'integer', minimum: 0, description: 'Retries' } },
          additionalProperties: false,
        },
      },
      required: ['url', 'api_key'],
      additionalProperties: false,
    },
  },
  {
    name: 'lookup-person',
    description: 'Look a person up by id or by email.',
    inputSchema: {
      type: 'object',
      oneOf: [
        { properties: { id: { type: 'integer', description: 'Person id' } }, required: ['id'], additionalProperties: false },
        { properties: { email: { type: 'string', description: 'Email' } }, required: ['email'], additionalProperties: false },
      ],
    },
  },
];

// ignoredPaths lists the dotted paths of keys present in before and absent from after (array
// items by index), the way PostHog's MCP server reports what its schema dropped.
function ignoredPaths(before, after, prefix = '') {
  const out = [];
  if (Array.isArray(before) && Array.isArray(after)) {
    before.forEach((v, i) => out.push(...ignoredPaths(v, after[i], `${prefix}${i}.`)));
  } else if (before && after && typeof before === 'object' && typeof after === 'object') {
    for (const k of Object.keys(before)) {
      if (!(k in after)) {
        out.push(prefix + k);
      } else {
        out.push(...ignoredPaths(before[k], after[k], `${prefix}${k}.`));
      }
    }
  }
  return out;
}

function ignoredNote(keys) {
  return `Ignored input keys: ${keys.join(', ')}. The tool's input schema does not declare them, so they had no effect.`;
}

function jsonServer() {
  const server = new Server({ name: 'mcpulse-fixture-json', version: '2.0.1' }, { capabilities: { tools: {} } });
  const ajv = new Ajv({ strict: false, allErrors: true, removeAdditional: true });
  addFormats(ajv);
  const validator = new AjvJsonSchemaValidator(ajv);
  const validators = new Map(jsonTools.map((t) => [t.name, validator.getValidator(t.inputSchema)]));

  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: jsonTools }));
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const { name } = request.params;
    const validate = validators.get(name);
    if (!validate) {
      throw new McpError(ErrorCode.InvalidParams, `Tool ${name} not found`);
    }
    const sent = request.params.arguments ?? {};
    const args = structuredClone(sent);
    const res = validate(args); // removes undeclared keys where additionalProperties is false
    if (!res.valid) {
      throw new McpError(ErrorCode.InvalidParams, `Input validation error: Invalid arguments for tool ${name}: ${res.errorMessage}`);
    }
    const ignored = ignoredPaths(sent, args);
    switch (name) {
      case 'query-insights': {
        const result = { ok: true, kind: args.kind, series: (args.query.source?.series ?? []).length };
        if (ignored.length > 0) {
          result._ignoredKeys = ignored.slice(0, 20);
          result._ignoredKeysNote = ignoredNote(result._ignoredKeys);
        }
        return { content: [{ type: 'text', text: JSON.stringify(result) }], structuredContent: result };
      }
      case 'summarize-text': {
        let summary = args.text.split(/\s+/).slice(0, args.max_words ?? 5).join(' ');
        if (ignored.length > 0) {
          summary += `\n\n${ignoredNote(ignored.slice(0, 20))}`;
        }
        return text(summary);
      }
      default:
        return text(JSON.stringify({ ok: true, tool: name }));
    }
  });
  return server;
}

// --- main ----------------------------------------------------------------------------------------

async function main() {
  const kind = process.argv[2];
  const posthog = new PostHog(process.env.API_KEY, { host: process.env.GATEWAY_URL });
  posthog.on('error', (err) => process.stderr.write(`posthog error: ${err && (err.message || err)}\n`));
  let server;
  if (kind === 'zod') {
    server = zodServer();
  } else if (kind === 'json') {
    server = jsonServer();
  } else {
    throw new Error(`usage: node server.js zod|json (got ${kind})`);
  }
  instrument(server, posthog);
  let stopping = null;
  const stop = () => {
    stopping ??= posthog.shutdown(10000).then(() => {
      process.stderr.write(`${kind}: posthog flushed\n`);
      process.exit(0);
    });
    return stopping;
  };
  process.stdin.on('end', stop);
  process.on('SIGTERM', stop);
  await server.connect(new StdioServerTransport());
}

main().catch((err) => {
  process.stderr.write(`server: ${err && (err.stack || err)}\n`);
  process.exit(1);
});
