// Remote sub-agents against two real workers (wrangler dev, each with its own local D1 and
// Durable Objects, on two loopback ports): the parent deployment's `dispatcher` agent
// hands tasks to the `assistant` of the remote deployment through `ask_remote`. Both run
// the demo model, so `ask remote note milk` makes the remote assistant add a note and
// `ask remote delete /tmp/x` makes it wait for an approval, which is answered at the
// parent. The parent is killed while it waits and recovers without a second remote
// session; the remote is stopped while the parent waits and the call fails cleanly.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { api, gapFree, waitFor } from './client.mjs';
import { startWorker } from './harness.mjs';
import { openStream } from './sse.mjs';

const PARENT_TOKEN = 'parent-token';
const REMOTE_TOKEN = 'remote-token';

let remote;
let parent;
let parentDir;

async function startParent() {
  parent = await startWorker({
    persistDir: parentDir,
    migrate: parentDir === undefined,
    vars: {
      API_TOKEN: PARENT_TOKEN,
      REMOTE_AGENT_URL: remote.baseUrl,
      REMOTE_AGENT_TOKEN: REMOTE_TOKEN,
    },
  });
  parentDir = parent.persistDir;
}

before(async () => {
  remote = await startWorker({ vars: { API_TOKEN: REMOTE_TOKEN } });
  await startParent();
});
after(async () => {
  await parent?.stop();
  await remote?.stop();
  parent?.cleanup();
  remote?.cleanup();
});

let n = 0;
const newId = () => `dispatch-${process.pid}-${++n}`;
const call = (worker, token, method, path, body) => api(worker, method, path, body, token);
const atParent = (method, path, body) => call(parent, PARENT_TOKEN, method, path, body);
const atRemote = (method, path, body) => call(remote, REMOTE_TOKEN, method, path, body);

async function dispatch(input) {
  const id = newId();
  const res = await atParent('POST', '/v1/sessions', { agent: 'dispatcher', sessionId: id, input });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return id;
}

const settled = (id, timeoutMs = 30_000) =>
  waitFor(parent, id, (s) => s.status !== 'active', timeoutMs, PARENT_TOKEN);

/** Waits until the parent lists a call pending in its remote session; returns it. */
async function pendingAtParent(id) {
  const session = await waitFor(parent, id, (s) => s.pendingToolCalls.length > 0, 30_000, PARENT_TOKEN);
  return session.pendingToolCalls[0];
}

/** The parent's stream, replayed (it ended). */
async function streamOf(id) {
  const stream = await openStream(`${parent.baseUrl}/v1/sessions/${id}/stream`, {
    headers: { authorization: `Bearer ${PARENT_TOKEN}` },
  });
  await stream.closed;
  return stream.events;
}

const remoteId = (events) => events.find((e) => e.type === 'subagent_start').json.subSessionId;

async function toolResults(id) {
  const msgs = await atParent('GET', `/v1/sessions/${id}/messages`);
  return msgs.body.messages.filter((m) => m.role === 'tool');
}

test('a remote session runs the task; its stream is relayed into the parent\'s', async () => {
  const id = await dispatch('ask remote note milk');
  assert.equal((await settled(id)).status, 'completed');
  const [result] = await toolResults(id);
  assert.equal(result.toolName, 'ask_remote');
  assert.equal(result.isError, false, JSON.stringify(result));
  assert.deepEqual(result.content, { text: 'Done. add_note returned {"count":1}.' });

  const events = await streamOf(id);
  assert.ok(gapFree(events), 'the parent\'s stream has no gaps');
  const child = remoteId(events);
  const there = await atRemote('GET', `/v1/sessions/${child}`);
  assert.equal(there.status, 200);
  assert.equal(there.body.agent, 'assistant');
  assert.equal(there.body.status, 'completed');
  assert.deepEqual(there.body.state, { notes: [{ text: 'milk' }] });
  // The remote's chunks, tagged with its session, between subagent_start and _end.
  const start = events.findIndex((e) => e.type === 'subagent_start');
  const end = events.findIndex((e) => e.type === 'subagent_end');
  const relayed = events.filter((e) => e.json?.sessionId === child);
  assert.ok(relayed.some((e) => e.type === 'tool_end' && e.json.toolName === 'add_note'), 'the remote\'s tool ran in the parent\'s stream');
  assert.ok(relayed.every((e) => e.json.agentType === 'assistant'));
  const positions = relayed.map((e) => events.indexOf(e));
  assert.ok(positions.every((p) => p > start && p < end), 'relayed between the sub-agent\'s start and end');
});

