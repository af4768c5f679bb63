// Sub-agents against the real worker (wrangler dev, local D1 and Durable Objects): the
// `coordinator` reference agent delegates topics to `researcher` children, each a
// session in its own Durable Object. The mock model answers by role (system prompt)
// and by what the conversation holds, since sibling children call it concurrently.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { api, gapFree, startWithMock, waitFor } from './client.mjs';
import { openStream } from './sse.mjs';
import { research } from './research.mjs';

let worker;
let llm;

async function start(persistDir) {
  ({ worker, llm } = await startWithMock({ SSE_PING_MS: '300' }, persistDir));
  llm.respondWith(research);
}

before(async () => { await start(); });
after(async () => { await worker?.stop(); await llm?.close(); worker?.cleanup(); });

let n = 0;
const newId = (name) => `${name}-${process.pid}-${++n}`;

async function create(id, input) {
  const res = await api(worker, 'POST', '/v1/sessions', { agent: 'coordinator', sessionId: id, input });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body;
}

const stream = (id) => openStream(`${worker.baseUrl}/v1/sessions/${id}/stream`, {
  headers: { authorization: 'Bearer e2e-api-token' },
});

const approve = (id, toolCallId) => api(worker, 'POST', `/v1/sessions/${id}/tool-results`,
  { kind: 'approval-response', toolCallId, approved: true });

async function toolMessages(id) {
  const msgs = await api(worker, 'GET', `/v1/sessions/${id}/messages`);
  return msgs.body.messages.filter((m) => m.role === 'tool');
}

test('a parent with two parallel children completes with their outputs as tool results', async () => {
  const id = newId('pair');
  await create(id, 'alpha, beta');
  const sse = await stream(id);
  const events = await sse.until((e) => e.type === 'end');
  await sse.closed;
  assert.ok(gapFree(events), `gap-free ids: ${events.map((e) => e.id)}`);

  const own = events.filter((e) => e.json?.sessionId === id);
  const starts = own.filter((e) => e.type === 'subagent_start');
  assert.equal(starts.length, 2);
  assert.ok(starts.every((s) => s.json.agentType === 'researcher'));
  const suspended = own.find((e) => e.type === 'run_suspended');
  assert.equal(suspended.json.reason, 'awaiting_children');
  const childIds = starts.map((s) => s.json.subSessionId);
  assert.notEqual(childIds[0], childIds[1]);

  // Each child's own chunks are on the parent's stream, tagged with the child's id.
  for (const child of childIds) {
    const mine = events.filter((e) => e.json?.sessionId === child);
    assert.ok(mine.some((e) => e.type === 'run_started'), `child ${child} streamed its start`);
    assert.ok(mine.some((e) => e.type === 'output'), `child ${child} streamed its output`);
  }
  assert.equal(events.filter((e) => e.type === 'end').length, 1, "only the parent's end ends the stream");

  const ends = own.filter((e) => e.type === 'subagent_end');
  assert.deepEqual(ends.map((e) => e.json.result).sort((a, b) => a.summary.localeCompare(b.summary)),
    [{ summary: 'summary of alpha' }, { summary: 'summary of beta' }]);
  const results = await toolMessages(id);
  assert.deepEqual(results.map((m) => m.content).sort((a, b) => a.summary.localeCompare(b.summary)),
    [{ summary: 'summary of alpha' }, { summary: 'summary of beta' }]);
  const final = await api(worker, 'GET', `/v1/sessions/${id}`);
  assert.equal(final.body.status, 'completed');
  assert.deepEqual(final.body.state, { notes: [] }, "children never touch the parent's state");

  // Children are sessions of their own, with the input as their first message.
  const child = await api(worker, 'GET', `/v1/sessions/${childIds[0]}`);
  assert.equal(child.body.agent, 'researcher');
  assert.equal(child.body.status, 'completed');
  assert.deepEqual(child.body.state, {});
});

test('a child needing approval is approved through the root session and everything completes', async () => {
  const id = newId('approve');
  await create(id, 'delete /tmp/secret');
  const sse = await stream(id);
  const seen = await sse.until((e) => e.type === 'tool_approval_request');
  const request = seen.find((e) => e.type === 'tool_approval_request');
  assert.equal(request.json.toolName, 'delete_file');
  assert.notEqual(request.json.sessionId, id, 'the request is tagged with the child session');

  const root = await waitFor(worker, id, (s) => s.pendingToolCalls.length === 1);
  assert.equal(root.suspendedReason, 'suspended_awaiting_children');
  assert.deepEqual(root.pendingToolCalls[0], {
    toolCallId: request.json.toolCallId, toolName: 'delete_file',
    arguments: { path: '/tmp/secret' }, kind: 'approval',
  });

  const first = await approve(id, request.json.toolCallId);
  assert.deepEqual([first.status, first.body], [202, { accepted: true }]);
  const second = await approve(id, request.json.toolCallId);
  assert.deepEqual([second.status, second.body.error.code], [409, 'tool_call_already_resolved']);

  const events = await sse.until((e) => e.type === 'end');
  await sse.closed;
  assert.ok(gapFree(events));
  const deletes = events.filter((e) => e.type === 'tool_end' && e.json.toolName === 'delete_file');
  assert.equal(deletes.length, 1, 'the approved tool ran once');
  assert.deepEqual(deletes[0].json.result, { deleted: '/tmp/secret' });
  const [result] = await toolMessages(id);
  assert.match(result.content.summary, /deleted/);
  assert.equal((await api(worker, 'GET', `/v1/sessions/${id}`)).body.status, 'completed');
});

test('a failing child becomes a tool error and the parent continues', async () => {
  const id = newId('fail');
  await create(id, 'alpha, fail now');
  const done = await waitFor(worker, id, (s) => s.status !== 'active', 30_000);
  assert.equal(done.status, 'completed');
  const results = await toolMessages(id);
  const failed = results.find((m) => m.isError);
  assert.equal(failed.content.code, 'subagent_failed');
  assert.ok(results.some((m) => !m.isError && m.content.summary === 'summary of alpha'));
  const msgs = await api(worker, 'GET', `/v1/sessions/${id}/messages`);
  assert.equal(msgs.body.messages.at(-1).content, 'All research is in.');
});

test('a restart while parent and child are both suspended still completes the flow', async () => {
  const id = newId('restart');
  await create(id, 'delete /tmp/after-restart');
  const root = await waitFor(worker, id, (s) => s.pendingToolCalls.length === 1);
  const call = root.pendingToolCalls[0].toolCallId;

  const persistDir = worker.persistDir;
  await worker.stop();
  await llm.close();
  await start(persistDir);

  const ok = await approve(id, call);
  assert.deepEqual([ok.status, ok.body], [202, { accepted: true }]);
  const done = await waitFor(worker, id, (s) => s.status !== 'active', 30_000);
  assert.equal(done.status, 'completed');
  const [result] = await toolMessages(id);
  assert.match(result.content.summary, /after-restart/);
  const sse = await stream(id);
  const events = await sse.until((e) => e.type === 'end');
  assert.ok(gapFree(events), 'the replayed stream is gap-free across the restart');
  assert.equal(events.filter((e) => e.type === 'tool_end' && e.json.toolName === 'delete_file').length, 1);
});
