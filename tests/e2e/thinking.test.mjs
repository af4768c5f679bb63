// Extended thinking through Anthropic's Messages format (the mock answers requests to
// `…/messages` as the API streams them): the `thinker` agent's requests ask for a
// thinking budget; the model's signed and redacted thinking is streamed as `thinking`
// chunks, kept in the transcript, and the request after its tool call carries both
// blocks back exactly as received, ahead of the call. A tool's picture goes back inside
// its `tool_result`.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { API_TOKEN, api, startWithMock, waitFor } from './client.mjs';
import { openStream } from './sse.mjs';

let worker;
let llm;
before(async () => {
  ({ worker, llm } = await startWithMock({ LLM_PROVIDER: 'anthropic', LLM_CAPABILITIES: '' }));
});
after(async () => { await worker?.stop(); await llm?.close(); worker?.cleanup(); });

test('signed and redacted thinking go back byte for byte in the request after a tool call', async () => {
  const id = `thinking-${process.pid}`;
  const signature = 'EuYBCkQYAiJAgCs1le6/Pol5Z4+JMomVOouGrWdh/YNsH3ukzUECbB6iWrSQ==';
  const redacted = 'EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP==';
  const thought = 'The user wants a note — "milk", then I answer.';
  llm.push(
    { thinking: { text: thought, signature }, redacted, text: 'Noting it.', calls: [{ id: 'toolu_e2e_1', name: 'add_note', args: { text: 'milk' } }] },
    { thinking: { text: 'Done; say so.', signature: 'c2lnLTI=' }, text: 'Noted.' },
  );
  assert.equal((await api(worker, 'POST', '/v1/sessions', { agent: 'thinker', sessionId: id, input: 'Note milk.' })).status, 201);
  const done = await waitFor(worker, id, (s) => s.status === 'completed', 20_000);
  assert.deepEqual(done.state, { notes: [{ text: 'milk' }] });

  assert.equal(llm.requests.length, 2);
  for (const r of llm.requests) {
    assert.match(r.path, /\/messages$/);
    assert.deepEqual(r.body.thinking, { type: 'enabled', budget_tokens: 2048 });
  }
  const second = llm.requests[1];
  assert.ok(second.raw.includes(`"signature":"${signature}"`), 'the signature goes back untouched');
  assert.ok(second.raw.includes(`"data":"${redacted}"`), 'the redacted data goes back untouched');
  const assistant = second.body.messages[1];
  assert.equal(assistant.role, 'assistant');
  assert.deepEqual(assistant.content.slice(0, 2), [
    { type: 'thinking', thinking: thought, signature },
    { type: 'redacted_thinking', data: redacted },
  ]);
  assert.deepEqual(assistant.content.map((b) => b.type), ['thinking', 'redacted_thinking', 'text', 'tool_use']);
  assert.equal(second.body.messages[2].content[0].tool_use_id, 'toolu_e2e_1');

  const stream = await openStream(`${worker.baseUrl}/v1/sessions/${id}/stream`, {
    headers: { authorization: `Bearer ${API_TOKEN}` },
  });
  try {
    const events = await stream.until((e) => e.type === 'run_finished');
    const thinking = events.filter((e) => e.type === 'thinking').map((e) => e.json);
    assert.equal(thinking.filter((c) => !c.isComplete).map((c) => c.content).join(''), `${thought}Done; say so.`);
    assert.equal(thinking.filter((c) => c.isComplete).length, 3, 'each block ends complete, the redacted one too');
    assert.ok(events.findIndex((e) => e.type === 'thinking') < events.findIndex((e) => e.type === 'tool_start'));
  } finally {
    stream.close();
  }
});

test('a tool\'s picture goes back inside its tool_result, in Anthropic\'s form', async () => {
  const id = `painter-${process.pid}`;
  const before = llm.requests.length;
  llm.push({ calls: [{ id: 'toolu_e2e_2', name: 'render_chart', args: { title: 'sales' } }] }, { text: 'A pixel.' });
  assert.equal((await api(worker, 'POST', '/v1/sessions', { agent: 'painter', sessionId: id, input: 'Chart the sales.' })).status, 201);
  await waitFor(worker, id, (s) => s.status === 'completed', 20_000);
  const second = llm.requests[before + 1].body;
  const pixel = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';
  assert.deepEqual(second.messages[2], {
    role: 'user',
    content: [{
      type: 'tool_result',
      tool_use_id: 'toolu_e2e_2',
      content: [
        { type: 'text', text: JSON.stringify({ rendered: 'sales' }) },
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data: pixel } },
      ],
    }],
  });
});
