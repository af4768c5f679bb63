// The session's Durable Object storage is its commit log; D1 is fed from it in the
// background. Nothing a client waits for waits on D1: a full approval cycle completes
// while D1 is down (or slow), and D1 catches up afterwards with the same rows; a long
// outage ends in 503 `storage_backlog`, never in a lost step; a session whose object
// lost its storage is rebuilt from D1; and `GET /v1/sessions` lists sessions from D1.

import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { API_TOKEN, api, startWithMock, waitFor } from './client.mjs';
import { openStream } from './sse.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const running = [];
after(async () => {
  for (const { worker, llm } of running) {
    await worker.stop();
    await llm.close();
    worker.cleanup();
  }
});

async function start(vars = {}, persistDir) {
  const started = await startWithMock(vars, persistDir, { flavour: 'test' });
  running.push(started);
  return started;
}

async function stop(started) {
  running.splice(running.indexOf(started), 1);
  await started.worker.stop();
  await started.llm.close();
}

/** One approval cycle: create → approval request on the stream → approve → end. */
async function cycle(worker, llm, id) {
  llm.push({ calls: [{ name: 'delete_file', args: { path: `/tmp/${id}` } }] }, { text: `Deleted ${id}.` });
  const t0 = Date.now();
  const created = await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input: `delete /tmp/${id}` });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const createdMs = Date.now() - t0;
  const sse = await openStream(`${worker.baseUrl}${created.body.streamUrl}`);
  const [request] = (await sse.until((e) => e.type === 'tool_approval_request'))
    .filter((e) => e.type === 'tool_approval_request');
  const ok = await api(worker, 'POST', `/v1/sessions/${id}/tool-results`,
    { kind: 'approval-response', toolCallId: request.json.toolCallId, approved: true });
  assert.equal(ok.status, 202);
  await sse.until((e) => e.type === 'end');
  return { createdMs, cycleMs: Date.now() - t0 };
}

const replica = async (worker, id) => (await api(worker, 'POST', `/__test/replica/${id}`, {})).body;

test('every kind of commit reaches D1 with exactly the object\'s rows', async () => {
  const { worker, llm } = await start();
  const id = `rep-kinds-${process.pid}`;
  await cycle(worker, llm, id);
  llm.push({ calls: [{ name: 'add_note', args: { text: 'more' } }] }, { text: 'Noted.' });
  assert.equal((await api(worker, 'POST', `/v1/sessions/${id}/messages`, { message: 'note more' })).status, 202);
  await waitFor(worker, id, (s) => s.status === 'completed' && s.state.notes.length === 1);
  llm.push({ text: 'Again.' });
  const [first] = (await api(worker, 'GET', `/v1/sessions/${id}/checkpoints`)).body.checkpoints;
  const retried = await api(worker, 'POST', `/v1/sessions/${id}/retry`, { checkpointId: first.id });
  assert.equal(retried.status, 202);
  await waitFor(worker, id, (s) => s.status === 'completed' && s.state.notes.length === 0);
  const r = await replica(worker, id);
  assert.ok(r.caughtUp && r.equal, JSON.stringify(r));
  assert.equal(r.waiting, 0);
  assert.ok(r.lags.length >= 5, `every commit was replicated: ${r.lags}`);
  // Each batch D1 took is reported (commits, bytes, ms): the capacity model's inputs.
  assert.equal(r.sends.reduce((n, [commits]) => n + commits, 0), r.lags.length, JSON.stringify(r.sends));
  assert.ok(r.sends.every(([commits, bytes, ms]) => commits >= 1 && bytes > 0 && ms >= 0), JSON.stringify(r.sends));
});

test('D1 down: the cycle completes without it, then D1 catches up with the same rows', async () => {
  const down = await start({ TEST_D1_FAULT: 'down' });
  const id = `rep-down-${process.pid}`;
  const { cycleMs } = await cycle(down.worker, down.llm, id);
  const session = await api(down.worker, 'GET', `/v1/sessions/${id}`);
  assert.equal(session.body.status, 'completed', 'the run never waited on D1');
  const behind = await replica(down.worker, id);
  assert.equal(behind.caughtUp, false);
  assert.ok(behind.waiting >= 3, `commits wait for D1: ${JSON.stringify(behind)}`);
  const persistDir = down.worker.persistDir;
  await stop(down);

  const up = await start({}, persistDir);
  const r = await replica(up.worker, id);
  assert.ok(r.caughtUp && r.equal, JSON.stringify(r));
  const listed = await api(up.worker, 'GET', `/v1/sessions?agent=assistant&status=completed`);
  assert.ok(listed.body.sessions.some((s) => s.sessionId === id), 'listed from D1 once replicated');
  console.error(`# cycle with D1 down: ${cycleMs} ms`);
});

test('D1 slow (2 s per call): no D1 round trip between a click and what the client sees', async () => {
  const { worker, llm } = await start({ TEST_D1_FAULT: 'delay:2000' });
  const id = `rep-slow-${process.pid}`;
  const { createdMs, cycleMs } = await cycle(worker, llm, id);
  assert.ok(createdMs < 1_500, `the 201 did not wait on D1: ${createdMs} ms`);
  assert.ok(cycleMs < 1_500, `the whole cycle did not wait on D1: ${cycleMs} ms`);
  const r = await replica(worker, id);
  assert.ok(r.caughtUp && r.equal, JSON.stringify(r));
});

