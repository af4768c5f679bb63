// A finish in a step with an approval-gated call waits for the approval, durably: the
// worker is SIGKILLed while the step waits, restarted on the same state, the call is
// approved, and then the approved call runs once and the finish after it, once,
// completing the run with the finish's output (`ledger`'s tools report each execution).

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { API_TOKEN, api, startWithMock, waitFor } from './client.mjs';
import { startWorker } from './harness.mjs';

let worker;
let llm;
before(async () => { ({ worker, llm } = await startWithMock({}, undefined, { flavour: 'test' })); });
after(async () => { await worker?.stop(); await llm?.close(); worker?.cleanup(); });

test('a finish waits for its step\'s approval across a SIGKILL, then runs once, after it', async () => {
  const id = `finishing-${process.pid}`;
  llm.push({ calls: [{ name: 'close', args: { label: 'closed' } }, { name: 'record', args: { label: 'kept' } }] });
  assert.equal((await api(worker, 'POST', '/v1/sessions', { agent: 'ledger', sessionId: id, input: 'go' })).status, 201);
  const waiting = await waitFor(worker, id, (s) => s.pendingToolCalls.length === 1, 20_000);
  assert.equal(waiting.pendingToolCalls[0].toolName, 'record');
  assert.equal(waiting.status, 'active');
  assert.deepEqual(llm.ledger, [], 'nothing ran: the finish waits for the approval');

  const persistDir = worker.persistDir;
  await worker.kill();
  worker = await startWorker({
    flavour: 'test',
    persistDir,
    migrate: false,
    vars: { API_TOKEN, LLM_PROVIDER: 'openai', LLM_BASE_URL: llm.url, LLM_API_KEY: 'test-key', LEDGER_URL: llm.ledgerUrl },
  });
  const ok = await api(worker, 'POST', `/v1/sessions/${id}/tool-results`,
    { kind: 'approval-response', toolCallId: waiting.pendingToolCalls[0].toolCallId, approved: true });
  assert.equal(ok.status, 202, JSON.stringify(ok.body));
  const done = await waitFor(worker, id, (s) => s.status === 'completed', 20_000);
  assert.deepEqual(done.output, { closed: 'closed' });
  assert.deepEqual(llm.ledger.filter((r) => r.session === id).map((r) => r.label), ['kept', 'closed'],
    'the approved call once, then the finish once');
  const messages = (await api(worker, 'GET', `/v1/sessions/${id}/messages`)).body.messages;
  assert.deepEqual(messages.filter((m) => m.role === 'tool').map((m) => m.toolName), ['record', 'close']);
  assert.equal(llm.requests.length, 1, 'no further model call');
});
