// A session's queue is bounded (SPEC §2d): with a session waiting on an approval,
// follow-ups of 900 KiB sent with `whenBusy: merge` join the last queued message only
// while it stays under a row's bound, then queue on their own, until the queue's
// messages would pass 8 MiB: that one is refused with 429 `queue_full` naming the
// bound, and nothing changed (no 500, however many come). A schedule that fires every
// second with such a message and `merge` is skipped once the queue is full — counted
// on the schedule, never a storage error, never an alarm re-armed in a loop.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { api, startWithMock, waitFor } from './client.mjs';

let worker;
let llm;
before(async () => {
  ({ worker, llm } = await startWithMock());
  llm.respondWith(() => ({ calls: [{ name: 'delete_file', args: { path: '/tmp/x' } }] }));
});
after(async () => { await worker?.stop(); await llm?.close(); worker?.cleanup(); });

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const big = (tag) => `${tag} ${'x'.repeat(900 * 1024)}`;

/** A session of `id` waiting on its approval. */
async function waiting(id) {
  const res = await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input: 'delete /tmp/x' });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  await waitFor(worker, id, (s) => s.pendingToolCalls?.length === 1);
}

test('merged follow-ups stay within a row, and the queue within its bytes: 429 naming the bound, nothing changed', async () => {
  const id = `merge-${process.pid}`;
  await waiting(id);
  const statuses = [];
  for (let i = 0; i < 10; i++) {
    const res = await api(worker, 'POST', `/v1/sessions/${id}/messages`, { message: big(`m${i}`), whenBusy: 'merge' });
    statuses.push(res.status);
    if (res.status === 429) {
      assert.equal(res.body.error.code, 'queue_full');
      assert.match(res.body.error.message, /8 MiB/);
    }
  }
  assert.deepEqual(statuses, [202, 202, 202, 202, 202, 202, 202, 202, 202, 429]);
  const view = (await api(worker, 'GET', `/v1/sessions/${id}`)).body;
  assert.equal(view.queue.length, 9, 'each 900 KiB message on its own: a row holds one');
  assert.equal(view.pendingToolCalls.length, 1, 'the approval still waits');
  // A small one still fits: it joins the last entry.
  const small = await api(worker, 'POST', `/v1/sessions/${id}/messages`, { message: 'small', whenBusy: 'merge' });
  assert.equal(small.status, 202, JSON.stringify(small.body));
  const queue = (await api(worker, 'GET', `/v1/sessions/${id}`)).body.queue;
  assert.equal(queue.length, 9);
  assert.equal(queue.at(-1).messages.length, 2, 'merged into the last');
});

test('a schedule that merges into a full queue is skipped and counted, never a storage error or a hot alarm', async () => {
  const id = `fire-${process.pid}`;
  await waiting(id);
  const created = await api(worker, 'POST', `/v1/sessions/${id}/schedules`, { every: 1, message: big('tick'), whenBusy: 'merge' });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  await sleep(12_000);
  const [schedule] = (await api(worker, 'GET', `/v1/sessions/${id}/schedules`)).body.schedules;
  const view = (await api(worker, 'GET', `/v1/sessions/${id}`)).body;
  assert.equal(view.queue.length, 9, 'the queue stops at its bytes');
  assert.ok(schedule.fired === 9 && schedule.skipped >= 1, JSON.stringify(schedule));
  const log = readFileSync(worker.logPath, 'utf8');
  assert.doesNotMatch(log, /schedule_error/, 'no claim failed');
  assert.doesNotMatch(log, /SQLITE_TOOBIG/);
  assert.equal((await api(worker, 'DELETE', `/v1/sessions/${id}`)).status, 204);
});
