// Test-only (ingest/gateway e2e test): a posthog-node client whose host is the mcpulse gateway
// sends tool calls, recruitment events and an $identify, then flushes and exits.
// Env: GATEWAY_URL, API_KEY, UUID_PREFIX (the first 24 characters of the uuids, "xxxxxxxx-xxxx-7xxx-8xxx-"),
// COUNT (tool calls).
'use strict';
const { PostHog } = require('posthog-node');

async function main() {
  const host = process.env.GATEWAY_URL;
  const key = process.env.API_KEY;
  const prefix = process.env.UUID_PREFIX;
  const count = Number(process.env.COUNT || '10');
  let failed = null;
  const client = new PostHog(key, { host, flushAt: 7, flushInterval: 0, fetchRetryCount: 0 });
  client.on('error', (err) => { failed = err; });
  const uuid = (n) => prefix + String(n).padStart(12, '0');
  const base = Date.parse('2026-11-20T12:00:00Z');
  for (let i = 1; i <= count; i++) {
    client.capture({
      uuid: uuid(i),
      distinctId: `node-user-${i % 3}`,
      event: '$mcp_tool_call',
      timestamp: new Date(base + i * 1000),
      properties: { $mcp_tool_name: 'search', $mcp_is_error: i % 4 === 0, $mcp_client_name: 'node-test', $mcp_duration_ms: i },
    });
  }
  const rec = { campaign_id: 'node-campaign', invitation_id: 'node-inv-1', feature_flag: 'mcp-interviews' };
  client.capture({ uuid: uuid(1001), distinctId: 'node-user-1', event: 'mcp interview invitation sent',
    timestamp: new Date(base + 100000), properties: { ...rec, interview_recruitment_reason: 'invited' } });
  client.capture({ uuid: uuid(1002), distinctId: 'node-user-1', event: 'mcp interview booking link opened',
    timestamp: new Date(base + 200000), properties: rec });
  client.capture({ uuid: uuid(1003), distinctId: 'node-user-1', event: 'mcp interview invitation responded',
    timestamp: new Date(base + 300000), properties: { ...rec, response: 'accept' } });
  client.identify({ distinctId: 'node-user-1', properties: { plan: 'test' } });
  await client.shutdown(10000);
  if (failed) {
    console.error('posthog-node error:', failed && (failed.message || failed));
    process.exit(1);
  }
  console.log('sent', count + 4);
}

main().catch((err) => { console.error(err); process.exit(1); });