test('a remote approval is answered at the parent and forwarded once', async () => {
  const id = await dispatch('ask remote delete /tmp/x');
  const pending = await pendingAtParent(id);
  assert.equal(pending.toolName, 'delete_file');
  assert.equal(pending.kind, 'approval');
  assert.deepEqual(pending.arguments, { path: '/tmp/x' });

  // `follow=false`: the buffered events of a session that is still active, then the end.
  const child = remoteId(await (async () => {
    const s = await openStream(`${parent.baseUrl}/v1/sessions/${id}/stream?follow=false`, {
      headers: { authorization: `Bearer ${PARENT_TOKEN}` },
    });
    await s.closed;
    return s.events;
  })());
  assert.equal((await atRemote('GET', `/v1/sessions/${child}`)).body.status, 'active');

  const answer = { kind: 'approval-response', toolCallId: pending.toolCallId, approved: true };
  const first = await atParent('POST', `/v1/sessions/${id}/tool-results`, answer);
  assert.equal(first.status, 202, JSON.stringify(first.body));
  const second = await atParent('POST', `/v1/sessions/${id}/tool-results`, answer);
  assert.equal(second.status, 409, JSON.stringify(second.body));
  assert.equal(second.body.error.code, 'tool_call_already_resolved');

  assert.equal((await settled(id)).status, 'completed');
  const [result] = await toolResults(id);
  assert.deepEqual(result.content, { text: 'Done. delete_file returned {"deleted":"/tmp/x"}.' });
});

test('the parent killed while it waits recovers without starting a second remote session', async () => {
  const id = await dispatch('ask remote delete /tmp/y');
  const pending = await pendingAtParent(id);
  await parent.kill();
  await startParent();
  const answer = { kind: 'approval-response', toolCallId: pending.toolCallId, approved: true };
  const res = await atParent('POST', `/v1/sessions/${id}/tool-results`, answer);
  assert.equal(res.status, 202, JSON.stringify(res.body));
  assert.equal((await settled(id)).status, 'completed');
  const [result] = await toolResults(id);
  assert.deepEqual(result.content, { text: 'Done. delete_file returned {"deleted":"/tmp/y"}.' });

  // One session for this parent on the remote, which ran its task once.
  const listed = await atRemote('GET', '/v1/sessions?agent=assistant&limit=100');
  assert.equal(listed.status, 200, JSON.stringify(listed.body));
  const mine = listed.body.sessions.filter((s) => s.sessionId.startsWith(`${id}.sub-`));
  assert.equal(mine.length, 1, JSON.stringify(mine));
  const msgs = await atRemote('GET', `/v1/sessions/${mine[0].sessionId}/messages`);
  const roles = msgs.body.messages.map((m) => m.role);
  assert.deepEqual(roles, ['user', 'assistant', 'tool', 'assistant'], 'the task ran once');
});

test('a remote stopped while the parent waits fails the call cleanly', async () => {
  const id = await dispatch('ask remote delete /tmp/z');
  await pendingAtParent(id);
  await remote.stop();
  const done = await settled(id, 60_000);
  assert.equal(done.status, 'completed', JSON.stringify(done));
  const [result] = await toolResults(id);
  assert.equal(result.isError, true);
  assert.equal(result.content.code, 'subagent_remote_unavailable', JSON.stringify(result.content));
  const events = await streamOf(id);
  const end = events.find((e) => e.type === 'tool_end' && e.json.toolName === 'ask_remote');
  assert.equal(end.json.success, false);
});
