// The minimal example worker (examples/minimal-worker), as its `wrangler deploy --dry-run`
// builds it (scripts/artifacts.sh), run in wrangler dev: a create, the approval request on the stream, the approval, the
// tool calling "the shop's API" once with the worker's secret, and `end`; the routes of
// the features it leaves out answer 404 naming them.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { API_TOKEN, api, gapFree } from './client.mjs';
import { EXAMPLE, startWorker } from './harness.mjs';
import { startMockLlm } from './mock-llm.mjs';
import { openStream } from './sse.mjs';

let worker;
let llm;
before(async () => {
  llm = await startMockLlm();
  worker = await startWorker({
    dir: EXAMPLE,
    vars: {
      API_TOKEN,
      LLM_PROVIDER: 'openai',
      LLM_BASE_URL: llm.url,
      LLM_API_KEY: 'test-key',
      ORDERS_API_URL: llm.apiUrl,
      ORDERS_API_KEY: 'orders-secret',
    },
  });
});
after(async () => { await worker?.stop(); await llm?.close(); worker?.cleanup(); });

test('the example worker: create, approval on the stream, approve, the tool runs once, end', async () => {
  const agents = await api(worker, 'GET', '/v1/agents');
  assert.deepEqual(agents.body.agents.map((a) => a.name), ['support']);
  assert.deepEqual(agents.body.agents[0].tools.map((t) => [t.name, t.approval]), [['cancel_order', 'always']]);

  llm.push({ calls: [{ name: 'cancel_order', args: { order_id: 'A-1042' } }] }, { text: 'Cancelled A-1042.' });
  const id = `example-${process.pid}`;
  const created = await api(worker, 'POST', '/v1/sessions', { agent: 'support', sessionId: id, input: 'Please cancel order A-1042.' });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const sse = await openStream(`${worker.baseUrl}${created.body.streamUrl}`);
  const [request] = (await sse.until((e) => e.type === 'tool_approval_request'))
    .filter((e) => e.type === 'tool_approval_request');
  assert.deepEqual(request.json.arguments, { order_id: 'A-1042' });
  assert.equal(llm.orders.length, 0, 'nothing runs before the approval');

  const ok = await api(worker, 'POST', `/v1/sessions/${id}/tool-results`,
    { kind: 'approval-response', toolCallId: request.json.toolCallId, approved: true }, created.body.sessionToken);
  assert.equal(ok.status, 202);
  const events = await sse.until((e) => e.type === 'end');
  assert.ok(gapFree(events));
  const end = events.find((e) => e.type === 'tool_end');
  assert.deepEqual(end.json.result, { cancelled: 'A-1042' });
  assert.equal(llm.orders.length, 1, 'the approved call ran once');
  assert.equal(llm.orders[0].authorization, 'Bearer orders-secret', 'the tool captured the secret');
  const session = await api(worker, 'GET', `/v1/sessions/${id}`);
  assert.equal(session.body.status, 'completed');

  // Built without `time-travel`: its runs, checkpoints, retries and forks are not served,
  // and nothing of the session changes.
  for (const [method, path] of [['GET', 'runs'], ['GET', 'checkpoints'], ['GET', 'checkpoints/ckpt_1'], ['POST', 'retry'], ['POST', 'fork']]) {
    const r = await api(worker, method, `/v1/sessions/${id}/${path}`, method === 'POST' ? {} : undefined);
    assert.equal(r.status, 404, `${method} ${path}`);
    assert.equal(r.body.error.code, 'not_found');
    assert.match(r.body.error.message, /`time-travel` feature/);
  }
  const after = await api(worker, 'GET', `/v1/sessions/${id}`);
  assert.deepEqual(after.body, session.body);
});

test('the example worker is built without the OpenAPI and chat routes: 404, saying which feature serves them', async () => {
  const doc = await api(worker, 'GET', '/v1/openapi.json');
  assert.equal(doc.status, 404);
  assert.equal(doc.body.error.code, 'not_found');
  assert.match(doc.body.error.message, /`openapi` feature/);
  const chat = await api(worker, 'POST', '/v1/chat', { id: 'c', messages: [{ role: 'user', parts: [{ type: 'text', text: 'hi' }] }] });
  assert.equal(chat.status, 404);
  assert.match(chat.body.error.message, /`chat` feature/);
  const resume = await api(worker, 'GET', '/v1/chat/c/stream');
  assert.equal(resume.status, 404);
});

test('the example worker is built without per-request options: a create that gives them is refused, naming the feature', async () => {
  const id = `example-options-${process.pid}`;
  const r = await api(worker, 'POST', '/v1/sessions',
    { agent: 'support', sessionId: id, input: 'hi', providerOptions: { reasoningEffort: 'low' } });
  assert.equal(r.status, 400, JSON.stringify(r.body));
  assert.equal(r.body.error.code, 'validation_error');
  assert.match(r.body.error.message, /`provider-options` feature/);
  assert.equal((await api(worker, 'GET', `/v1/sessions/${id}`)).status, 404, 'nothing was created');
  // The name in a message's text is only text.
  const said = await api(worker, 'POST', '/v1/sessions',
    { agent: 'support', sessionId: id, input: { message: 'what are providerOptions?' } });
  assert.equal(said.status, 201, JSON.stringify(said.body));
});
