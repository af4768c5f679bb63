import { test } from 'node:test';
import assert from 'node:assert/strict';
import { HelixClient, HttpError, ProtocolError, decode } from '../dist/index.js';
import { chunk, frame, json, scripted, sse } from './fake.mjs';

const fast = { initialDelayMs: 1, maxDelayMs: 5 };

function client(handlers) {
  const s = scripted(handlers);
  return { ...s, client: new HelixClient({ baseUrl: 'http://w.test/', token: 'tok', fetch: s.fetch }) };
}

async function collect(stream) {
  const out = [];
  for await (const e of stream) out.push(e);
  return out;
}

test('decode types chunks, end, fail and truncated, and passes unknown types through', () => {
  const c = decode({ id: '3', event: 'chunk', data: '{"type":"text_delta","delta":"hi","sessionId":"s"}' });
  assert.deepEqual(c, { type: 'text_delta', delta: 'hi', sessionId: 's', seq: 3 });
  assert.deepEqual(decode({ id: '4', event: 'end', data: '{"output":1}' }), { type: 'end', output: 1, seq: 4 });
  assert.equal(decode({ id: '5', event: 'fail', data: '{"error":{"code":"x"}}' }).error.code, 'x');
  assert.equal(decode({ id: '0', event: 'truncated', data: '{"fromSequence":1,"requestedAfter":9}' }).type, 'truncated');
  assert.deepEqual(decode({ id: '6', event: 'chunk', data: '{"type":"hologram"}' }), {
    type: 'unknown', seq: 6, event: 'chunk', data: { type: 'hologram' },
  });
  assert.equal(decode({ id: '7', event: 'future', data: '{}' }).type, 'unknown');
  assert.throws(() => decode({ id: '8', event: 'chunk', data: 'nope' }), ProtocolError);
  assert.throws(() => decode({ id: 'x', event: 'chunk', data: '{}' }), ProtocolError);
  assert.throws(() => decode({ id: '9', event: 'chunk', data: '[1]' }), ProtocolError);
});

test('a broken connection resumes after the last event, with no event twice or missed', async () => {
  const states = [];
  const { client: c, requests } = client([
    () => sse([chunk(1, 'run_started', { turn: 1 }), chunk(2, 'text_delta', { delta: 'a' })], { then: 'error' }),
    () => json(503, { error: { code: 'busy', message: 'try again', retryable: true } }),
    // The server replays from its buffer: event 2 again, then new ones.
    () => sse([chunk(2, 'text_delta', { delta: 'a' }), chunk(3, 'text_delta', { delta: 'b' }), frame(4, 'end', {})]),
  ]);
  const events = await collect(c.session('s1').events({ ...fast, onConnection: (s) => states.push(s.status) }));
  assert.deepEqual(events.map((e) => e.seq), [1, 2, 3, 4]);
  assert.deepEqual(events.map((e) => e.type), ['run_started', 'text_delta', 'text_delta', 'end']);
  assert.deepEqual(requests.map((r) => r.headers['last-event-id']), ['0', '2', '2']);
  assert.equal(requests[0].headers.authorization, 'Bearer tok');
  assert.equal(requests[0].url, 'http://w.test/v1/sessions/s1/stream');
  assert.deepEqual(states, ['connecting', 'open', 'reconnecting', 'reconnecting', 'open', 'closed']);
});

test('a silent connection (no ping) is treated as broken and reopened', async () => {
  const { client: c, requests } = client([
    () => sse([chunk(1, 'run_started', { turn: 1 })], { then: 'hang' }),
    () => sse([': ping\n\n', frame(2, 'end', {})]),
  ]);
  const events = await collect(c.session('s1').events({ ...fast, idleTimeoutMs: 50 }));
  assert.deepEqual(events.map((e) => e.seq), [1, 2]);
  assert.equal(requests.length, 2);
});

test('a stream that closes after the end of a session that already ended stops', async () => {
  const { client: c, requests } = client([
    () => sse([]),
    () => json(200, { sessionId: 's1', status: 'completed' }),
  ]);
  assert.deepEqual(await collect(c.session('s1').events({ ...fast, after: 9 })), []);
  assert.equal(requests[1].url, 'http://w.test/v1/sessions/s1');
});

test('an error the client cannot fix is thrown, typed, without retrying', async () => {
  const { client: c, remaining } = client([
    () => json(401, { error: { code: 'unauthorized', message: 'Missing token.', retryable: false } }),
    () => sse([frame(1, 'end', {})]),
  ]);
  await assert.rejects(collect(c.session('s1').events(fast)), (e) => {
    assert.ok(e instanceof HttpError);
    assert.equal(e.status, 401);
    assert.equal(e.code, 'unauthorized');
    assert.equal(e.retryable, false);
    return true;
  });
  assert.equal(remaining(), 1);
});

