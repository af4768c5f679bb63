// Retention run by the worker's cron trigger (`wrangler dev --test-scheduled`, its
// `scheduled` entry reached at GET /__scheduled) over a record on two local D1
// databases: ended sessions compacted to their index (RETAIN_DAYS=0), then erased
// (ERASE_AFTER_DAYS=0) in batches of one that the next run continues — children,
// object storage and the rows of every shard — while a session that waits is kept; and
// a record that keeps the index only from the start (D1_REPLICA=index).

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { api, byRole, eventually, replicated, startWithMock, waitFor } from './client.mjs';
import { d1Rows, shardBindings, shardOf as shardOfN } from './harness.mjs';

const SHARDS = 2;
const BINDINGS = shardBindings(SHARDS);
const shardOf = (id) => shardOfN(id, SHARDS);

let worker;
let llm;
let persistDir;

async function start(vars) {
  ({ worker, llm } = await startWithMock(vars, persistDir, { shards: SHARDS, scheduled: true }));
  persistDir = worker.persistDir;
  llm.respondWith(byRole);
}

before(async () => { await start({ RETAIN_DAYS: '0' }); });
after(async () => { await worker?.stop(); await llm?.close(); if (!process.env.KEEP_E2E_STATE) worker?.cleanup(); });

/** The first ids `name-k` on shard `shard`, `n` of them. */
function idsOn(name, shard, n) {
  const ids = [];
  for (let k = 0; ids.length < n; k++) {
    const id = `${name}-${process.pid}-${k}`;
    if (shardOf(id) === shard) ids.push(id);
  }
  return ids;
}

// Two ended roots on the first shard (one a coordinator with its research child), one
// on the second, and one waiting for an approval.
const [tree, noted] = idsOn('ended', 0, 2);
const [other] = idsOn('other', 1, 1);
const [waiting] = idsOn('waiting', 1, 1);
let child;
/** The rows of session `id` in `table` of its shard (a child's is its root's). */
const rowsOf = async (id, table = 'messages', column = 'session_id') => {
  const shard = BINDINGS[shardOf(id === child ? tree : id)];
  return (await d1Rows(worker, shard, `SELECT COUNT(*) AS n FROM ${table} WHERE ${column} = '${id}'`))[0].n;
};

/** Runs the cron trigger once (the test build runs `scheduled` to its end before answering). */
async function cron() {
  const res = await worker.fetch('/__scheduled?cron=17+*+*+*+*');
  assert.equal(res.status, 200, await res.text());
}

/** The worker log's `retention_progress` lines so far. */
const progress = () => readFileSync(worker.logPath, 'utf8').split('\n')
  .filter((l) => l.includes('"retention_progress"')).map((l) => JSON.parse(l.slice(l.indexOf('{'))));

/** The `retention_progress` lines once there are `n` (the log is written as it goes). */
const logged = (n) => eventually(progress, (lines) => lines.length >= n);

test('ended sessions are compacted to their index; the one that waits keeps its transcript', async () => {
  for (const [id, agent, input] of [[tree, 'coordinator', 'tides'], [noted, 'assistant', 'note this'], [other, 'assistant', 'note that']]) {
    const res = await api(worker, 'POST', '/v1/sessions', { agent, sessionId: id, input });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    await waitFor(worker, id, (s) => s.status === 'completed', 30_000);
  }
  assert.equal((await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: waiting, input: '/tmp/x' })).status, 201);
  await waitFor(worker, waiting, (s) => s.pendingToolCalls?.length === 1);
  [{ id: child }] = await eventually(
    () => d1Rows(worker, BINDINGS[0], `SELECT id FROM sessions WHERE head ->> '$.parent.rootId' = '${tree}'`), (r) => r.length === 1);
  // Every commit in the record first: compaction is for sessions that ended days ago,
  // long replicated.
  for (const id of [tree, child, noted, other, waiting]) {
    await replicated(worker, id, { binding: BINDINGS[shardOf(id === child ? tree : id)] });
  }

  await cron();
  for (const id of [tree, child, noted, other]) {
    assert.equal(await rowsOf(id), 0, `${id}: no transcript in the record`);
    assert.equal(await rowsOf(id, 'checkpoints'), 0, `${id}: no checkpoints`);
    assert.equal(await rowsOf(id, 'sessions', 'id'), 1, `${id}: its index stays`);
    assert.ok(await rowsOf(id, 'runs') > 0, `${id}: its runs (usage) stay`);
  }
  assert.ok(await rowsOf(waiting) > 0, 'a waiting session is not ended');
  // The sessions themselves are whole: their objects keep them.
  const messages = await api(worker, 'GET', `/v1/sessions/${noted}/messages`);
  assert.equal(messages.status, 200);
  assert.ok(messages.body.messages.length >= 3, JSON.stringify(messages.body));
  const listed = await api(worker, 'GET', '/v1/sessions?limit=100');
  assert.deepEqual(listed.body.sessions.map((s) => s.sessionId).sort(), [noted, other, tree, child, waiting].sort(),
    'compacted sessions stay listed');
  const lines = await logged(2);
  assert.deepEqual(lines.map((l) => l.shard).sort(), BINDINGS);
  assert.equal(lines.reduce((n, l) => n + l.compacted, 0), 4);

  // A second run finds nothing left to compact.
  await cron();
  assert.equal((await logged(4)).slice(-2).reduce((n, l) => n + l.compacted, 0), 0);
});

