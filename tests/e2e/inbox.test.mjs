// The approvals inbox (`GET /v1/inbox`, the `inbox` feature): the calls waiting on a
// person across sessions, read from D1 — newest first, filtered, paged, API token only;
// answered through the session as always, after which the call leaves the inbox; a
// worker restart loses nothing (the inbox is the record, not memory). And token usage
// (`GET /v1/usage`, the `usage` feature), summed from the same record, per model too.

import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { api, replicated, startWithMock, waitFor } from './client.mjs';

const running = [];
after(async () => {
  for (const { worker, llm } of running) {
    await worker.stop();
    await llm.close();
    worker.cleanup();
  }
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const inbox = async (worker, query = '') => {
  const res = await api(worker, 'GET', `/v1/inbox${query}`);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body;
};

test('the inbox lists approvals and client calls across sessions, newest first, until answered', async () => {
  const started = await startWithMock();
  running.push(started);
  const { worker, llm } = started;
  const tag = `inbox-${process.pid}`;
  const mine = (page) => page.items.filter((i) => i.sessionId.startsWith(tag));
  const open = async (id, calls) => {
    llm.push({ calls });
    const created = await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input: 'go' });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const s = await waitFor(worker, id, (x) => x.pendingToolCalls.length === calls.length);
    await replicated(worker, id);
    await sleep(5);
    return { ...s, sessionToken: created.body.sessionToken };
  };
  const a = await open(`${tag}-a`, [{ name: 'delete_file', args: { path: '/tmp/a' } }]);
  const b = await open(`${tag}-b`, [{ name: 'ask_user', args: { question: 'Which file?' } }]);
  llm.push({ text: 'Nothing to approve.' });
  const quiet = `${tag}-quiet`;
  assert.equal((await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: quiet, input: 'hi' })).status, 201);
  await waitFor(worker, quiet, (x) => x.status === 'completed');
  await replicated(worker, quiet);

  const all = mine(await inbox(worker));
  assert.deepEqual(all.map((i) => i.sessionId), [`${tag}-b`, `${tag}-a`], 'newest first, the quiet session absent');
  const [client, approval] = all;
  assert.deepEqual(approval, {
    sessionId: `${tag}-a`,
    agent: 'assistant',
    toolCallId: a.pendingToolCalls[0].toolCallId,
    toolName: 'delete_file',
    arguments: { path: '/tmp/a' },
    kind: 'approval',
    waitingSince: approval.waitingSince,
  });
  assert.ok(Math.abs(approval.waitingSince - Date.now()) < 60_000, `${approval.waitingSince}`);
  assert.equal(client.kind, 'client');
  assert.equal(client.toolCallId, b.pendingToolCalls[0].toolCallId);
  assert.equal(client.deadline, b.pendingToolCalls[0].deadline, 'a client call carries its deadline');
  assert.ok(client.waitingSince >= approval.waitingSince);

  // Filters and pages.
  assert.deepEqual(mine(await inbox(worker, '?kind=approval')).map((i) => i.sessionId), [`${tag}-a`]);
  assert.deepEqual(mine(await inbox(worker, '?tool=ask_user')).map((i) => i.sessionId), [`${tag}-b`]);
  assert.deepEqual(mine(await inbox(worker, '?agent=researcher')), []);
  const first = await inbox(worker, '?limit=1');
  assert.equal(first.items.length, 1);
  assert.equal(typeof first.nextCursor, 'string');
  const rest = await inbox(worker, `?limit=100&cursor=${encodeURIComponent(first.nextCursor)}`);
  assert.ok(!rest.items.some((i) => i.toolCallId === first.items[0].toolCallId && i.sessionId === first.items[0].sessionId), 'no call twice');

  // Refusals: bad filters are 400, a session token is 403, no credential is 401.
  for (const bad of ['?kind=child', '?limit=0', '?cursor=nope', '?status=active']) {
    const res = await api(worker, 'GET', `/v1/inbox${bad}`);
    assert.deepEqual([res.status, res.body.error.code], [400, 'validation_error'], bad);
  }
  assert.equal(typeof a.sessionToken, 'string');
  assert.equal((await api(worker, 'GET', '/v1/inbox', undefined, a.sessionToken)).status, 403);
  assert.equal((await api(worker, 'GET', '/v1/inbox', undefined, null)).status, 401);

  // Answered through the session: the call leaves the inbox once D1 has the commit.
  const answered = await api(worker, 'POST', `/v1/sessions/${tag}-a/tool-results`,
    { kind: 'approval-response', toolCallId: approval.toolCallId, approved: false, reason: 'no' });
  assert.equal(answered.status, 202);
  llm.push({ text: 'Left it.' });
  await waitFor(worker, `${tag}-a`, (x) => x.status === 'completed');
  await replicated(worker, `${tag}-a`);
  assert.deepEqual(mine(await inbox(worker)).map((i) => i.sessionId), [`${tag}-b`]);

  // After a restart the inbox is the same, and its call is answered from there.
  const persistDir = worker.persistDir;
  running.splice(running.indexOf(started), 1);
  await worker.stop();
  await llm.close();
  const again = await startWithMock({}, persistDir);
  running.push(again);
  const [waiting] = mine(await inbox(again.worker));
  assert.deepEqual(waiting, client);
  again.llm.push({ text: 'Thanks.' });
  const res = await api(again.worker, 'POST', `/v1/sessions/${waiting.sessionId}/tool-results`,
    { kind: 'client-tool-result', toolCallId: waiting.toolCallId, result: { answer: 'a.txt' } });
  assert.equal(res.status, 202);
  await waitFor(again.worker, waiting.sessionId, (x) => x.status === 'completed');
  await replicated(again.worker, waiting.sessionId);
  assert.deepEqual(mine(await inbox(again.worker)), []);
});

