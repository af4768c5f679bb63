// A provider configuration never receives what its profile lacks: Workers AI (through
// its OpenAI-compatible endpoint, here the mock at LLM_BASE_URL) gets no prompt-cache
// key from an agent that asks for prompt caching, where OpenAI's profile gets one
// (`contracts.test.mjs`).

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { api, startWithMock, waitFor } from './client.mjs';

let worker;
let llm;
before(async () => {
  ({ worker, llm } = await startWithMock({ LLM_PROVIDER: 'workers-ai', LLM_CAPABILITIES: '', LOG_LEVEL: 'debug' }));
});
after(async () => { await worker?.stop(); await llm?.close(); worker?.cleanup(); });

test('Workers AI gets no prompt_cache_key and no strict tools; the debug log names what was left out', async () => {
  const id = `wai-${process.pid}`;
  llm.push({ text: 'Hello.' });
  assert.equal((await api(worker, 'POST', '/v1/sessions', { agent: 'typed', sessionId: id, input: 'hi' })).status, 201);
  await waitFor(worker, id, (s) => s.status === 'completed', 20_000);
  const [body] = llm.requests.map((r) => r.body);
  assert.ok(body, 'the model was called');
  assert.equal(body.prompt_cache_key, undefined);
  assert.equal(body.prompt_cache_retention, undefined);
  for (const tool of body.tools ?? []) assert.equal(tool.function.strict, undefined, tool.function.name);
  const { readFileSync } = await import('node:fs');
  const dropped = readFileSync(worker.logPath, 'utf8').split('\n').find((l) => l.includes('"model_capability_dropped"'));
  assert.ok(dropped, 'a debug line says what was left out');
  assert.match(dropped, /not sent, as the provider lacks them: prompt_cache/);
});
