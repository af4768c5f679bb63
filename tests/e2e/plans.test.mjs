// State as the workflow's memory against the real worker (wrangler dev, local D1 and
// Durable Objects), with the reference `orders` agent and a mock model: one step lays
// out fetch → check → store as a plan, results stored with `_outputPath` and passed on
// by state references. The check needs an approval: the fetch runs, the plan suspends,
// the worker is restarted, the approval arrives and the rest runs once each; the
// stream's patches replay to the final state. A denial fails only the calls that
// depend on the check. Conditional steps (`_when`) are skipped or taken on the state the
// plan left; a plan is checked (`POST …/plans/validate`) without running anything; an
// instanced call (`_forEach`) waits on one instance across a SIGKILL and runs each once.

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

/** The plan with conditional steps: the check only for an order over 100 (it then needs
 * an approval), the store only once a check passed. */
const conditional = (id) => ({
  calls: [
    { name: 'fetch_order', args: { id, _outputPath: '/order' } },
    { name: 'check_order', args: { orderId: '†state.order.id', total: '$state.order.total', _outputPath: '/check', _when: '†state.order.total > 100' } },
    {
      name: 'store_order',
      args: { orderId: '$state.order.id', total: '$state.order.total', checkedId: '†state.check.orderId', passed: '†state.check.ok', _outputPath: '/archive/-', _when: '†state.check.ok == true' },
    },
  ],
});

test('a conditional step is skipped or taken on the state its plan left', async () => {
  // Order 1001 (42.5): the check is skipped without asking anyone, so is the store.
  const small = newId('when-small');
  llm.push(conditional('1001'), { text: 'Nothing to archive.' });
  await create(small, 'process order 1001');
  const skipped = await waitFor(worker, small, (s) => s.status !== 'active');
  assert.equal(skipped.status, 'completed');
  assert.deepEqual(skipped.state, { ...INITIAL, order: { id: '1001', customer: 'Ada', total: 42.5 } });
  const sse = await stream(small);
  const events = await sse.until((e) => e.type === 'end');
  const ended = events.filter((e) => e.type === 'tool_end').map((e) => [e.json.toolName, e.json.success, e.json.result?.skipped]);
  assert.deepEqual(ended, [
    ['fetch_order', true, undefined],
    ['check_order', true, "skipped: its condition _when '†state.order.total > 100' does not hold"],
    ['store_order', true, "skipped: its condition _when '†state.check.ok == true' does not hold"],
  ]);
  assert.ok(!events.some((e) => e.type === 'tool_approval_request'), 'no approval was asked');

  // Order 1002 (250): the check is taken and waits for its approval; the store then runs.
  const big = newId('when-big');
  llm.push(conditional('1002'), { text: 'Archived.' });
  await create(big, 'process order 1002');
  const waiting = await waitFor(worker, big, (s) => s.pendingToolCalls.length === 1);
  assert.equal(waiting.pendingToolCalls[0].toolName, 'check_order');
  assert.equal((await answer(big, waiting.pendingToolCalls[0].toolCallId, true)).status, 202);
  const done = await waitFor(worker, big, (s) => s.status !== 'active');
  assert.deepEqual(done.state.archive, [{ orderId: '1002', total: 250 }]);
});

test('validate reports a cycle, a bad reference and an unknown tool without running anything', async () => {
  const id = newId('validate');
  llm.push({ text: 'Ready.' });
  await create(id, 'hello');
  const before = await waitFor(worker, id, (s) => s.status !== 'active');
  const messagesBefore = (await api(worker, 'GET', `/v1/sessions/${id}/messages`)).body.messages.length;
  const seenBefore = llm.requests.length;

  const res = await api(worker, 'POST', `/v1/sessions/${id}/plans/validate`, {
    calls: [
      { id: 'a', name: 'fetch_order', arguments: { id: '$state.check.orderId', _outputPath: '/order' } },
      { id: 'b', name: 'check_order', arguments: { orderId: '$state.order.id', total: 1, _outputPath: '/check' } },
      { id: 'c', name: 'store_order', arguments: { orderId: '$state..id', total: 1, checkedId: 'x', passed: true } },
      { id: 'd', name: 'ship_order', arguments: {} },
    ],
  });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.equal(res.body.valid, false);
  const codes = res.body.problems.map((p) => [p.code, p.calls]);
  assert.deepEqual(codes.sort(), [
    ['cycle', ['a', 'b']],
    ['reference_malformed', ['c']],
    ['unknown_tool', ['d']],
  ]);
  assert.deepEqual(res.body.rounds, []);

  const valid = await api(worker, 'POST', `/v1/sessions/${id}/plans/validate`, { calls: conditional('1002').calls.map((c) => ({ name: c.name, arguments: c.args })) });
  assert.deepEqual([valid.status, valid.body.valid, valid.body.rounds], [200, true, [['c1'], ['c2'], ['c3']]]);

  // Nothing ran, nothing changed, the model was not asked.
  const after = await api(worker, 'GET', `/v1/sessions/${id}`);
  assert.deepEqual(after.body.state, before.state);
  assert.equal((await api(worker, 'GET', `/v1/sessions/${id}/messages`)).body.messages.length, messagesBefore);
  assert.equal(llm.requests.length, seenBefore);

  // A body that is not a plan, and a session that does not exist.
  const empty = await api(worker, 'POST', `/v1/sessions/${id}/plans/validate`, { calls: [] });
  assert.deepEqual([empty.status, empty.body.error.code], [400, 'validation_error']);
  const nobody = await api(worker, 'POST', '/v1/sessions/no-such-session/plans/validate', { calls: [{ name: 'fetch_order' }] });
  assert.equal(nobody.status, 404);
});

