// State as the workflow's memory against the real worker (wrangler dev, local D1 and
// Durable Objects), with the reference `orders` agent and a mock model: one step lays
// out fetch → check → store as a plan, results stored with `_outputPath` and passed on
// by state references. The check needs an approval: the fetch runs, the plan suspends,
// the worker is restarted, the approval arrives and the rest runs once each; the
// stream's patches replay to the final state. A denial fails only the calls that
// depend on the check.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { api, gapFree, replayPatches, startWithMock, waitFor } from './client.mjs';
import { openStream } from './sse.mjs';

let worker;
let llm;
const start = async (persistDir) => { ({ worker, llm } = await startWithMock({ SSE_PING_MS: '300' }, persistDir)); };
before(async () => { await start(); });
after(async () => { await worker?.stop(); await llm?.close(); worker?.cleanup(); });

let n = 0;
const newId = (name) => `${name}-${process.pid}-${++n}`;
const INITIAL = { archive: [] };

/** The plan the model lays out for order `id`, in one step. */
const plan = (id) => ({
  calls: [
    { name: 'fetch_order', args: { id, _outputPath: '/order' } },
    { name: 'check_order', args: { orderId: '†state.order.id', total: '$state.order.total', _outputPath: '/check' } },
    {
      name: 'store_order',
      args: { orderId: '$state.order.id', total: '$state.order.total', checkedId: '†state.check.orderId', passed: '†state.check.ok', _outputPath: '/archive/-' },
    },
  ],
});

async function create(id, input) {
  const res = await api(worker, 'POST', '/v1/sessions', { agent: 'orders', sessionId: id, input });
  assert.equal(res.status, 201, JSON.stringify(res.body));
}

const stream = (id) => openStream(`${worker.baseUrl}/v1/sessions/${id}/stream`, {
  headers: { authorization: 'Bearer e2e-api-token' },
});

const answer = (id, toolCallId, approved) => api(worker, 'POST', `/v1/sessions/${id}/tool-results`,
  { kind: 'approval-response', toolCallId, approved });

test('a plan suspends at its approval, survives a restart and runs the rest once each', async () => {
  const id = newId('plan');
  llm.push(plan('1002'));
  await create(id, 'process order 1002');
  const waiting = await waitFor(worker, id, (s) => s.pendingToolCalls.length === 1);
  const [check] = waiting.pendingToolCalls;
  assert.equal(check.toolName, 'check_order');
  assert.deepEqual(check.arguments, { orderId: '1002', total: 250 }, 'approved on its resolved input');
  assert.deepEqual(waiting.state, { ...INITIAL, order: { id: '1002', customer: 'Grace', total: 250 } });

  // The first process goes away with the plan half done.
  const persistDir = worker.persistDir;
  await worker.stop();
  await llm.close();
  await start(persistDir);
  llm.push({ text: 'Order 1002 is archived.' });

  const ok = await answer(id, check.toolCallId, true);
  assert.deepEqual([ok.status, ok.body], [202, { accepted: true }]);
  const done = await waitFor(worker, id, (s) => s.status !== 'active', 30_000);
  assert.equal(done.status, 'completed');
  assert.deepEqual(done.state, {
    order: { id: '1002', customer: 'Grace', total: 250 },
    check: { orderId: '1002', ok: true },
    archive: [{ orderId: '1002', total: 250 }],
  });

  const sse = await stream(id);
  const events = await sse.until((e) => e.type === 'end');
  assert.ok(gapFree(events), 'the replayed stream is gap-free across the restart');
  const ran = events.filter((e) => e.type === 'tool_end').map((e) => [e.json.toolName, e.json.success]);
  assert.deepEqual(ran, [['fetch_order', true], ['check_order', true], ['store_order', true]], 'once each, in order');
  const stored = events.find((e) => e.type === 'tool_end' && e.json.toolName === 'store_order');
  assert.deepEqual(stored.json.result, { result: { orderId: '1002', total: 250 }, storedAt: '/archive/-' });
  assert.deepEqual(replayPatches(INITIAL, events), done.state, 'the patches replay to the final state');

  // The model saw every result of its step, stored where it asked.
  const msgs = await api(worker, 'GET', `/v1/sessions/${id}/messages`);
  const tools = msgs.body.messages.filter((m) => m.role === 'tool');
  assert.deepEqual(tools.map((m) => m.content.storedAt), ['/order', '/check', '/archive/-']);
});

test('a denied check fails the store that depends on it and keeps the fetch', async () => {
  const id = newId('deny');
  llm.push(plan('1002'), { text: 'Not archived.' });
  await create(id, 'process order 1002');
  const waiting = await waitFor(worker, id, (s) => s.pendingToolCalls.length === 1);
  const denied = await answer(id, waiting.pendingToolCalls[0].toolCallId, false);
  assert.equal(denied.status, 202);
  const done = await waitFor(worker, id, (s) => s.status !== 'active');
  assert.equal(done.status, 'completed');
  assert.deepEqual(done.state, { ...INITIAL, order: { id: '1002', customer: 'Grace', total: 250 } });

  const msgs = await api(worker, 'GET', `/v1/sessions/${id}/messages`);
  const byTool = Object.fromEntries(msgs.body.messages.filter((m) => m.role === 'tool').map((m) => [m.toolName, m]));
  assert.equal(byTool.fetch_order.isError, false);
  assert.equal(byTool.check_order.content.code, 'tool_denied');
  assert.equal(byTool.store_order.content.code, 'tool_dependency_failed');
  assert.match(byTool.store_order.content.error, /check_order/);
});

test('an invalid plan runs nothing and the model is told every problem', async () => {
  const id = newId('invalid');
  llm.push({
    calls: [
      { name: 'fetch_order', args: { id: '$state.check.orderId', _outputPath: '/order' } },
      { name: 'check_order', args: { orderId: '$state.order.id', total: 1, _outputPath: '/check' } },
      { name: 'store_order', args: { orderId: '$state.orders', total: 1, checkedId: '$state.check.orderId', passed: true, _outputPath: '/archive/-' } },
    ],
  }, { text: 'I will fix the plan.' });
  await create(id, 'go');
  const done = await waitFor(worker, id, (s) => s.status !== 'active');
  assert.equal(done.status, 'completed');
  assert.deepEqual(done.state, INITIAL, 'nothing ran');
  const msgs = await api(worker, 'GET', `/v1/sessions/${id}/messages`);
  const errors = msgs.body.messages.filter((m) => m.role === 'tool').map((m) => m.content);
  assert.equal(errors.length, 3);
  for (const e of errors) {
    assert.equal(e.code, 'tool_plan_invalid');
    assert.match(e.error, /depend on each other in a cycle/);
    assert.match(e.error, /\(store_order\) reads \/orders, which the state schema does not have/);
  }
});
