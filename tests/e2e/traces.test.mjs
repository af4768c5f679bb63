// OpenTelemetry traces against the real worker (feature `otel`): spans exported over
// OTLP/HTTP JSON to a real receiver that decodes every payload with the official
// OTLP definitions. One run of `observed` crosses an approval, a client tool, a
// sub-agent and a restart of the worker; its spans are one trace, continued from the
// caller's `traceparent`, with the GenAI attributes and the mock model's token counts,
// and no prompt text unless content capture is on. A failing or slow receiver never
// slows a run: its spans are dropped and counted.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { API_TOKEN, api, eventually, waitFor } from './client.mjs';
import { ROOT, startWorker } from './harness.mjs';
import { startMockLlm } from './mock-llm.mjs';
import { startOtlpReceiver } from './otlp-receiver.mjs';

const CALLER_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CALLER_SPAN = '00f067aa0ba902b7';
const SECRET = 'the-secret-file-4711';

let llm;
let receiver;
let worker;
let persistDir;

/** `observed`'s script: delete, ask, research, answer (each with its own tokens); the
 *  researcher finishes at once. */
function respond(body) {
  const system = body?.messages?.[0]?.content ?? '';
  if (system.startsWith('You are a researcher')) {
    return { model: 'mock-research', usage: [55, 3], calls: [{ name: '__finish__', args: { summary: 'found' } }] };
  }
  const results = (body?.messages ?? []).filter((m) => m.role === 'tool').length;
  const model = 'mock-observed';
  switch (results) {
    case 0: return { model, usage: [101, 5], calls: [{ name: 'delete_file', args: { path: `/tmp/${SECRET}` } }] };
    case 1: return { model, usage: [102, 6], calls: [{ name: 'ask_user', args: { question: 'Sure?' } }] };
    case 2: return { model, usage: [103, 7], calls: [{ name: 'research', args: { topic: 'otel' } }] };
    default: return { model, usage: [104, 8], text: 'All done.' };
  }
}

async function start(vars = {}) {
  worker = await startWorker({
    persistDir,
    migrate: !worker,
    vars: {
      API_TOKEN,
      LLM_PROVIDER: 'openai',
      LLM_BASE_URL: llm.url,
      LLM_API_KEY: 'test-key',
      LLM_MODEL: 'gpt-observed',
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_HEADERS: 'x-backend-key=k%3D1',
      OTEL_SERVICE_NAME: 'e2e-agents',
      ...vars,
    },
  });
}

before(async () => {
  llm = await startMockLlm();
  llm.respondWith(respond);
  receiver = await startOtlpReceiver();
  mkdirSync(join(ROOT, '.e2e'), { recursive: true });
  persistDir = mkdtempSync(join(ROOT, '.e2e', 'traces-'));
  await start();
});
after(async () => {
  await worker?.stop();
  await llm?.close();
  await receiver?.close();
  worker?.cleanup();
});

let n = 0;
const newId = (name) => `${name}-${process.pid}-${++n}`;

async function create(id, agent, input, headers = {}) {
  const res = await worker.fetch('/v1/sessions', {
    method: 'POST',
    headers: { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ agent, sessionId: id, input }),
  });
  assert.equal(res.status, 201, await res.text());
}

const pendingOf = (id, name) => waitFor(worker, id,
  (s) => s.pendingToolCalls.some((p) => p.toolName === name), 30_000);

const attr = (span, key) => span.attributes[key];

