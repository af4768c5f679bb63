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

// The dev model for agents of your own: a script in LLM_SCRIPT (a var like any other)
// drives an approval cycle of the reference `assistant` here; `/call` calls any tool.
test('LLM_SCRIPT scripts the demo model: a call needing approval, then the reply; /call calls a tool', async () => {
  const script = [
    { user: 'tidy up', calls: [{ tool: 'delete_file', args: { path: '/tmp/old' } }], reply: 'Tidied: /tmp/old is gone.' },
  ];
  const scripted = await startWorker({ vars: { API_TOKEN: '', ALLOW_UNAUTHENTICATED: 'true', LLM_SCRIPT: JSON.stringify(script) } });
  try {
    const created = await api(scripted, 'POST', '/v1/sessions', { agent: 'assistant', input: 'Please tidy up my disk' }, null);
    assert.equal(created.status, 201);
    const id = created.body.sessionId;
    const s = await waitFor(scripted, id, (x) => x.pendingToolCalls.length === 1);
    assert.equal(s.pendingToolCalls[0].toolName, 'delete_file');
    assert.deepEqual(s.pendingToolCalls[0].arguments, { path: '/tmp/old' });
    await api(scripted, 'POST', `/v1/sessions/${id}/tool-results`,
      { kind: 'approval-response', toolCallId: s.pendingToolCalls[0].toolCallId, approved: true }, null);
    await waitFor(scripted, id, (x) => x.status === 'completed');
    let msgs = await api(scripted, 'GET', `/v1/sessions/${id}/messages`, undefined, null);
    assert.equal(msgs.body.messages.at(-1).content, 'Tidied: /tmp/old is gone.');

    const sent = await api(scripted, 'POST', `/v1/sessions/${id}/messages`, { message: '/call add_note {"text": "from /call"}' }, null);
    assert.equal(sent.status, 202);
    const done = await waitFor(scripted, id, (x) => x.status === 'completed' && x.state.notes?.length === 1);
    assert.deepEqual(done.state.notes, [{ text: 'from /call' }]);
    msgs = await api(scripted, 'GET', `/v1/sessions/${id}/messages`, undefined, null);
    assert.match(msgs.body.messages.at(-1).content, /^Done\. add_note returned/);
  } finally {
    await scripted.stop();
    scripted.cleanup();
  }
});
