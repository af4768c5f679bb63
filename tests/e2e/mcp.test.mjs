// Tools of a real MCP server (the official TypeScript SDK's Streamable HTTP server, on
// loopback, `mcp-server.mjs`) used by the reference worker's `connector` agent: the
// tools listed to the model with the server's prefix, calls answered as JSON or as an
// event stream with progress, an error result, structured content, a bearer token the
// server requires; a destructive tool waiting for approval across a SIGKILL of the
// worker and a restart of the server's sessions, running once; a hung call cancelled
// at the server when the run is aborted; a server that is down.

import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { api, startWithMock, waitFor } from './client.mjs';
import { startMcpServer } from './mcp-server.mjs';
import { openStream } from './sse.mjs';

const TOKEN = 'mcp-e2e-token';
let mcp;
let started;
const vars = () => ({ MCP_SERVER_URL: mcp.url, MCP_SERVER_NAME: 'files', MCP_SERVER_TOKEN: TOKEN });

before(async () => {
  mcp = await startMcpServer({ token: TOKEN });
  started = await startWithMock(vars());
});
after(async () => {
  await started?.worker.stop();
  await started?.llm.close();
  started?.worker.cleanup();
  await mcp?.close();
});

let n = 0;
const newId = (name) => `${name}-${process.pid}-${++n}`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function create(id, input) {
  const res = await api(started.worker, 'POST', '/v1/sessions', { agent: 'connector', sessionId: id, input });
  assert.equal(res.status, 201, JSON.stringify(res.body));
}

const settled = (id, timeoutMs = 30_000) =>
  waitFor(started.worker, id, (s) => s.status !== 'active' || s.pendingToolCalls.length > 0, timeoutMs);

async function toolMessages(id) {
  const res = await api(started.worker, 'GET', `/v1/sessions/${id}/messages?limit=200`);
  assert.equal(res.status, 200);
  return res.body.messages.filter((m) => m.role === 'tool');
}

test('the agent lists its MCP server, and the server\'s tools reach the model with its prefix', async () => {
  const agents = await api(started.worker, 'GET', '/v1/agents');
  const connector = agents.body.agents.find((a) => a.name === 'connector');
  assert.deepEqual(connector.mcpServers, [{ name: 'files', toolPrefix: 'files__' }]);

  const { llm } = started;
  llm.reset();
  const id = newId('echo');
  llm.push({ calls: [{ name: 'files__echo', args: { text: 'hi' } }] }, { text: 'It said hi.' });
  await create(id, 'echo hi');
  const done = await settled(id);
  assert.equal(done.status, 'completed', JSON.stringify(done));

  const offered = llm.requests[0].body.tools.map((t) => t.function);
  assert.deepEqual(offered.map((t) => t.name).sort(),
    ['files__ask', 'files__count', 'files__echo', 'files__fail', 'files__measure', 'files__slow', 'files__wipe']);
  const echo = offered.find((t) => t.name === 'files__echo');
  assert.equal(echo.description, 'Echoes the text back');
  assert.deepEqual(echo.parameters.required, ['text'], 'the schema as the server declared it');
  assert.equal(echo.parameters.$schema, undefined);

  const [result] = await toolMessages(id);
  assert.deepEqual(result.content, { text: 'echo: hi' });
  assert.equal(mcp.ran('echo').length, 1);
  const calls = mcp.record.requests.filter((r) => r.method === 'tools/call');
  assert.ok(calls.every((r) => typeof r.session === 'string'), 'calls carry the MCP session');

  // The server's token goes to the server only: not to the model, the transcript, the
  // stream or the worker's own log lines.
  assert.ok(!JSON.stringify(llm.requests).includes(TOKEN));
  const messages = await api(started.worker, 'GET', `/v1/sessions/${id}/messages?limit=200`);
  assert.ok(!JSON.stringify(messages.body).includes(TOKEN));
  const sse = await openStream(`${started.worker.baseUrl}/v1/sessions/${id}/stream`, {
    headers: { authorization: 'Bearer e2e-api-token' }, lastEventId: '0',
  });
  const events = await sse.until((e) => e.type === 'end');
  sse.close();
  assert.ok(!JSON.stringify(events).includes(TOKEN));
  const logged = readFileSync(started.worker.logPath, 'utf8').split('\n').filter((l) => l.startsWith('{'));
  assert.ok(logged.length > 0, 'the worker logged');
  assert.ok(!logged.some((l) => l.includes(TOKEN)), 'no token in the worker\'s logs');
});