test('ended sessions are erased in batches the next run continues, children and all', async () => {
  await worker.stop();
  await llm.close();
  await start({ RETAIN_DAYS: '0', ERASE_AFTER_DAYS: '0', RETENTION_BATCH: '1' });

  await cron();
  const first = await logged(2);
  assert.equal(first.length, 2);
  const home = first.find((l) => l.shard === BINDINGS[0]);
  assert.deepEqual([home.erased, home.more], [1, true], JSON.stringify(first));
  assert.equal((await api(worker, 'GET', `/v1/sessions/${other}`)).status, 404, 'the second shard\'s one is gone');
  const left = [];
  for (const id of [tree, noted]) if (await rowsOf(id, 'sessions', 'id') > 0) left.push(id);
  assert.equal(left.length, 1, 'one of the first shard\'s two is left for the next run');

  await cron();
  const second = (await logged(4)).slice(-2);
  assert.equal(second.find((l) => l.shard === BINDINGS[0]).erased, 1, JSON.stringify(second));
  // A third run finds nothing left: no batch is full.
  await cron();
  const third = (await logged(6)).slice(-2);
  assert.ok(third.every((l) => l.erased === 0 && l.more === false), JSON.stringify(third));
  for (const id of [tree, child, noted, other]) {
    assert.equal((await api(worker, 'GET', `/v1/sessions/${id}`)).status, 404, id);
    for (const [table, column] of [['sessions', 'id'], ['messages', 'session_id'], ['runs', 'session_id'], ['subsessions', 'parent_id']]) {
      assert.equal(await rowsOf(id, table, column), 0, `${id}: ${table}`);
    }
  }
  const kept = await api(worker, 'GET', `/v1/sessions/${waiting}`);
  assert.equal(kept.status, 200);
  assert.equal(kept.body.pendingToolCalls.length, 1);
  assert.ok(await rowsOf(waiting) > 0);
  const listed = await api(worker, 'GET', '/v1/sessions?limit=100');
  assert.deepEqual(listed.body.sessions.map((s) => s.sessionId), [waiting]);
});

test('a record that keeps the index only gets the session row and runs, never the transcript', async () => {
  await worker.stop();
  await llm.close();
  await start({ D1_REPLICA: 'index' });
  const [id] = idsOn('index', 0, 1);
  assert.equal((await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input: 'note it' })).status, 201);
  await waitFor(worker, id, (s) => s.status === 'completed', 30_000);
  await replicated(worker, id, { binding: BINDINGS[shardOf(id)] });
  assert.equal(await rowsOf(id, 'sessions', 'id'), 1);
  assert.ok(await rowsOf(id, 'runs') > 0);
  for (const table of ['messages', 'checkpoints', 'state_log']) assert.equal(await rowsOf(id, table), 0, table);
  const messages = await api(worker, 'GET', `/v1/sessions/${id}/messages`);
  assert.ok(messages.body.messages.length >= 3, 'the session has its transcript');
  const usage = await api(worker, 'GET', '/v1/usage?groupBy=session');
  assert.ok(usage.body.groups.some((g) => g.key === id && g.runs === 1), JSON.stringify(usage.body));
});
