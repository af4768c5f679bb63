// Auth (SPEC §2) and the stateless resume of a suspended session across a full restart
// of wrangler dev. (The store conformance suite on the platform is conformance.test.mjs.)

import { after, before, beforeEach, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { API_TOKEN, api, startWithMock, waitFor } from './client.mjs';
import { startWorker } from './harness.mjs';

let worker;
let llm;
before(async () => { ({ worker, llm } = await startWithMock()); });
after(async () => { await worker?.stop(); await llm?.close(); worker?.cleanup(); });
beforeEach(() => llm?.reset());

test('auth fails closed: 401 without or with bad credentials, 403 with another session\'s token', async () => {
  const none = await api(worker, 'GET', '/v1/agents', undefined, null);
  assert.deepEqual([none.status, none.body.error.code], [401, 'unauthorized']);
  assert.equal((await api(worker, 'GET', '/v1/agents', undefined, 'wrong')).status, 401);
  llm.push({ text: 'a' }, { text: 'b' });
  const a = await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: `auth-a-${process.pid}`, input: 'hi' });
  const b = await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: `auth-b-${process.pid}`, input: 'hi' });
  assert.equal(a.status, 201);
  const own = await api(worker, 'GET', `/v1/sessions/${a.body.sessionId}`, undefined, a.body.sessionToken);
  assert.equal(own.status, 200, 'a session token opens its session');
  const other = await api(worker, 'GET', `/v1/sessions/${b.body.sessionId}`, undefined, a.body.sessionToken);
  assert.deepEqual([other.status, other.body.error.code], [403, 'forbidden']);
  const list = await api(worker, 'GET', '/v1/agents', undefined, a.body.sessionToken);
  assert.equal(list.status, 403, 'a session token is not full access');
  // Accepted only exactly as issued: the same tag in upper case is another string.
  const token = a.body.sessionToken;
  const respelled = token.slice(0, token.lastIndexOf(':')) + token.slice(token.lastIndexOf(':')).toUpperCase();
  assert.notEqual(respelled, token, 'the tag has a letter');
  const upper = await api(worker, 'GET', `/v1/sessions/${a.body.sessionId}`, undefined, respelled);
  assert.deepEqual([upper.status, upper.body.error.code], [401, 'unauthorized'], 'an upper-case tag');
  const viaQuery = await worker.fetch(`/v1/sessions/${a.body.sessionId}?token=${encodeURIComponent(a.body.sessionToken)}`);
  assert.equal(viaQuery.status, 200, '?token= works for EventSource clients');
  const health = await worker.fetch('/healthz');
  assert.equal(health.status, 200, 'healthz needs no credentials');
});

test('a session token opens no route of another session, and no route rewrites a transcript', async () => {
  llm.push({ text: 'a' }, { text: 'b' });
  const a = await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: `own-a-${process.pid}`, input: 'hi' });
  const b = await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: `own-b-${process.pid}`, input: 'hi' });
  const other = `/v1/sessions/${b.body.sessionId}`;
  await waitFor(worker, b.body.sessionId, (s) => s.status === 'completed');
  const before = await api(worker, 'GET', other);
  const routes = [
    ['GET', ''], ['GET', '/messages'], ['GET', '/stream'], ['GET', '/runs'], ['GET', '/checkpoints'],
    ['POST', '/tool-results', { kind: 'approval-response', toolCallId: 'x', approved: true }],
    ['POST', '/messages', { message: 'hijack' }], ['POST', '/interrupt', {}], ['POST', '/resume', {}],
    ['POST', '/abort', {}], ['POST', '/retry', {}],
  ];
  for (const [method, path, body] of routes) {
    const res = await api(worker, method, other + path, body, a.body.sessionToken);
    assert.deepEqual([res.status, res.body.error?.code], [403, 'forbidden'], `${method} ${path}`);
    const tampered = a.body.sessionToken.slice(0, -2) + (a.body.sessionToken.endsWith('A') ? 'BB' : 'AA');
    const bad = await api(worker, method, `/v1/sessions/${a.body.sessionId}${path}`, body, tampered);
    assert.equal(bad.status, 401, `a tampered token: ${method} ${path}`);
  }
  // The transcript is the server's: nothing writes it but runs.
  for (const method of ['PUT', 'PATCH', 'DELETE']) {
    const res = await api(worker, method, `${other}/messages`, { messages: [] });
    assert.equal(res.status, 405, method);
  }
  assert.deepEqual((await api(worker, 'GET', other)).body, before.body, 'nothing changed');
  const msgs = await api(worker, 'GET', `${other}/messages`);
  assert.deepEqual(msgs.body.messages.map((m) => m.role), ['user', 'assistant']);
});

