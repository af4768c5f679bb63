// The README's demo: the `demo` model, no LLM key, no credentials (ALLOW_UNAUTHENTICATED),
// exactly the curl flow the README documents.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { api, waitFor } from './client.mjs';
import { startWorker } from './harness.mjs';

let worker;
before(async () => {
  worker = await startWorker({ vars: { API_TOKEN: '', ALLOW_UNAUTHENTICATED: 'true', LLM_PROVIDER: '' } });
});
after(async () => { await worker?.stop(); worker?.cleanup(); });

test('the demo agent works with no key and no credentials', async () => {
  const created = await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', input: 'note buy milk; delete /tmp/x' }, null);
  assert.equal(created.status, 201);
  assert.match(created.body.sessionId, /^s_[0-9a-f]{32}$/);
  const id = created.body.sessionId;
  const s = await waitFor(worker, id, (x) => x.pendingToolCalls.length === 1);
  assert.deepEqual(s.state, { notes: [{ text: 'buy milk' }] });
  await api(worker, 'POST', `/v1/sessions/${id}/tool-results`,
    { kind: 'approval-response', toolCallId: s.pendingToolCalls[0].toolCallId, approved: true }, null);
  await waitFor(worker, id, (x) => x.status === 'completed');
  const msgs = await api(worker, 'GET', `/v1/sessions/${id}/messages`, undefined, null);
  assert.match(msgs.body.messages.at(-1).content, /delete_file returned \{"deleted":"\/tmp\/x"\}/);
});
