// @helix-edge/client (clients/js) against the real worker: the approval flow, a client
// tool answered through the client, reconnects forced at random points of a running
// stream, and the state mirror, each checked against what the server itself says.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { HelixClient, HttpError } from '@helix-edge/client';
import { API_TOKEN, api, waitFor } from './client.mjs';
import { startWorker } from './harness.mjs';
import { openStream } from './sse.mjs';

let worker;
before(async () => {
  worker = await startWorker();
});
after(async () => { await worker?.stop(); worker?.cleanup(); });

const client = () => new HelixClient({ baseUrl: worker.baseUrl, token: API_TOKEN });

/** The session's whole stream as the server sends it, read raw. */
async function serverStream(id) {
  const s = await openStream(`${worker.baseUrl}/v1/sessions/${id}/stream`, { headers: { authorization: `Bearer ${API_TOKEN}` } });
  await s.closed;
  return s.events.map((e) => ({ seq: e.id, type: e.type, data: e.json }));
}

/** An event as the client yields it, in the raw stream's terms. */
function asServer(e) {
  const { seq, ...rest } = e;
  if (e.type === 'end' || e.type === 'fail' || e.type === 'truncated') {
    const { type, ...data } = rest;
    return { seq, type, data };
  }
  return { seq, type: e.type, data: rest };
}

test('the approval flow: stream, approve from the client, the run completes', async () => {
  const c = client();
  assert.ok((await c.agents()).some((a) => a.name === 'assistant'));
  const session = await c.createSession({ agent: 'assistant', input: 'note buy milk; delete /tmp/x' });
  assert.match(session.token, /\S/);
  const seen = [];
  for await (const e of session.events()) {
    seen.push(e);
    if (e.type === 'tool_approval_request') await session.approve(e.toolCallId, 'fine by me');
  }
  assert.equal(seen.at(-1).type, 'end');
  assert.ok(seen.some((e) => e.type === 'tool_end' && e.toolName === 'delete_file' && e.success));
  assert.deepEqual(seen.map(asServer), await serverStream(session.id));
  const s = await session.get();
  assert.equal(s.status, 'completed');
  const messages = [];
  for await (const m of session.messages({ limit: 2 })) messages.push(m);
  assert.equal(messages.length, (await session.messagePage(0, 500)).total);
  assert.equal((await session.runs()).length, 1);
  assert.ok((await session.checkpoints()).length >= 2);
  // A second answer to the same call is refused, typed.
  const approval = seen.find((e) => e.type === 'tool_approval_request');
  await assert.rejects(session.approve(approval.toolCallId), (e) => e instanceof HttpError && e.code === 'tool_call_already_resolved' && e.status === 409);
});

test('one request fewer: start, an answer and a follow-up each stream their run; together exactly the server stream', async () => {
  const c = client();
  const { session, created, events } = await c.start({ agent: 'assistant', input: 'note buy milk; delete /tmp/x' });
  assert.match(created.sessionId, /\S/);
  assert.match(created.runId, /\S/);
  assert.match(session.token, /\S/);
  const seen = [];
  let approval;
  for await (const e of events) {
    seen.push(e);
    if (e.type === 'tool_approval_request') approval = e;
    if (e.type === 'run_suspended') break;
  }
  assert.equal(seen[0].type, 'run_started');
  assert.equal(seen[0].runId, created.runId);
  for await (const e of await session.answerStreaming({ kind: 'approval-response', toolCallId: approval.toolCallId, approved: true })) seen.push(e);
  assert.equal(seen.at(-1).type, 'end');
  const { runId, events: more } = await session.sendStreaming('note eggs');
  for await (const e of more) seen.push(e);
  assert.equal(seen.at(-1).type, 'end');
  assert.ok(seen.some((e) => e.type === 'run_started' && e.runId === runId && runId !== created.runId));
  assert.deepEqual(seen.map(asServer), await serverStream(session.id));
  assert.equal((await session.get()).status, 'completed');
  // A refusal is thrown, typed, as for the JSON answers.
  await assert.rejects(session.answerStreaming({ kind: 'approval-response', toolCallId: approval.toolCallId, approved: true }),
    (e) => e instanceof HttpError && e.code === 'tool_call_already_resolved');
});

test('a client tool answered through the client; a denial; the session token alone suffices', async () => {
  const c = client();
  const created = await c.createSession({ agent: 'assistant', input: 'ask me something' });
  // A browser holding only the session token.
  const session = new HelixClient({ baseUrl: worker.baseUrl, token: created.token }).session(created.id);
  for await (const e of session.events()) {
    if (e.type === 'tool_start' && e.executor === 'client') await session.submitResult(e.toolCallId, 'blue');
  }
  const messages = (await session.messagePage()).messages;
  assert.ok(messages.some((m) => m.role === 'tool' && JSON.stringify(m.content).includes('blue')));
  await assert.rejects(c.session(created.id, { token: 'not-a-token' }).get(), (e) => e instanceof HttpError && e.status === 401);

  const denied = await c.createSession({ agent: 'assistant', input: 'delete /tmp/y' });
  for await (const e of denied.events()) {
    if (e.type === 'tool_approval_request') await denied.deny(e.toolCallId, 'not today');
  }
  const last = (await denied.messagePage(0, 500)).messages.filter((m) => m.role === 'tool').at(-1);
  assert.equal(last.content.code, 'tool_denied');
  assert.equal(last.content.error, 'Tool call was not approved by the user');
  assert.equal(last.content.reason, 'not today');
});