test('past the backlog bound a session refuses commits with 503 storage_backlog, and recovers', async () => {
  const down = await start({ TEST_D1_FAULT: 'down', D1_BACKLOG_COMMITS: '4' });
  const id = `rep-backlog-${process.pid}`;
  await cycle(down.worker, down.llm, id); // 4 commits wait: create, suspension, results, final
  const refused = await api(down.worker, 'POST', `/v1/sessions/${id}/messages`, { message: 'one more' });
  assert.equal(refused.status, 503, JSON.stringify(refused.body));
  assert.equal(refused.body.error.code, 'storage_backlog');
  assert.equal(refused.body.error.retryable, true);
  const persistDir = down.worker.persistDir;
  await stop(down);

  const up = await start({ D1_BACKLOG_COMMITS: '4' }, persistDir);
  assert.ok((await replica(up.worker, id)).equal);
  up.llm.push({ text: 'Caught up.' });
  const again = await api(up.worker, 'POST', `/v1/sessions/${id}/messages`, { message: 'one more' });
  assert.equal(again.status, 202, JSON.stringify(again.body));
  await waitFor(up.worker, id, (s) => s.status === 'completed');
});

test('a session whose object lost its storage is rebuilt from D1 and goes on', async () => {
  const { worker, llm } = await start();
  const id = `rep-lost-${process.pid}`;
  await cycle(worker, llm, id);
  assert.ok((await replica(worker, id)).equal);
  const before = (await api(worker, 'GET', `/v1/sessions/${id}`)).body;
  const transcript = (await api(worker, 'GET', `/v1/sessions/${id}/messages`)).body.messages;
  assert.equal((await api(worker, 'POST', `/__test/forget/${id}`, {})).status, 202);

  const after = (await api(worker, 'GET', `/v1/sessions/${id}`)).body;
  // The stream buffer lived in the object's storage and is not in D1: it starts over
  // (a client resuming after an old sequence gets `truncated` and refetches).
  assert.ok(before.streamSequence > 0);
  assert.equal(after.streamSequence, 0, 'the stream starts over');
  assert.deepEqual({ ...after, streamSequence: before.streamSequence }, before, 'head and state rebuilt');
  assert.deepEqual((await api(worker, 'GET', `/v1/sessions/${id}/messages`)).body.messages, transcript);
  assert.equal((await api(worker, 'GET', `/v1/sessions/${id}/checkpoints`)).body.checkpoints.length, 4);
  llm.push({ text: 'Still here.' });
  assert.equal((await api(worker, 'POST', `/v1/sessions/${id}/messages`, { message: 'hello again' })).status, 202);
  await waitFor(worker, id, (s) => s.status === 'completed' && s.version > before.version);
  assert.ok((await replica(worker, id)).equal, 'and replicates on from there');
  const unknown = await api(worker, 'GET', `/v1/sessions/never-${process.pid}`);
  assert.equal(unknown.status, 404);
});

test('GET /v1/sessions lists from D1: newest first, filtered, paged, API token only', async () => {
  const { worker, llm } = await start();
  const ids = [0, 1, 2, 3, 4].map((n) => `rep-list-${process.pid}-${n}`);
  for (const id of ids) {
    llm.push({ text: `hi ${id}` });
    const res = await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input: 'hi' });
    assert.equal(res.status, 201);
    await waitFor(worker, id, (s) => s.status === 'completed');
    await replica(worker, id);
    await sleep(5);
  }
  const page1 = await api(worker, 'GET', '/v1/sessions?agent=assistant&limit=2');
  assert.equal(page1.status, 200, JSON.stringify(page1.body));
  const mine = (list) => list.filter((s) => s.sessionId.startsWith(`rep-list-${process.pid}`)).map((s) => s.sessionId);
  assert.deepEqual(mine(page1.body.sessions), [ids[4], ids[3]], 'newest first');
  assert.equal(typeof page1.body.nextCursor, 'string');
  const page2 = await api(worker, 'GET', `/v1/sessions?agent=assistant&limit=2&cursor=${encodeURIComponent(page1.body.nextCursor)}`);
  assert.deepEqual(mine(page2.body.sessions), [ids[2], ids[1]]);
  const s = page1.body.sessions[0];
  assert.deepEqual(Object.keys(s).sort(), ['agent', 'createdAt', 'sessionId', 'status', 'updatedAt', 'version']);
  assert.equal(s.status, 'completed');
  const since = await api(worker, 'GET', `/v1/sessions?updatedSince=${s.updatedAt}`);
  assert.ok(since.body.sessions.every((x) => x.updatedAt >= s.updatedAt));
  assert.equal((await api(worker, 'GET', '/v1/sessions?status=active')).body.sessions.filter((x) => ids.includes(x.sessionId)).length, 0);
  assert.equal((await api(worker, 'GET', '/v1/sessions?status=nope')).status, 400);
  assert.equal((await api(worker, 'GET', '/v1/sessions?limit=1000')).status, 400);
  const token = (await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', input: 'x' })).body.sessionToken;
  assert.equal((await api(worker, 'GET', '/v1/sessions', undefined, token)).status, 403);
  assert.equal((await api(worker, 'GET', '/v1/sessions', undefined, null)).status, 401);
});
