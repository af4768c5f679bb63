// The queryable record over four local D1 databases (`DATABASE_SHARDS`, wrangler dev):
// 64 clients' sessions spread over the shards by their ids (the counts reported), a
// child on its root's shard, the session list and the inbox across the shards equal to
// the union of what each holds, and erasure of a session tree on its shard. A shard
// whose database fails is shards-faults.test.mjs.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { API_TOKEN, eventually, waitFor } from './client.mjs';
import { BINDINGS, SHARDS, shardOf, sharded } from './shards.mjs';

const CLIENTS = 64;
const s = sharded();
const { send, get, cycle, pages, listed, rowsOf, idsOn } = s;

before(async () => { await s.start(); });
after(async () => { await s.close(); });

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
    await waitFor(s.worker, id, (s) => s.pendingToolCalls?.length === 1);
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
    const res = await fetch(`${s.worker.baseUrl}/v1/chat`, {
      method: 'POST',
      headers: { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ id, agent: 'assistant', messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: '/tmp/chat' }] }] }),
    });
    const streamed = await res.text(); // the UI message stream, to the approval
    assert.equal(res.status, 200, streamed);
    await waitFor(s.worker, id, (s) => s.pendingToolCalls?.length === 1);
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
  await waitFor(s.worker, root, (s) => s.status === 'completed', 30_000);
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