test('a run across an approval, a client tool, a sub-agent and a restart is one exported trace', async () => {
  const id = newId('observed');
  await create(id, 'observed', `Delete ${SECRET}, ask me, research otel.`,
    { traceparent: `00-${CALLER_TRACE}-${CALLER_SPAN}-01` });
  const asked = await pendingOf(id, 'delete_file');
  const approval = asked.pendingToolCalls[0].toolCallId;
  let res = await api(worker, 'POST', `/v1/sessions/${id}/tool-results`,
    { kind: 'approval-response', toolCallId: approval, approved: true });
  assert.equal(res.status, 202);
  const client = (await pendingOf(id, 'ask_user')).pendingToolCalls[0].toolCallId;

  // The worker restarts while the run waits on the client.
  await worker.stop();
  await start();
  res = await api(worker, 'POST', `/v1/sessions/${id}/tool-results`,
    { kind: 'client-tool-result', toolCallId: client, result: { answer: 'yes' } });
  assert.equal(res.status, 202);
  const done = await waitFor(worker, id, (s) => s.status === 'completed', 30_000);

  // The hooks' audit is in the committed state.
  assert.deepEqual(done.state.audit.map((a) => [a.tool, a.ok]),
    [['delete_file', true], ['ask_user', true], ['research', true]]);
  assert.equal(done.state.waiting, null, 'on_agent_resumed cleared what on_agent_suspended set');

  const runs = await api(worker, 'GET', `/v1/sessions/${id}/runs`);
  const run = runs.body.runs[0];
  assert.equal(run.traceId, CALLER_TRACE, "the run continues the caller's trace");
  assert.deepEqual(run.usageByModel['mock-observed'],
    { inputTokens: 410, outputTokens: 26, cacheReadTokens: 0, cacheWriteTokens: 0 });

  // Every span of the run (and of its child's) reaches the receiver.
  const spans = await eventually(() => receiver.spans(),
    (all) => all.filter((s) => s.name.startsWith('invoke_agent ')).length >= 2, 30_000);
  const ours = spans.filter((s) => s.traceId === CALLER_TRACE);
  const runSpan = ours.find((s) => s.name === 'invoke_agent observed');
  assert.ok(runSpan, `the run's span: ${spans.map((s) => s.name)}`);
  assert.equal(runSpan.parentSpanId, CALLER_SPAN);
  assert.equal(runSpan.resource['service.name'], 'e2e-agents');
  assert.equal(attr(runSpan, 'gen_ai.operation.name'), 'invoke_agent');
  assert.equal(attr(runSpan, 'gen_ai.conversation.id'), id);
  assert.equal(attr(runSpan, 'helix.run.status'), 'completed');
  assert.deepEqual(receiver.headers.at(-1)['x-backend-key'], 'k=1', 'the configured headers');
  assert.equal(receiver.headers.at(-1)['content-type'], 'application/json', "OTLP/HTTP's JSON encoding");
  assert.deepEqual(receiver.malformed, [], 'every payload is OTLP as the official definitions have it');

  const slices = ours.filter((s) => s.name === 'agent_slice observed');
  assert.deepEqual(slices.map((s) => attr(s, 'helix.slice.cause')).sort(),
    ['resume', 'resume', 'resume', 'start'], 'a start, then a resumption per answer and the child');
  for (const slice of slices) {
    assert.equal(slice.parentSpanId, runSpan.spanId);
    assert.deepEqual(slice.links, [{ traceId: CALLER_TRACE, spanId: runSpan.spanId }]);
  }
  const sliceIds = new Set(slices.map((s) => s.spanId));
  const chats = ours.filter((s) => s.name === 'chat gpt-observed' && attr(s, 'gen_ai.response.model') === 'mock-observed');
  assert.ok(chats.every((c) => sliceIds.has(c.parentSpanId)), 'model calls are in slices');
  assert.deepEqual(chats.map((c) => [attr(c, 'gen_ai.usage.input_tokens'), attr(c, 'gen_ai.usage.output_tokens')]),
    [[101, 5], [102, 6], [103, 7], [104, 8]], 'the tokens the mock model reported');
  assert.ok(chats.every((c) => attr(c, 'gen_ai.system') === 'openai' && attr(c, 'gen_ai.request.model') === 'gpt-observed'));
  assert.ok(chats.every((c) => c.kind === 3), 'model calls are client spans (SPAN_KIND_CLIENT)');

  const tools = ours.filter((s) => s.name.startsWith('execute_tool '));
  assert.deepEqual(tools.map((t) => [attr(t, 'gen_ai.tool.name'), attr(t, 'helix.tool.answer')]),
    [['delete_file', 'approved'], ['ask_user', 'client'], ['research', 'child']]);
  assert.ok(tools.every((t) => sliceIds.has(t.parentSpanId)));
  const waits = ours.filter((s) => s.name.startsWith('await_'));
  assert.deepEqual(waits.map((w) => w.name), ['await_human', 'await_human', 'await_children']);
  assert.ok(waits.every((w) => w.parentSpanId === runSpan.spanId && attr(w, 'helix.wait.ms') >= 0));
  assert.ok(ours.some((s) => s.name === 'commit' && sliceIds.has(s.parentSpanId)));
  // Each replication to D1 is a span of the run.
  const replications = await eventually(() => receiver.spans().filter((s) => s.name === 'replicate'
    && attr(s, 'gen_ai.conversation.id') === id), (r) => r.length > 0);
  assert.ok(replications.length > 0, 'the replications to D1');
  assert.ok(replications.every((r) => r.parentSpanId === runSpan.spanId && r.kind === 3
    && attr(r, 'helix.replication.commits') >= 1 && attr(r, 'db.system.name') === 'cloudflare.d1'),
    JSON.stringify({ run: runSpan.spanId, replications }));

  // The sub-agent's run is a child of the parent's run, in the same trace.
  const child = ours.find((s) => s.name === 'invoke_agent researcher');
  assert.ok(child, 'the child run is in the trace');
  assert.equal(child.parentSpanId, runSpan.spanId);
  const childChat = ours.find((s) => attr(s, 'gen_ai.response.model') === 'mock-research');
  assert.equal(childChat.traceId, CALLER_TRACE);
  assert.deepEqual([attr(childChat, 'gen_ai.usage.input_tokens'), attr(childChat, 'gen_ai.usage.output_tokens')], [55, 3]);

  // Content capture is off: no prompt, argument or result text anywhere.
  const everything = JSON.stringify(spans);
  assert.ok(!everything.includes(SECRET), 'no content when capture is off');
  assert.ok(!everything.includes('gen_ai.input.messages'));

  // The session keeps the same spans (the console's timeline), all sent.
  const kept = await eventually(() => api(worker, 'GET', `/v1/sessions/${id}/runs/${run.runId}/spans`),
    (r) => r.body.export?.unsent === 0);
  assert.equal(kept.status, 200);
  assert.equal(kept.body.traceId, CALLER_TRACE);
  const keptIds = kept.body.spans.map((s) => s.spanId).sort();
  const receivedIds = ours.filter((s) => attr(s, 'helix.run.id') === run.runId).map((s) => s.spanId).sort();
  assert.deepEqual(keptIds, receivedIds);
  assert.deepEqual([kept.body.export.endpoint, kept.body.export.dropped], [true, 0]);
  const missing = await api(worker, 'GET', `/v1/sessions/${id}/runs/run_nope/spans`);
  assert.deepEqual([missing.status, missing.body.error?.code], [404, 'run_not_found']);
});