test('bad input gets a 4xx JSON error, never a 5xx', async () => {
  const cases = [
    ['POST', '/v1/sessions', '{not json', 400],
    ['POST', '/v1/sessions', { agent: 'assistant' }, 400],
    ['POST', '/v1/sessions', { agent: 'nope', input: 'x' }, 404],
    ['POST', '/v1/sessions', { agent: 'assistant', sessionId: '../etc', input: 'x' }, 400],
    ['POST', '/v1/sessions', { agent: 'assistant', sessionId: 'x'.repeat(129), input: 'x' }, 400],
    ['GET', '/v1/sessions/a%20b', undefined, 400],
    ['POST', '/v1/sessions', 'x'.repeat(1024 * 1024 + 1), 413],
    ['GET', '/v1/sessions/nope-unknown/messages?limit=9999', undefined, 400],
  ];
  for (const [method, path, body, status] of cases) {
    const res = await api(worker, method, path, body);
    assert.equal(res.status, status, `${method} ${path}: ${JSON.stringify(res.body).slice(0, 200)}`);
    assert.equal(typeof res.body.error.code, 'string');
  }
  const id = `dup-${process.pid}`;
  llm.push({ text: 'x' });
  assert.equal((await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input: 'x' })).status, 201);
  const dup = await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input: 'x' });
  assert.deepEqual([dup.status, dup.body.error.code], [409, 'session_exists']);
});

test('an unconfigured deployment answers 503 auth_not_configured', async () => {
  const bare = await startWorker({ vars: { API_TOKEN: '', ALLOW_UNAUTHENTICATED: 'false' } });
  try {
    const res = await api(bare, 'GET', '/v1/agents', undefined, null);
    assert.deepEqual([res.status, res.body.error.code], [503, 'auth_not_configured']);
  } finally {
    await bare.stop();
    bare.cleanup();
  }
});

test('a suspended session survives a full restart and completes after approval', async () => {
  const id = `restart-${process.pid}`;
  llm.push({ calls: [{ name: 'delete_file', args: { path: '/tmp/x' } }] }, { text: 'Deleted after the restart.' });
  assert.equal((await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input: 'delete /tmp/x' })).status, 201);
  const s = await waitFor(worker, id, (x) => x.pendingToolCalls.length === 1);
  const persistDir = worker.persistDir;
  await worker.stop();
  worker = (await startWithMockAt(persistDir));
  const again = await api(worker, 'GET', `/v1/sessions/${id}`);
  assert.deepEqual(again.body.pendingToolCalls, s.pendingToolCalls, 'the suspension is durable');
  const res = await api(worker, 'POST', `/v1/sessions/${id}/tool-results`,
    { kind: 'approval-response', toolCallId: s.pendingToolCalls[0].toolCallId, approved: true });
  assert.equal(res.status, 202);
  const done = await waitFor(worker, id, (x) => x.status === 'completed');
  assert.equal(done.stepCount, 2);
  const msgs = await api(worker, 'GET', `/v1/sessions/${id}/messages`);
  assert.equal(msgs.body.messages.at(-1).content, 'Deleted after the restart.');
});

/** Restarts the worker on the same state, still pointed at the same mock model. */
async function startWithMockAt(persistDir) {
  return startWorker({
    persistDir,
    vars: { API_TOKEN, LLM_PROVIDER: 'openai', LLM_BASE_URL: llm.url, LLM_API_KEY: 'test-key' },
  });
}

/** POSTs 8 MiB of JSON text in 64 KiB chunks with no length to `path`: the answer.
 *  (Written whole: a body that ends early, or never, makes the proxy of `wrangler dev`
 *  restart the worker or hold its answer.) */
function chunkedOnce(path, token) {
  return new Promise((resolve, reject) => {
    const url = new URL(worker.baseUrl + path);
    const headers = { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) };
    const req = http.request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers }, (res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve({ status: res.statusCode, body: JSON.parse(body) }));
    });
    req.on('error', reject);
    // The server answers before it reads the body and closes with the rest unsent: the
    // writes still queued then fail on the socket after the answer was read, when the
    // request no longer listens to it. That failure is expected; the answer is asserted.
    req.on('socket', (socket) => socket.on('error', () => {}));
    const chunk = Buffer.alloc(64 * 1024, 'x');
    req.write('{"message":"');
    for (let i = 0; i < 128; i++) req.write(chunk);
    req.end('"}');
  });
}

/**
 * `chunkedOnce`, again when the connection was reset: a server that answers before
 * reading a body closes with the client's bytes unread, and the reset this sends can
 * reach the client before it has read the answer (TCP drops what it had received).
 * What is asserted is the answer itself.
 */
async function chunked(path, token) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await chunkedOnce(path, token);
    } catch (err) {
      if (err.code !== 'ECONNRESET' || attempt === 3) throw err;
    }
  }
}

test('a body is read only after the credential holds, and no further than the limit (chunked, no length)', async () => {
  // 8 MiB with no length: read first, any of them would be refused as too large (413).
  const nobody = await chunked('/v1/chat');
  assert.deepEqual([nobody.status, nobody.body?.error?.code], [401, 'unauthorized'], 'refused before its body is read');
  const forged = await chunked('/v1/sessions/x/messages', 'not-a-token');
  assert.equal(forged.status, 401, 'a forged token: refused before its body is read');
  const large = await chunked(`/v1/sessions/chunked-${process.pid}/messages`, API_TOKEN);
  assert.deepEqual([large.status, large.body?.error?.code], [413, 'payload_too_large'], 'stopped at 1 MiB');
});