test('an error result, structured content and streamed progress reach the model and the stream', async () => {
  const { llm } = started;
  llm.reset();
  const id = newId('mixed');
  llm.push({ calls: [
    { name: 'files__fail', args: {} },
    { name: 'files__measure', args: { thing: 'table' } },
    { name: 'files__count', args: { n: 3 } },
  ] }, { text: 'Done.' });
  await create(id, 'do three things');
  assert.equal((await settled(id)).status, 'completed');
  const byTool = Object.fromEntries((await toolMessages(id)).map((m) => [m.toolName, m]));
  assert.equal(byTool.files__fail.isError, true);
  assert.match(byTool.files__fail.content.error, /the disk is on fire/);
  assert.deepEqual(byTool.files__measure.content, { cm: 5 });
  assert.deepEqual(byTool.files__count.content, { text: 'counted to 3' });

  const sse = await openStream(`${started.worker.baseUrl}/v1/sessions/${id}/stream`, {
    headers: { authorization: 'Bearer e2e-api-token' }, lastEventId: '0',
  });
  const events = await sse.until((e) => e.type === 'end');
  sse.close?.();
  const progress = events.filter((e) => e.type === 'custom' && e.json.eventName === 'mcp_progress');
  assert.deepEqual(progress.map((e) => e.json.data.progress.progress), [1, 2, 3]);
  assert.equal(progress[0].json.data.tool, 'count');
});

test('a destructive tool waits for approval across a killed worker and a server that forgot its sessions, and runs once', async () => {
  const { llm } = started;
  llm.reset();
  const id = newId('wipe');
  llm.push({ calls: [{ name: 'files__wipe', args: { disk: 'd1' } }] });
  await create(id, 'wipe d1');
  const waiting = await settled(id);
  assert.equal(waiting.pendingToolCalls[0].kind, 'approval');
  assert.equal(waiting.pendingToolCalls[0].toolName, 'files__wipe');
  assert.equal(mcp.ran('wipe').length, 0, 'nothing runs before approval');

  const persistDir = started.worker.persistDir;
  await started.worker.kill();
  await started.llm.close();
  mcp.forget();
  const sessionsBefore = mcp.record.sessions;
  started = await startWithMock(vars(), persistDir);
  started.llm.push({ text: 'Wiped.' });
  const ok = await api(started.worker, 'POST', `/v1/sessions/${id}/tool-results`,
    { kind: 'approval-response', toolCallId: waiting.pendingToolCalls[0].toolCallId, approved: true });
  assert.equal(ok.status, 202, JSON.stringify(ok.body));
  const done = await waitFor(started.worker, id, (s) => s.status !== 'active', 30_000);
  assert.equal(done.status, 'completed', JSON.stringify(done));
  assert.equal(mcp.ran('wipe').length, 1, 'ran exactly once');
  assert.ok(mcp.record.sessions > sessionsBefore, 'a new MCP session after the restart');
  const [result] = await toolMessages(id);
  assert.deepEqual(result.content, { text: 'wiped d1' });
});

test('aborting a run cancels its hung MCP call at the server', async () => {
  const { llm } = started;
  llm.reset();
  const id = newId('slow');
  llm.push({ calls: [{ name: 'files__slow', args: {} }] });
  await create(id, 'take your time');
  const deadline = Date.now() + 20_000;
  while (mcp.ran('slow').length === 0 && Date.now() < deadline) await sleep(50);
  assert.equal(mcp.ran('slow').length, 1, 'the slow call started');
  const before = mcp.record.cancelled.length;
  const res = await api(started.worker, 'POST', `/v1/sessions/${id}/abort`, { reason: 'enough' });
  assert.ok([200, 202].includes(res.status), JSON.stringify(res.body));
  while (mcp.record.cancelled.length === before && Date.now() < deadline) await sleep(50);
  assert.equal(mcp.record.cancelled.length, before + 1, 'notifications/cancelled reached the server');
  const aborted = await waitFor(started.worker, id, (s) => s.status !== 'active', 30_000);
  assert.equal(aborted.status, 'aborted');
});

test('a server that is down gives the model no tools; the run goes on', async () => {
  const down = await startWithMock({ MCP_SERVER_URL: 'http://127.0.0.1:9/mcp', MCP_SERVER_NAME: 'gone' });
  try {
    down.llm.push({ text: 'My tools are not reachable right now.' });
    const id = newId('down');
    const res = await api(down.worker, 'POST', '/v1/sessions', { agent: 'connector', sessionId: id, input: 'hi' });
    assert.equal(res.status, 201);
    const done = await waitFor(down.worker, id, (s) => s.status !== 'active', 30_000);
    assert.equal(done.status, 'completed');
    assert.equal(down.llm.requests[0].body.tools, undefined, 'no tools offered');
  } finally {
    await down.worker.stop();
    await down.llm.close();
    down.worker.cleanup();
  }
});