test('with content capture on, prompts, arguments and results are in the spans', async () => {
  await worker.stop();
  await start({ OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'true' });
  const id = newId('content');
  await create(id, 'observed', `Delete ${SECRET}.`);
  const asked = await pendingOf(id, 'delete_file');
  await api(worker, 'POST', `/v1/sessions/${id}/tool-results`,
    { kind: 'approval-response', toolCallId: asked.pendingToolCalls[0].toolCallId, approved: false });
  await pendingOf(id, 'ask_user');
  const spans = await eventually(() => receiver.spans().filter((s) => attr(s, 'gen_ai.conversation.id') === id),
    (all) => all.some((s) => s.name === 'execute_tool delete_file'));
  const chat = spans.find((s) => s.name === 'chat gpt-observed');
  assert.ok(attr(chat, 'gen_ai.input.messages').includes(SECRET), 'the prompt');
  const tool = spans.find((s) => s.name === 'execute_tool delete_file');
  assert.ok(attr(tool, 'gen_ai.tool.call.arguments').includes(SECRET), 'the arguments');
  assert.equal(attr(tool, 'helix.tool.answer'), 'denied');
});

test('a failing or slow receiver neither fails nor slows a run; its spans are dropped and counted', async () => {
  await worker.stop();
  await start({ OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'false' });
  const cycle = async (id) => {
    const t0 = performance.now();
    await create(id, 'assistant', 'note this');
    await waitFor(worker, id, (s) => s.status === 'completed', 30_000);
    return performance.now() - t0;
  };
  llm.respondWith((body) => (body.messages.some((m) => m.role === 'tool')
    ? { text: 'Noted.' } : { calls: [{ name: 'add_note', args: { text: 'x' } }] }));
  const healthy = await cycle(newId('healthy'));

  receiver.mode = 'slow';
  const slow = await cycle(newId('slow'));
  assert.ok(slow < healthy + 2_000, `a slow receiver does not slow the run (${healthy} ms, then ${slow} ms)`);

  receiver.mode = 'fail';
  const id = newId('failing');
  const failing = await cycle(id);
  assert.ok(failing < healthy + 2_000, `a failing receiver does not slow the run (${healthy} ms, then ${failing} ms)`);
  const runId = (await api(worker, 'GET', `/v1/sessions/${id}/runs`)).body.runs[0].runId;
  const kept = await eventually(() => api(worker, 'GET', `/v1/sessions/${id}/runs/${runId}/spans`),
    (r) => r.body.export?.dropped > 0 && r.body.export?.unsent === 0, 30_000);
  assert.ok(kept.body.export.dropped > 0, JSON.stringify(kept.body.export));
  assert.equal(kept.body.export.sent, 0, 'nothing of it reached the failing receiver');
  const log = readFileSync(worker.logPath, 'utf8');
  assert.match(log, /"event":"otel_spans_dropped".*"reason":"the endpoint answered 500"/);
  llm.respondWith(respond);
  receiver.mode = 'ok';
});