test('reconnects forced at random points of a running stream: exactly the server stream', async () => {
  let cuts = 0;
  // A fetch whose event streams break after a random number of bytes.
  const flaky = async (url, init) => {
    const res = await fetch(url, init);
    if (!String(url).includes('/stream') || !res.body) return res;
    let budget = 1 + Math.floor(Math.random() * 600);
    const reader = res.body.getReader();
    const body = new ReadableStream({
      async pull(controller) {
        const { value, done } = await reader.read();
        if (done) return controller.close();
        if (value.length >= budget) {
          controller.enqueue(value.slice(0, budget));
          cuts++;
          reader.cancel().catch(() => {});
          return controller.error(new TypeError('connection reset (test)'));
        }
        budget -= value.length;
        controller.enqueue(value);
      },
      cancel() { return reader.cancel(); },
    });
    return new Response(body, { status: res.status, headers: res.headers });
  };
  const c = new HelixClient({ baseUrl: worker.baseUrl, token: API_TOKEN, fetch: flaky });
  for (let trial = 0; trial < 3; trial++) {
    const session = await c.createSession({ agent: 'assistant', input: 'note a; note b; note c; email a@x,b@x,c@x,d@x about lunch' });
    const seen = [];
    const states = [];
    for await (const e of session.events({ initialDelayMs: 5, maxDelayMs: 50, onConnection: (s) => states.push(s.status) })) {
      seen.push(e);
      if (e.type === 'tool_approval_request') await session.approve(e.toolCallId);
    }
    const server = await serverStream(session.id);
    assert.deepEqual(seen.map(asServer), server, `trial ${trial}`);
    assert.deepEqual(seen.map((e) => e.seq), server.map((_, i) => i + 1));
    assert.ok(states.includes('reconnecting'));
  }
  assert.ok(cuts >= 3, `streams were cut (${cuts})`);
});

test('a run\'s model options go through the client on a create and a follow-up, checked by the server', async () => {
  const c = client();
  const refused = await c.createSession({ agent: 'assistant', input: 'hi', providerOptions: { toolChoice: { tool: 'no_such_tool' } } })
    .then(() => null, (e) => e);
  assert.ok(refused instanceof HttpError, String(refused));
  assert.equal(refused.status, 400);
  assert.match(refused.message, /no_such_tool/);
  const session = await c.createSession({ agent: 'assistant', input: 'note buy milk; delete /tmp/x', providerOptions: { reasoningEffort: 'low' } });
  const waiting = await waitFor(worker, session.id, (s) => s.pendingToolCalls.length === 1, 20_000);
  await session.approve(waiting.pendingToolCalls[0].toolCallId);
  await waitFor(worker, session.id, (s) => s.status === 'completed', 20_000);
  const badFollow = await session.send('note eggs', { providerOptions: { thinkingBudget: 10 } }).then(() => null, (e) => e);
  assert.equal(badFollow?.status, 400);
  assert.match(badFollow.message, /at least 1024/);
  const { runId } = await session.send('note eggs', { providerOptions: { toolChoice: 'auto' } });
  assert.match(runId, /./);
  await waitFor(worker, session.id, (s) => s.status === 'completed' && s.state.notes.length === 2, 20_000);
  assert.equal((await session.get()).state.notes.length, 2);
});

test('the state mirror ends equal to GET, with the pending calls seen on the way', async () => {
  const c = client();
  const session = await c.createSession({ agent: 'assistant', input: 'note buy milk; note call mom; delete /tmp/x' });
  const mirror = await session.mirror();
  const pending = await new Promise((resolve) => {
    const stop = mirror.subscribe((m) => {
      if (m.pendingToolCalls.length > 0) { stop(); resolve(m.pendingToolCalls); }
    });
    if (mirror.pendingToolCalls.length > 0) resolve(mirror.pendingToolCalls);
  });
  assert.equal(pending[0].toolName, 'delete_file');
  assert.deepEqual(pending, (await session.get()).pendingToolCalls);
  await session.approve(pending[0].toolCallId);
  await mirror.settled();
  const server = await session.get();
  assert.equal(mirror.status, 'completed');
  assert.deepEqual(mirror.state, server.state);
  assert.deepEqual(mirror.state.notes.map((n) => n.text), ['buy milk', 'call mom']);
  assert.deepEqual(mirror.pendingToolCalls, []);
  assert.equal(mirror.sequence, server.streamSequence);
  assert.equal(mirror.resyncs, 0);
  // A follow-up run: the mirror follows it too.
  await session.send('note eggs');
  await mirror.settled();
  assert.deepEqual(mirror.state, (await session.get()).state);
  assert.equal(mirror.state.notes.length, 3);
  mirror.close();
  const raw = await api(worker, 'GET', `/v1/sessions/${session.id}`);
  assert.equal(raw.body.streamSequence, mirror.sequence);
});

test('a plan checked through the client, nothing run', async () => {
  const c = client();
  const session = await c.createSession({ agent: 'orders', input: 'process order 1001' });
  const done = await waitFor(worker, session.id, (s) => s.status !== 'active');
  const report = await session.validatePlan([
    { id: 'fetch', name: 'fetch_order', arguments: { id: '1002', _outputPath: '/order' } },
    { id: 'check', name: 'check_order', arguments: { orderId: '†state.order.id', total: '$state.order.total', _when: '†state.order.total > 100' } },
    { id: 'ship', name: 'ship_order' },
  ]);
  assert.equal(report.valid, false);
  assert.deepEqual(report.problems.map((p) => [p.code, p.calls]), [['unknown_tool', ['ship']]]);
  assert.deepEqual(report.rounds, [['fetch', 'ship'], ['check']]);
  assert.deepEqual((await session.get()).state, done.state, 'nothing ran');
  await assert.rejects(session.validatePlan([]), (e) => e instanceof HttpError && e.status === 400 && e.code === 'validation_error');
});
