// The queryable record over four local D1 databases (`DATABASE_SHARDS`, wrangler dev):
// 64 clients' sessions spread over the shards by their ids (the counts reported), a
// child on its root's shard, the session list and the inbox across the shards equal to
// the union of what each holds, a shard whose database fails (the lists 503 naming it,
// or partial; runs unaffected; replication catches up when it is back) and erasure of
// a session tree on its shard.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { API_TOKEN, api, byRole, eventually, startWithMock, waitFor } from './client.mjs';
import { d1Rows, shardBindings, shardOf as shardOfN } from './harness.mjs';
import { openStream } from './sse.mjs';

const SHARDS = 4;
const CLIENTS = 64;
const BINDINGS = shardBindings(SHARDS);

let worker;
let llm;
let persistDir;

/** The shard (of four) helix-edge gives a root session. */
const shardOf = (id) => shardOfN(id, SHARDS);

async function start(vars = {}) {
  ({ worker, llm } = await startWithMock({ SSE_PING_MS: '1000', ...vars }, persistDir, { shards: SHARDS }));
  persistDir = worker.persistDir;
  llm.respondWith(byRole);
}

before(async () => { await start(); });
after(async () => { await worker?.stop(); await llm?.close(); if (!process.env.KEEP_E2E_STATE) worker?.cleanup(); });

const rowsOf = (binding, sql) => d1Rows(worker, binding, sql);
const idsOn = async (binding) => (await rowsOf(binding, 'SELECT id FROM sessions ORDER BY id')).map((r) => r.id);