test('usage sums the runs\' tokens per agent, day, session and model, from D1', async () => {
  const started = await startWithMock();
  running.push(started);
  const { worker, llm } = started;
  const t0 = Date.now();
  const tag = `usage-${process.pid}`;
  // The mock answers every call with 11 prompt and 7 completion tokens; the second
  // session's model says it is another.
  llm.push({ calls: [{ name: 'add_note', args: { text: 'n' } }] }, { text: 'Noted.' }, { text: 'Hi.', model: 'mock-large' });
  const ids = [`${tag}-two-steps`, `${tag}-one-step`];
  for (const id of ids) {
    const created = await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input: 'go' });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    await waitFor(worker, id, (x) => x.status === 'completed');
    await replicated(worker, id);
  }
  const usage = async (query = '', token) => {
    const res = await api(worker, 'GET', `/v1/usage${query}`, undefined, token);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return res.body;
  };
  const window = `from=${t0}&to=${Date.now() + 1}`;
  const byAgent = await usage(`?${window}`);
  assert.equal(byAgent.groupBy, 'agent');
  assert.deepEqual(byAgent.groups, [{ key: 'assistant', runs: 2, inputTokens: 33, outputTokens: 21, cacheReadTokens: 0, cacheWriteTokens: 0 }]);
  assert.deepEqual({ ...byAgent.total, key: 'assistant' }, byAgent.groups[0]);
  const bySession = await usage(`?${window}&groupBy=session`);
  assert.deepEqual(bySession.groups.map((g) => [g.key, g.runs, g.inputTokens]), [[ids[1], 1, 11], [ids[0], 1, 22]]);
  const byDay = await usage(`?${window}&groupBy=day`);
  const days = [new Date(t0), new Date()].map((d) => d.toISOString().slice(0, 10));
  assert.ok(byDay.groups.every((g) => days.includes(g.key)), JSON.stringify(byDay.groups));
  assert.equal(byDay.total.runs, 2);
  const byModel = await usage(`?${window}&groupBy=model`);
  assert.deepEqual(byModel.groups.map((g) => [g.key, g.runs, g.inputTokens, g.outputTokens]),
    [['mock', 1, 22, 14], ['mock-large', 1, 11, 7]], 'the model that answered, as it said');
  assert.deepEqual((await usage(`?from=${Date.now() + 60_000}`)).groups, [], 'a later window is empty');
  assert.deepEqual((await usage(`?${window}&agent=researcher`)).groups, []);
  for (const bad of ['?groupBy=models', '?from=soon', '?limit=3']) {
    const res = await api(worker, 'GET', `/v1/usage${bad}`);
    assert.deepEqual([res.status, res.body.error.code], [400, 'validation_error'], bad);
  }
  llm.push({ text: 'Hi.' });
  const token = (await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: `${tag}-t`, input: 'go' })).body.sessionToken;
  assert.equal((await api(worker, 'GET', '/v1/usage', undefined, token)).status, 403, 'not a session token\'s');
});
