// A run's model options (`providerOptions`) against the real worker: given on a create,
// they reach the model's request body on each call of that run — also after the worker
// is SIGKILLed while the run waits for an approval and restarted on the same state —
// and not on the next run; a follow-up and a chat turn give their own run's; options
// the agent cannot take are refused with 400 before anything changes.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { API_TOKEN, api, startWithMock, waitFor } from './client.mjs';
import { startWorker } from './harness.mjs';

const CAPABILITIES = 'strict_tools,strict_output,prompt_cache,images,documents,reasoning';

let worker;
let llm;
before(async () => { ({ worker, llm } = await startWithMock()); });
after(async () => { await worker?.stop(); await llm?.close(); worker?.cleanup(); });

const bodies = () => llm.requests.map((r) => r.body);

test('a run\'s providerOptions go with each of its model calls, across a SIGKILL, and end with it', async () => {
  const id = `options-${process.pid}`;
  llm.push({ calls: [{ name: 'delete_file', args: { path: '/tmp/x' } }] }, { text: 'Deleted.' });
  const providerOptions = { reasoningEffort: 'high', toolChoice: 'required', openai: { seed: 7 } };
  const created = await api(worker, 'POST', '/v1/sessions',
    { agent: 'assistant', sessionId: id, input: 'delete /tmp/x', providerOptions });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  await waitFor(worker, id, (s) => s.pendingToolCalls.length === 1, 20_000);

  const persistDir = worker.persistDir;
  await worker.kill();
  worker = await startWorker({
    persistDir,
    migrate: false,
    vars: {
      API_TOKEN, LLM_PROVIDER: 'openai', LLM_BASE_URL: llm.url, LLM_API_KEY: 'test-key',
      LLM_CAPABILITIES: CAPABILITIES, LEDGER_URL: llm.ledgerUrl,
    },
  });
  const waiting = await api(worker, 'GET', `/v1/sessions/${id}`);
  const call = waiting.body.pendingToolCalls[0].toolCallId;
  const ok = await api(worker, 'POST', `/v1/sessions/${id}/tool-results`,
    { kind: 'approval-response', toolCallId: call, approved: true });
  assert.equal(ok.status, 202);
  await waitFor(worker, id, (s) => s.status === 'completed', 20_000);

  const [first, second] = bodies();
  for (const [step, body] of [['before the approval', first], ['after the restart', second]]) {
    assert.equal(body.reasoning_effort, 'high', step);
    assert.equal(body.tool_choice, 'required', step);
    assert.equal(body.seed, 7, step);
  }

  // A follow-up with options of its own, then one without: each run has its own.
  llm.push({ text: 'Again.' }, { text: 'Plain.' });
  const follow = await api(worker, 'POST', `/v1/sessions/${id}/messages`,
    { message: 'and again', providerOptions: { openai: { seed: 9, logprobs: true } } });
  assert.equal(follow.status, 202, JSON.stringify(follow.body));
  await waitFor(worker, id, (s) => s.status === 'completed' && s.stepCount === 3, 20_000);
  const plain = await api(worker, 'POST', `/v1/sessions/${id}/messages`, { message: 'once more' });
  assert.equal(plain.status, 202);
  await waitFor(worker, id, (s) => s.status === 'completed' && s.stepCount === 4, 20_000);
  const [, , third, fourth] = bodies();
  assert.deepEqual([third.seed, third.logprobs, third.reasoning_effort], [9, true, undefined]);
  assert.deepEqual([fourth.seed, fourth.logprobs, fourth.tool_choice], [undefined, undefined, 'auto'],
    'the next run has the agent\'s settings');
});

test('providerOptions the agent cannot take are refused, and nothing is created or started', async () => {
  const id = `options-bad-${process.pid}`;
  const sent = llm.requests.length;
  const unknownTool = await api(worker, 'POST', '/v1/sessions',
    { agent: 'assistant', sessionId: id, input: 'hi', providerOptions: { toolChoice: { tool: 'no_such_tool' } } });
  assert.equal(unknownTool.status, 400, JSON.stringify(unknownTool.body));
  assert.equal(unknownTool.body.error.code, 'validation_error');
  assert.match(unknownTool.body.error.message, /no_such_tool/);
  assert.equal((await api(worker, 'GET', `/v1/sessions/${id}`)).status, 404, 'no session was created');

  for (const [providerOptions, says] of [
    [{ openai: { messages: [] } }, /providerOptions\.openai\.messages/],
    [{ thinkingBudget: 10 }, /at least 1024/],
    [{ temperature: 1 }, /unknown field/],
  ]) {
    const r = await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input: 'hi', providerOptions });
    assert.equal(r.status, 400, JSON.stringify(providerOptions));
    assert.match(r.body.error.message, says);
  }
  assert.equal(llm.requests.length, sent, 'no model was called');
});

test('a chat turn\'s providerOptions go with the run it starts', async () => {
  const id = `options-chat-${process.pid}`;
  llm.push({ text: 'Hi from chat.' });
  const res = await fetch(`${worker.baseUrl}/v1/chat`, {
    method: 'POST',
    headers: { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      id, agent: 'assistant', providerOptions: { openai: { seed: 11 } },
      messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'hello' }] }],
    }),
  });
  assert.equal(res.status, 200);
  assert.match(await res.text(), /\[DONE\]/);
  assert.equal(bodies().at(-1).seed, 11);
});
