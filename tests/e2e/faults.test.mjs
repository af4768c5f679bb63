// Faults against the real worker (wrangler dev, local D1 and Durable Objects): a mock
// model that rate-limits, fails, hangs, cuts its stream, sends malformed chunks, a
// 10 MB answer and hostile tool calls; clients that disconnect a hundred times, race
// follow-ups and resumes against a running run, or send a result too large to keep.
// Every outcome is a documented retry or a classified failure, the session stays
// consistent and can be retried, and no secret reaches the worker's logs.

import { after, before, beforeEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { API_TOKEN, api, gapFree, startWithMock, waitFor } from './client.mjs';
import { openStream } from './sse.mjs';

const LLM_KEY = 'sk-e2e-secret-key-9f3a';
let worker;
let llm;
const tokens = []; // every session token handed out, for the log check
before(async () => {
  ({ worker, llm } = await startWithMock({ LLM_API_KEY: LLM_KEY, LLM_TIMEOUT_MS: '1500', LLM_MAX_RETRIES: '2' }, undefined, { flavour: 'test' }));
});
after(async () => { await worker?.stop(); await llm?.close(); worker?.cleanup(); });
beforeEach(() => llm?.reset());

let n = 0;
const newId = (name) => `${name}-${process.pid}-${++n}`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function create(id, input) {
  const res = await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  tokens.push(res.body.sessionToken);
  return res.body;
}

const stream = (id, opts) => openStream(`${worker.baseUrl}/v1/sessions/${id}/stream`, {
  headers: { authorization: `Bearer ${API_TOKEN}` }, ...opts,
});
const settled = (id) => waitFor(worker, id, (s) => s.status !== 'active', 30_000);
const messages = async (id) => (await api(worker, 'GET', `/v1/sessions/${id}/messages?limit=500`)).body.messages;
const callsFor = (id) => llm.requests.filter((r) => r.body?.messages?.some((m) => m.content === id));

/** A failed run that is consistent and completes when retried. */
async function assertRetryable(id, code) {
  const failed = await settled(id);
  assert.equal(failed.status, 'failed');
  assert.equal(failed.error.code, code, JSON.stringify(failed.error));
  assert.deepEqual((await messages(id)).map((m) => m.role), ['user'], 'the failed step left no message');
  const sse = await stream(id);
  const events = await sse.until((e) => e.type === 'fail');
  assert.ok(gapFree(events), 'gap-free');
  assert.equal(events.find((e) => e.type === 'fail').json.error.code, code);
  llm.push({ text: 'Second time lucky.' });
  const retry = await api(worker, 'POST', `/v1/sessions/${id}/retry`, {});
  assert.equal(retry.status, 202, JSON.stringify(retry.body));
  const done = await settled(id);
  assert.equal(done.status, 'completed');
  assert.deepEqual((await messages(id)).map((m) => [m.role, m.content]),
    [['user', id], ['assistant', 'Second time lucky.']]);
}

test('a 429 with Retry-After is retried after the wait it asks for', async () => {
  const id = newId('ratelimit');
  llm.push({ status: 429, headers: { 'retry-after': '1' } }, { text: 'Fine now.' });
  await create(id, id);
  const done = await settled(id);
  assert.equal(done.status, 'completed');
  const calls = callsFor(id);
  assert.equal(calls.length, 2);
  assert.ok(calls[1].at - calls[0].at >= 1000, `waited ${calls[1].at - calls[0].at} ms`);
});

test('500s are retried up to LLM_MAX_RETRIES, then the run fails retryably and can be retried', async () => {
  const id = newId('unavailable');
  llm.push({ status: 500 }, { status: 502 }, { status: 503 });
  await create(id, id);
  await assertRetryable(id, 'provider_unavailable');
  assert.equal(callsFor(id).length, 4, '1 call + 2 retries, then 1 for the retry');
});

test('a hung model call times out and is retried', async () => {
  const id = newId('hang');
  llm.push({ hang: true }, { text: 'Awake.' });
  await create(id, id);
  const done = await settled(id);
  assert.equal(done.status, 'completed');
  assert.equal(callsFor(id).length, 2);
});

test('a stream cut after output fails the run as provider_truncated, without a retry', async () => {
  const id = newId('cut');
  llm.push({ text: 'This answer will be cut short.', cutAfter: 3, chunkDelayMs: 30 });
  await create(id, id);
  await assertRetryable(id, 'provider_truncated');
  assert.equal(callsFor(id).length, 2, 'clients saw output: not retried; then the retry');
});

test('a malformed chunk is a classified failure', async () => {
  const id = newId('malformed');
  llm.push({ text: 'Some text first.', malformed: true });
  await create(id, id);
  await assertRetryable(id, 'provider_corrupt_response');
});

test('a 10 MB answer fails at the output limit; the session and the worker stay healthy', async () => {
  const id = newId('huge');
  llm.push({ text: 'x'.repeat(10 << 20), chunkSize: 64 * 1024 });
  await create(id, id);
  const sse = await stream(id);
  const events = await sse.until((e) => e.type === 'fail', 30_000);
  const streamed = events.filter((e) => e.type === 'text_delta').reduce((sum, e) => sum + e.json.delta.length, 0);
  assert.ok(streamed <= 1 << 20, `${streamed} bytes streamed`);
  assert.equal(events.find((e) => e.type === 'fail').json.error.code, 'provider_output_too_large');
  assert.deepEqual((await messages(id)).map((m) => m.role), ['user']);
  assert.equal((await api(worker, 'GET', '/healthz', undefined, null)).status, 200);
  llm.push({ text: 'Short this time.' });
  assert.equal((await api(worker, 'POST', `/v1/sessions/${id}/retry`, {})).status, 202);
  assert.equal((await settled(id)).status, 'completed');
});

test('a refusal, a filtered answer and a cut-off fail the run as such, keeping the answer text', async () => {
  const cases = [
    [{ refusal: 'I cannot help with that.' }, 'provider_refused', /refused to answer: I cannot help with that\./],
    [{ text: 'Partly filtered', finish: 'content_filter' }, 'provider_content_filtered', /filtered/],
    [{ text: 'Cut off mid-sen', finish: 'length', calls: [{ name: 'add_note', args: { text: 'x' } }] },
      'provider_max_tokens', /output token limit/],
  ];
  for (const [answer, code, message] of cases) {
    const id = newId(code);
    llm.push(answer);
    await create(id, id);
    const failed = await settled(id);
    assert.equal(failed.status, 'failed');
    assert.equal(failed.error.code, code, JSON.stringify(failed.error));
    assert.match(failed.error.message, message);
    const events = await (await stream(id)).until((e) => e.type === 'fail');
    assert.equal(events.find((e) => e.type === 'fail').json.error.code, code);
    assert.ok(!events.some((e) => e.type === 'tool_start'), 'the cut-off call never ran');
    const kept = await messages(id);
    assert.deepEqual(kept.map((m) => [m.role, m.content]), [['user', id], ['assistant', answer.text ?? '']]);
    assert.equal(kept[1].toolCalls, undefined, 'the unfinished calls are not kept');
    assert.equal(callsFor(id).length, 1, 'not retried');
  }
});

test('a server tool that hangs past its timeout is stopped; the model sees tool_timeout and the run goes on', async () => {
  const id = newId('timeout');
  llm.setLedgerDelay(10_000); // the tool's subrequest would take 10 s; it may take 1 s
  try {
    llm.push({ calls: [{ name: 'lookup', args: { label: 'slow' } }, { name: 'add_note', args: { text: 'kept' } }] },
      { text: 'It timed out.' });
    const started = Date.now();
    const res = await api(worker, 'POST', '/v1/sessions', { agent: 'ledger', sessionId: id, input: 'look it up' });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const done = await settled(id);
    const took = Date.now() - started;
    assert.equal(done.status, 'completed');
    assert.ok(took >= 1_000 && took < 9_000, `the call ended at its 1 s timeout (${took} ms)`);
    assert.deepEqual(done.state.notes, [{ text: 'kept' }], 'the other call of the step ran');
    const results = (await messages(id)).filter((m) => m.role === 'tool');
    const lookup = results.find((m) => m.toolName === 'lookup');
    assert.equal(lookup.isError, true);
    assert.equal(lookup.content.code, 'tool_timeout');
    assert.match(lookup.content.error, /1000 ms/);
    assert.equal(llm.requests.at(-1).body.messages.some((m) => m.role === 'tool' && /tool_timeout/.test(m.content)), true,
      'the model saw the timeout');
  } finally {
    llm.setLedgerDelay(0);
  }
});

test('hostile tool calls become errors the model can act on', async () => {
  const id = newId('hostile');
  llm.push({
    calls: [
      { name: 'add_note', rawArgs: '{"text": "unterminated' },
      { name: 'add_note', args: { text: 5 } },
      { name: 'rm_rf', args: { path: '/' } },
      { name: 'add_note', args: { text: 'fine', extra: true } },
      { name: 'add_note', args: { text: 'kept' } },
    ],
  }, { text: 'I will fix my calls.' });
  await create(id, id);
  const done = await settled(id);
  assert.equal(done.status, 'completed');
  assert.deepEqual(done.state, { notes: [{ text: 'kept' }] });
  const tools = (await messages(id)).filter((m) => m.role === 'tool');
  assert.deepEqual(tools.map((m) => [m.isError ?? false, m.content.code ?? null]), [
    [true, 'tool_input_invalid'],
    [true, 'tool_input_invalid'],
    [true, 'tool_not_found'],
    [true, 'tool_input_invalid'],
    [false, null],
  ]);
  // The model saw every error on its next call, with a message to act on.
  const seen = callsFor(id).at(-1).body.messages.filter((m) => m.role === 'tool');
  assert.equal(seen.length, 5);
  assert.ok(seen.slice(0, 4).every((m) => /invalid|does not exist/i.test(m.content)), JSON.stringify(seen));
});

test('a client result too large to keep is refused with 413 and changes nothing', async () => {
  const id = newId('bigresult');
  llm.push({ calls: [{ name: 'ask_user', args: { question: 'Send me everything.' } }] }, { text: 'Got it.' });
  await create(id, id);
  const before = await waitFor(worker, id, (s) => s.pendingToolCalls.length === 1);
  const callId = before.pendingToolCalls[0].toolCallId;
  const huge = await api(worker, 'POST', `/v1/sessions/${id}/tool-results`,
    { kind: 'client-tool-result', toolCallId: callId, result: 'z'.repeat(600 * 1024) });
  assert.deepEqual([huge.status, huge.body.error?.code], [413, 'content_too_large']);
  assert.match(huge.body.error.message, /bytes/);
  assert.deepEqual((await api(worker, 'GET', `/v1/sessions/${id}`)).body, before, 'nothing changed');
  const ok = await api(worker, 'POST', `/v1/sessions/${id}/tool-results`,
    { kind: 'client-tool-result', toolCallId: callId, result: 'a summary' });
  assert.equal(ok.status, 202);
  assert.equal((await settled(id)).status, 'completed');
});

test('100+ random disconnects with Last-Event-ID: the pieces concatenate to the stream exactly', async (t) => {
  const id = newId('disconnects');
  // 600 deltas over ~12 s.
  llm.push({ text: 'abcdefghij'.repeat(2400), chunkSize: 40, chunkDelayMs: 20 });
  await create(id, id);
  const watcher = await stream(id); // one client that never disconnects
  const received = [];
  let disconnects = 0;
  while (received.at(-1)?.type !== 'end') {
    const sse = await stream(id, received.length ? { lastEventId: received.at(-1).id } : {});
    // Hangs up at a random moment: mid-frame, mid-replay or mid-live.
    await Promise.race([sse.closed, sleep(Math.random() * 30)]);
    sse.close();
    await sse.closed;
    received.push(...sse.events);
    disconnects++;
  }
  const full = await stream(id, { lastEventId: 0 });
  await full.until((e) => e.type === 'end');
  await watcher.until((e) => e.type === 'end');
  t.diagnostic(`${disconnects} disconnects, ${received.length} events`);
  assert.ok(disconnects >= 100, `${disconnects} disconnects`);
  const frames = (events) => events.map((e) => `${e.id}\n${e.event}\n${e.data}`);
  assert.deepEqual(frames(received), frames(full.events), 'no event lost or repeated');
  assert.deepEqual(frames(watcher.events), frames(full.events));
  assert.ok(gapFree(received));
});

test('follow-ups and resumes racing a running run get 409 or a consistent outcome', async () => {
  for (let trial = 0; trial < 10; trial++) {
    const id = newId('race');
    llm.respondWith(() => ({ text: 'y'.repeat(240), chunkDelayMs: 3 }));
    await create(id, id);
    await sleep(Math.random() * 120);
    const racers = await Promise.all([
      api(worker, 'POST', `/v1/sessions/${id}/messages`, { message: 'and another thing' }),
      api(worker, 'POST', `/v1/sessions/${id}/resume`, {}),
      api(worker, 'POST', `/v1/sessions/${id}/messages`, { message: 'and one more' }),
      api(worker, 'POST', `/v1/sessions/${id}/resume`, {}),
    ]);
    for (const r of racers) assert.ok([202, 409].includes(r.status), `${r.status} ${JSON.stringify(r.body)}`);
    const followUps = racers.filter((_, i) => i % 2 === 0);
    let accepted = followUps.filter((r) => r.status === 202).length;
    assert.ok(accepted <= 1, 'one follow-up at most: the second finds the session busy');
    await waitFor(worker, id, (s) => s.status === 'completed' && !s.pendingToolCalls.length, 30_000);
    await sleep(200);
    const final = (await api(worker, 'GET', `/v1/sessions/${id}`)).body;
    assert.equal(final.status, 'completed', JSON.stringify(final));
    const stored = await messages(id);
    // A follow-up that wrangler's proxy dropped and `api` sent again may have landed the
    // first time (the re-send then finds the session busy): the stored messages tell.
    if (followUps.some((r) => r.resent && r.status === 409)) {
      const answered = accepted;
      accepted = stored.filter((m) => m.role === 'user').length - 1;
      assert.ok(accepted >= answered && accepted <= 1, `${accepted} follow-ups kept, ${answered} accepted`);
    }
    const roles = stored.map((m) => m.role);
    assert.deepEqual(roles, Array(1 + accepted).fill(['user', 'assistant']).flat(), JSON.stringify(roles));
    const runs = (await api(worker, 'GET', `/v1/sessions/${id}/runs`)).body.runs;
    assert.equal(runs.length, 1 + accepted);
    assert.ok(runs.every((r) => r.status === 'completed'));
    const sse = await stream(id, { lastEventId: 0 });
    const events = await sse.until((e, all) => all.filter((x) => x.type === 'end').length === 1 + accepted);
    sse.close();
    assert.ok(gapFree(events));
  }
  llm.respondWith(null);
});

test('no token or key ever reaches the worker\'s logs', async () => {
  await sleep(500); // let the last log lines land
  const log = readFileSync(worker.logPath, 'utf8');
  // wrangler itself prints the --var bindings it was started with; the worker's own
  // lines are everything after "Ready on".
  const own = log.slice(log.indexOf('Ready on'));
  assert.ok(own.length > 1000 && own.includes('"event":"run_completed"'), 'the worker logged its runs');
  for (const secret of [API_TOKEN, LLM_KEY, ...tokens]) {
    assert.ok(!own.includes(secret), `a secret (${secret.slice(0, 6)}…) is in the log`);
  }
  assert.ok(tokens.length > 10);
});