test('a malformed frame is a protocol error; maxRetries bounds a stream that keeps failing', async () => {
  const bad = client([() => sse(['id: 1\nevent: chunk\ndata: {oops\n\n'])]);
  await assert.rejects(collect(bad.client.session('s1').events(fast)), ProtocolError);
  const down = client([() => Promise.reject(new TypeError('down')), () => Promise.reject(new TypeError('down'))]);
  await assert.rejects(collect(down.client.session('s1').events({ ...fast, maxRetries: 1 })), /down/);
});

test('close() and an aborted signal end the iteration', async () => {
  const { client: c } = client([() => sse([chunk(1, 'run_started', { turn: 1 })], { then: 'hang' })]);
  const ac = new AbortController();
  const seen = [];
  for await (const e of c.session('s1').events({ signal: ac.signal })) {
    seen.push(e.seq);
    ac.abort();
  }
  assert.deepEqual(seen, [1]);
});

test('the callback form delivers the same events', async () => {
  const { client: c } = client([() => sse([chunk(1, 'text_delta', { delta: 'x' }), frame(2, 'fail', { error: { code: 'e', message: 'm', retryable: false } })])]);
  const seen = [];
  await new Promise((resolve, reject) => c.session('s1').subscribe((e) => seen.push(e.type), { onEnd: resolve, onError: reject }));
  assert.deepEqual(seen, ['text_delta', 'fail']);
});

test('an answer that is the run\'s stream: followed, then resumed from x-helix-after when it broke before any event', async () => {
  const { client: c, requests } = client([
    // The follow-up's answer: its run's stream after event 7, broken before an event.
    () => sse([': ping\n\n'], { then: 'error', headers: { 'x-helix-run-id': 'r2', 'x-helix-after': '7', 'x-helix-queued': 'false' } }),
    () => sse([chunk(8, 'run_started', { turn: 2 }), frame(9, 'end', {})]),
  ]);
  const { runId, queued, events } = await c.session('s1').sendStreaming('more', fast);
  assert.deepEqual([runId, queued], ['r2', false]);
  assert.deepEqual((await collect(events)).map((e) => e.seq), [8, 9]);
  assert.deepEqual(requests.map((r) => [r.method, r.url, r.headers.accept, r.headers['last-event-id']]), [
    ['POST', 'http://w.test/v1/sessions/s1/messages', 'text/event-stream', undefined],
    ['GET', 'http://w.test/v1/sessions/s1/stream', 'text/event-stream', '7'],
  ]);
  assert.deepEqual(JSON.parse(requests[0].body), { message: 'more' });
});

test('start: the create\'s answer is the first run\'s stream, the session\'s fields from its headers', async () => {
  const { client: c, requests } = client([
    () => sse([chunk(1, 'run_started', { turn: 1 }), frame(2, 'end', {})], {
      headers: { 'x-helix-session-id': 's1', 'x-helix-run-id': 'r1', 'x-helix-status': 'active',
        'x-helix-stream-url': '/v1/sessions/s1/stream?token=t1', 'x-helix-session-token': 't1', 'x-helix-after': '0' },
    }),
  ]);
  const { session, created, events } = await c.start({ agent: 'a', input: 'hi' });
  assert.deepEqual(created, { sessionId: 's1', runId: 'r1', status: 'active', streamUrl: '/v1/sessions/s1/stream?token=t1', sessionToken: 't1' });
  assert.deepEqual([session.id, session.token], ['s1', 't1']);
  assert.deepEqual((await collect(events)).map((e) => e.type), ['run_started', 'end']);
  assert.equal(requests.length, 1);
  assert.equal(requests[0].headers.accept, 'text/event-stream');
});

test('a refused streamed answer is thrown, typed; closing a stream never read cancels its answer', async () => {
  let cancelled = false;
  const { client: c } = client([
    () => json(409, { error: { code: 'session_busy', message: 'busy', retryable: true } }),
    () => new Response(new ReadableStream({ cancel() { cancelled = true; } }), { headers: { 'content-type': 'text/event-stream', 'x-helix-after': '3' } }),
  ]);
  await assert.rejects(c.session('s1').sendStreaming('x'), (e) => e instanceof HttpError && e.code === 'session_busy');
  const stream = await c.session('s1').answerStreaming({ kind: 'approval-response', toolCallId: 'c1', approved: true });
  assert.equal(stream.lastSequence, 3);
  stream.close();
  await new Promise((r) => setTimeout(r, 5));
  assert.ok(cancelled, 'the answer\'s body was cancelled');
});
