// Persistent children against the real worker (wrangler dev, local D1 and Durable
// Objects): the `team` agent (a dev agent) starts researcher helpers with the companion
// tools. Each helper is a session of its own, `{parent}-agent-{name}`, that keeps its
// transcript between the lead's messages; the lead waits for each turn durably.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { api, gapFree, startWithMock, waitFor } from './client.mjs';
import { openStream } from './sse.mjs';

let worker;
let llm;

/** The lead: `hire <name> <topic>`, `tell <name> <message>`, `status <name>`. */
function lead(last) {
  if (last.role === 'tool') return { text: `ok: ${last.content}` };
  const [verb, name, ...rest] = String(last.content).split(' ');
  const message = rest.join(' ');
  if (verb === 'hire') {
    return { calls: [{ name: 'companion__spawnAgent', args: { agentType: 'researcher', name, message } }] };
  }
  if (verb === 'tell') return { calls: [{ name: 'companion__sendMessage', args: { name, message } }] };
  return { calls: [{ name: 'companion__getChildStatus', args: { name } }] };
}

/** A helper: its summary counts the messages it has had, so its memory shows. */
function helper(body, last) {
  if (last.role === 'tool') return { calls: [{ name: '__finish__', args: { summary: `done: ${last.content}` } }] };
  if (last.content.startsWith('delete ')) {
    return { calls: [{ name: 'delete_file', args: { path: last.content.slice(7) } }] };
  }
  const turns = body.messages.filter((m) => m.role === 'user').length;
  return { calls: [{ name: '__finish__', args: { summary: `${last.content} (message ${turns})` } }] };
}

function respond(body) {
  const system = body?.messages?.[0]?.content ?? '';
  const last = body?.messages?.at(-1) ?? {};
  return system.startsWith('You are a researcher') ? helper(body, last) : lead(last);
}

async function start(persistDir) {
  ({ worker, llm } = await startWithMock({ SSE_PING_MS: '300' }, persistDir));
  llm.respondWith(respond);
}

before(async () => { await start(); });
after(async () => { await worker?.stop(); await llm?.close(); worker?.cleanup(); });

let n = 0;
const newId = (name) => `${name}-${process.pid}-${++n}`;

async function create(id, input) {
  const res = await api(worker, 'POST', '/v1/sessions', { agent: 'team', sessionId: id, input });
  assert.equal(res.status, 201, JSON.stringify(res.body));
}

const settled = (id) => waitFor(worker, id, (s) => s.status !== 'active', 30_000);

async function lastTool(id) {
  const msgs = await api(worker, 'GET', `/v1/sessions/${id}/messages`);
  return msgs.body.messages.filter((m) => m.role === 'tool').at(-1);
}

test('a helper keeps its memory across the lead\'s messages, the lead waiting on each turn', async () => {
  const id = newId('team');
  const child = `${id}-agent-ada`;
  await create(id, 'hire ada tides');
  assert.equal((await settled(id)).status, 'completed');
  const first = await lastTool(id);
  assert.equal(first.toolName, 'companion__spawnAgent');
  assert.deepEqual(first.content, { name: 'ada', status: 'completed', output: { summary: 'tides (message 1)' } });

  const sent = await api(worker, 'POST', `/v1/sessions/${id}/messages`, { message: 'tell ada currents' });
  assert.equal(sent.status, 202, JSON.stringify(sent.body));
  assert.equal((await settled(id)).status, 'completed');
  const second = await lastTool(id);
  assert.deepEqual(second.content.output, { summary: 'currents (message 2)' }, 'the same helper, its first turn remembered');

  const helper = await api(worker, 'GET', `/v1/sessions/${child}`);
  assert.equal(helper.status, 200);
  assert.equal(helper.body.agent, 'researcher');
  const runs = await api(worker, 'GET', `/v1/sessions/${child}/runs`);
  assert.equal(runs.body.runs.length, 2, 'one run per message');

  await api(worker, 'POST', `/v1/sessions/${id}/messages`, { message: 'status ada' });
  await settled(id);
  const status = await lastTool(id);
  assert.deepEqual(
    [status.content.status, status.content.mode, status.content.sessionId, status.content.output],
    ['completed', 'blocking', child, { summary: 'currents (message 2)' }],
  );

  // The helper's chunks reach the lead's stream, tagged with its session id.
  const sse = await openStream(`${worker.baseUrl}/v1/sessions/${id}/stream`, {
    headers: { authorization: 'Bearer e2e-api-token' },
  });
  const events = await sse.until((e) => e.type === 'end');
  await sse.closed;
  assert.ok(gapFree(events));
  assert.ok(events.some((e) => e.json?.sessionId === child && e.type === 'output'), 'the helper\'s output is relayed');
});

test('a lead restarted while it waits on a helper\'s approval resumes without a second helper turn', async () => {
  const id = newId('wait');
  const child = `${id}-agent-bo`;
  await create(id, 'hire bo delete /tmp/persistent');
  const root = await waitFor(worker, id, (s) => s.pendingToolCalls.length === 1, 30_000);
  const call = root.pendingToolCalls[0];
  assert.equal(call.toolName, 'delete_file', 'the helper\'s approval surfaces at the root');

  const persistDir = worker.persistDir;
  await worker.stop();
  await llm.close();
  await start(persistDir);

  const ok = await api(worker, 'POST', `/v1/sessions/${id}/tool-results`,
    { kind: 'approval-response', toolCallId: call.toolCallId, approved: true });
  assert.deepEqual([ok.status, ok.body], [202, { accepted: true }]);
  assert.equal((await settled(id)).status, 'completed');
  const spawned = await lastTool(id);
  assert.match(spawned.content.output.summary, /persistent/);
  const runs = await api(worker, 'GET', `/v1/sessions/${child}/runs`);
  assert.equal(runs.body.runs.length, 1, 'the helper was started once');
  const msgs = await api(worker, 'GET', `/v1/sessions/${child}/messages`);
  const deletes = msgs.body.messages.filter((m) => m.role === 'tool' && m.toolName === 'delete_file');
  assert.equal(deletes.length, 1, 'the approved call ran once');
});