test('an instanced check over three orders waits on the second, survives a SIGKILL, and each instance runs once', async () => {
  const id = newId('each');
  llm.push({
    calls: [
      { name: 'fetch_order', args: { id: '†item', _forEach: ['1001', '1002', '1001'], _outputPath: '/batch' } },
      { name: 'check_order', args: { orderId: '†item.id', total: '†item.total', _forEach: '†state.batch', _outputPath: '/checks' } },
    ],
  });
  await create(id, 'check three orders');
  const waiting = await waitFor(worker, id, (s) => s.pendingToolCalls.length === 1);
  const [pending] = waiting.pendingToolCalls;
  assert.equal(pending.toolName, 'check_order');
  assert.match(pending.toolCallId, /#1$/, 'the second instance waits');
  assert.deepEqual(pending.arguments, { orderId: '1002', total: 250 }, 'on its own arguments');
  assert.deepEqual(waiting.state.batch.map((o) => o.id), ['1001', '1002', '1001']);
  assert.equal(waiting.state.checks, undefined, 'nothing gathered yet');

  // The worker is killed while the instance waits: nothing is flushed.
  const persistDir = worker.persistDir;
  await worker.kill();
  await llm.close();
  await start(persistDir);
  llm.push({ text: 'All three are checked.' });

  assert.equal((await answer(id, pending.toolCallId, true)).status, 202);
  const done = await waitFor(worker, id, (s) => s.status !== 'active', 30_000);
  assert.equal(done.status, 'completed');
  assert.deepEqual(done.state.checks, [
    { orderId: '1001', ok: true },
    { orderId: '1002', ok: true },
    { orderId: '1001', ok: true },
  ], 'gathered in item order');

  const sse = await stream(id);
  const events = await sse.until((e) => e.type === 'end');
  const checks = events.filter((e) => e.type === 'tool_end' && e.json.toolName === 'check_order').map((e) => e.json.toolCallId);
  const base = pending.toolCallId.replace(/#1$/, '');
  assert.deepEqual(checks.filter((c) => c.includes('#')).sort(), [`${base}#0`, `${base}#1`, `${base}#2`], 'each instance ran once');
  assert.ok(checks.includes(base), 'and the call itself ended, gathered');

  // The model read one result per call it made.
  const sent = llm.requests.at(-1).body.messages.filter((m) => m.role === 'tool');
  assert.equal(sent.length, 2);
  assert.deepEqual(JSON.parse(sent[1].content).result.map((c) => c.orderId), ['1001', '1002', '1001']);
});

test('a saved plan re-runs by name with a new input, waits at its approval and finishes once each', async () => {
  const id = newId('saved');
  llm.push({ calls: [{ name: 'run_plan', args: { name: 'process-order', inputs: { orderId: '1002' } } }] });
  llm.push({ text: 'Order 1002 is archived.' });
  await create(id, 'process order 1002 with the saved plan');
  const waiting = await waitFor(worker, id, (s) => s.pendingToolCalls.length === 1);
  const [check] = waiting.pendingToolCalls;
  assert.equal(check.toolName, 'check_order');
  assert.match(check.toolCallId, /_check$/, 'a call of the plan, named by its step');
  assert.deepEqual(check.arguments, { orderId: '1002', total: 250 }, 'the input put in, the state read');

  assert.equal((await answer(id, check.toolCallId, true)).status, 202);
  const done = await waitFor(worker, id, (s) => s.status !== 'active', 30_000);
  assert.equal(done.status, 'completed');
  assert.deepEqual(done.state.archive, [{ orderId: '1002', total: 250 }]);

  const sse = await stream(id);
  const events = await sse.until((e) => e.type === 'end');
  const ran = events.filter((e) => e.type === 'tool_end').map((e) => [e.json.toolName, e.json.success]);
  assert.deepEqual(ran, [['run_plan', true], ['fetch_order', true], ['check_order', true], ['store_order', true]], 'each once');
  const [planned] = llm.requests.at(-1).body.messages.filter((m) => m.role === 'tool').map((m) => JSON.parse(m.content));
  const base = check.toolCallId.replace(/_check$/, '');
  assert.deepEqual(planned, { plan: 'process-order', calls: [`${base}_fetch`, `${base}_check`, `${base}_store`] });
});