/** One approval cycle of session `id`: create, the approval on its stream, approve, completed. */
async function cycle(id) {
  const created = await send('POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input: `/tmp/${id}` });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const streamUrl = created.body.streamUrl ?? `/v1/sessions/${id}/stream?after=0`;
  const stream = await openStream(`${worker.baseUrl}${streamUrl}`, { headers: { authorization: `Bearer ${API_TOKEN}` } });
  const events = await stream.until((e) => e.type === 'tool_approval_request', 30_000);
  stream.close();
  const asked = events.find((e) => e.type === 'tool_approval_request');
  const answered = await send('POST', `/v1/sessions/${id}/tool-results`,
    { kind: 'approval-response', toolCallId: asked.json.toolCallId, approved: true });
  assert.equal(answered.status, 202, JSON.stringify(answered.body));
  await waitFor(worker, id, (s) => s.status === 'completed', 30_000);
}

/**
 * A request sent again when the connection drops: a kept-alive connection to wrangler's
 * proxy is now and then closed under a request that follows a pause (the seconds a
 * `d1 execute` takes; load.test.mjs counts the same drops). A GET is safe to send twice;
 * a POST sent again that meets 409 had landed the first time.
 */
async function send(method, path, body) {
  for (let attempt = 1; ; attempt++) {
    try {
      const res = await api(worker, method, path, body);
      const landed = attempt > 1 && (res.status === 409 || (method === 'DELETE' && res.status === 404));
      if (!landed) return res;
      return { status: { POST: path === '/v1/sessions' ? 201 : 202, DELETE: 204 }[method], body: {} };
    } catch (e) {
      if (attempt === 3) throw e;
    }
  }
}
const get = (path) => send('GET', path);

/** Polls `read` until `done(value)` holds (or 30 s pass): the last value. */
/** Every page of GET `path` (`limit` at a time): the items `pick` takes from each. */
async function pages(path, limit, pick) {
  const seen = [];
  let cursor;
  for (;;) {
    const sep = path.includes('?') ? '&' : '?';
    const res = await get(`${path}${sep}limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    seen.push(...pick(res.body));
    if (!res.body.nextCursor) return seen;
    cursor = res.body.nextCursor;
  }
}

/** Waits until the session list holds `n` sessions (replication is in the background). */
const listed = (n) => eventually(() => pages('/v1/sessions', 100, (b) => b.sessions.map((s) => s.sessionId)), (ids) => ids.length >= n);

const ids = Array.from({ length: CLIENTS }, (_, i) => `shard-${process.pid}-${i}`);

test('64 clients\' sessions spread over four databases, each on the shard its id gives', async (t) => {
  await Promise.all(ids.map((id) => cycle(id)));
  assert.equal((await listed(CLIENTS)).length, CLIENTS);
  const held = [];
  for (const binding of BINDINGS) held.push(await idsOn(binding));
  const counts = held.map((ids) => ids.length);
  t.diagnostic(`sessions per shard (${BINDINGS.join(', ')}): ${counts.join(', ')}`);
  assert.deepEqual(counts.reduce((a, b) => a + b), CLIENTS);
  for (const [i, binding] of BINDINGS.entries()) {
    assert.deepEqual(held[i], ids.filter((id) => shardOf(id) === i).sort(), `${binding} holds its sessions`);
    assert.ok(counts[i] > 0, `${binding} holds some`);
  }
});

test('the list and the inbox across the shards are the union of what each holds, page after page', async () => {
  const rows = [];
  for (const binding of BINDINGS) rows.push(...await rowsOf(binding, 'SELECT id, updated_at FROM sessions'));
  const union = rows
    .sort((a, b) => b.updated_at - a.updated_at || (a.id < b.id ? 1 : -1))
    .map((r) => r.id);
  for (const limit of [1, 7, 100]) {
    const listedIds = await pages('/v1/sessions', limit, (b) => b.sessions.map((s) => s.sessionId));
    assert.deepEqual(listedIds, union, `limit ${limit}`);
  }
  // Four sessions waiting on an approval, one per shard at least.
  const waiting = [];
  for (let k = 0; waiting.length < SHARDS; k++) {
    const id = `wait-${process.pid}-${k}`;
    if (!waiting.some((w) => shardOf(w) === shardOf(id))) waiting.push(id);
  }
  for (const id of waiting) {
    const res = await send('POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input: `/tmp/${id}` });
    assert.equal(res.status, 201);
    await waitFor(worker, id, (s) => s.pendingToolCalls?.length === 1);
  }
  const inbox = await eventually(() => pages('/v1/inbox', 2, (b) => b.items.map((i) => i.sessionId)),
    (ids) => ids.length >= waiting.length);
  assert.deepEqual([...inbox].sort(), [...waiting].sort());
  for (const id of waiting) {
    const pending = (await get(`/v1/sessions/${id}`)).body.pendingToolCalls[0];
    await send('POST', `/v1/sessions/${id}/tool-results`, { kind: 'approval-response', toolCallId: pending.toolCallId, approved: false });
  }
});

test('a chat\'s first message places its session on the shard its id gives', async () => {
  // Ids whose shard is not the first: a session left unplaced would be on the first.
  const chats = [];
  for (let k = 0; chats.length < 2; k++) if (shardOf(`chat-${process.pid}-${k}`) !== 0) chats.push(`chat-${process.pid}-${k}`);
  for (const id of chats) {
    const res = await fetch(`${worker.baseUrl}/v1/chat`, {
      method: 'POST',
      headers: { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ id, agent: 'assistant', messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: '/tmp/chat' }] }] }),
    });
    const streamed = await res.text(); // the UI message stream, to the approval
    assert.equal(res.status, 200, streamed);
    await waitFor(worker, id, (s) => s.pendingToolCalls?.length === 1);
    const home = BINDINGS[shardOf(id)];
    const rows = await eventually(() => rowsOf(home, `SELECT id FROM sessions WHERE id = '${id}'`), (r) => r.length === 1);
    assert.equal(rows.length, 1, `${id} on ${home}`);
    assert.deepEqual(await rowsOf(BINDINGS[0], `SELECT id FROM sessions WHERE id = '${id}'`), [], 'not on the first');
  }
});

test('a child lives on its root\'s shard, and deleting the root erases both there', async () => {
  const root = `tree-${process.pid}`;
  const res = await send('POST', '/v1/sessions', { agent: 'coordinator', sessionId: root, input: 'tides' });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  await waitFor(worker, root, (s) => s.status === 'completed', 30_000);
  const home = BINDINGS[shardOf(root)];
  const children = await eventually(
    () => rowsOf(home, `SELECT id FROM sessions WHERE head ->> '$.parent.rootId' = '${root}'`), (rows) => rows.length > 0);
  const [{ id: childId }] = children;
  for (const binding of BINDINGS.filter((b) => b !== home)) {
    assert.deepEqual(await rowsOf(binding, `SELECT id FROM sessions WHERE id IN ('${root}', '${childId}')`), [], binding);
  }
  const deleted = await send('DELETE', `/v1/sessions/${root}`);
  assert.equal(deleted.status, 204);
  const left = await eventually(
    () => rowsOf(home, `SELECT id FROM sessions WHERE id IN ('${root}', '${childId}')`), (rows) => rows.length === 0);
  assert.deepEqual(left, [], 'the tree is erased from its shard');
  assert.deepEqual(await rowsOf(home, `SELECT session_id FROM messages WHERE session_id IN ('${root}', '${childId}')`), []);
});

test('a shard whose database fails: the lists say so, runs go on, replication catches up', async () => {
  const down = BINDINGS[2];
  const before = await listed(0);
  await worker.stop();
  await llm.close();
  await start({ TEST_D1_FAULT: `down@${down}` });

  const list = await get('/v1/sessions');
  assert.equal(list.status, 503, JSON.stringify(list.body));
  assert.equal(list.body.error.code, 'storage_unavailable');
  assert.match(list.body.error.message, new RegExp(down));
  assert.equal((await get('/v1/inbox')).status, 503);
  const partial = await get('/v1/sessions?partial=true&limit=100');
  assert.equal(partial.status, 200);
  assert.deepEqual(partial.body.missingShards, [down]);
  const reachable = before.filter((id) => BINDINGS[shardOf(id)] !== down);
  assert.deepEqual(partial.body.sessions.map((s) => s.sessionId), reachable);
  assert.equal((await get('/v1/sessions?partial=maybe')).status, 400);

  // A session on the failing shard runs as any other; its rows wait in its object.
  let k = 0;
  while (BINDINGS[shardOf(`down-${process.pid}-${k}`)] !== down) k++;
  const id = `down-${process.pid}-${k}`;
  await cycle(id);
  assert.deepEqual(await rowsOf(down, `SELECT id FROM sessions WHERE id = '${id}'`), []);

  await worker.stop();
  await llm.close();
  await start();
  await waitFor(worker, id, (s) => s.status === 'completed');
  await eventually(() => rowsOf(down, `SELECT id FROM sessions WHERE id = '${id}'`), (rows) => rows.length === 1);
  const report = await send('POST', `/__test/replica/${id}`);
  assert.equal(report.status, 200, JSON.stringify(report.body));
  assert.ok(report.body.caughtUp && report.body.equal, JSON.stringify(report.body));
  const all = await listed(before.length + 1);
  assert.ok(all.includes(id), 'listed once caught up');
});
