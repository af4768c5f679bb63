// Who reaches what, route by route (feature `users`, SPEC §2c): two tenants × two users
// (one of each holding the `finance` role), each owning a session that waits on an
// approval, with tokens from a key set (RS256) an issuer on loopback serves, keys made
// per run. Every session route is tried by every user and every session token on every
// session: the owner's answer is the one every user of the tenant gets (tenant members
// share by default), everyone else gets 404 `session_not_found` and a session token 403
// off its session — and nothing of a session changes across a boundary. The inbox shows
// each user exactly the calls they may answer and follows an answer; a payment whose
// approval needs `finance` is refused to its owner and answered by a holder, once;
// tokens that fail a check are 401. Prints the matrix's counts.

import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { generateKeyPairSync, createHmac, sign } from 'node:crypto';
import { api, replicated, startWithMock, waitFor } from './client.mjs';

const ISSUER = 'https://id.example.test';
const AUDIENCE = 'helix-edge-e2e';
const b64 = (v) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');
const now = () => Math.floor(Date.now() / 1000);

const running = [];
after(async () => {
  for (const close of running.reverse()) await close();
});

/** An issuer on loopback: its key set, and tokens signed with its key (or another). */
async function issuer() {
  const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const other = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
  const jwk = { ...publicKey.export({ format: 'jwk' }), kid: 'k1', alg: 'RS256', use: 'sig' };
  const server = http.createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ keys: [jwk] }));
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  running.push(() => new Promise((r) => server.close(r)));
  const claims = (sub, extra) => ({ iss: ISSUER, aud: AUDIENCE, sub, iat: now(), exp: now() + 900, ...extra });
  const rs256 = (payload, key = privateKey) => {
    const input = `${b64({ alg: 'RS256', typ: 'JWT', kid: 'k1' })}.${b64(payload)}`;
    return `${input}.${sign('sha256', Buffer.from(input), key).toString('base64url')}`;
  };
  return {
    url: `http://127.0.0.1:${server.address().port}/jwks`,
    token: (sub, org, roles = []) => rs256(claims(sub, { org, roles })),
    bad: (sub, org) => ({
      'signed with another key': rs256(claims(sub, { org }), other),
      expired: rs256(claims(sub, { org, exp: now() - 3600 })),
      'for another audience': rs256(claims(sub, { org, aud: 'someone-else' })),
      'alg none': `${b64({ alg: 'none', typ: 'JWT' })}.${b64(claims(sub, { org }))}.`,
      'HS256 keyed with the public key': (() => {
        const input = `${b64({ alg: 'HS256', typ: 'JWT', kid: 'k1' })}.${b64(claims(sub, { org }))}`;
        const pem = publicKey.export({ format: 'pem', type: 'spki' });
        return `${input}.${createHmac('sha256', pem).update(input).digest('base64url')}`;
      })(),
    }),
  };
}

/** Every session route, as tried on session `id`: a request that changes nothing when it
 * is let in (a bad body, an unknown call or checkpoint, a busy session), or a read. */
function routes(id) {
  const bad = { reason: 5 };
  return [
    ['GET', `/v1/sessions/${id}`],
    ['GET', `/v1/sessions/${id}/messages`],
    ['GET', `/v1/sessions/${id}/runs`],
    ['GET', `/v1/sessions/${id}/checkpoints`],
    ['GET', `/v1/sessions/${id}/checkpoints/cp_none`],
    ['GET', `/v1/sessions/${id}/schedules`],
    ['GET', `/v1/sessions/${id}/stream`, undefined, 'stream'],
    ['POST', `/v1/sessions/${id}/messages`, { message: 'while you wait' }],
    ['POST', `/v1/sessions/${id}/tool-results`, { kind: 'approval-response', toolCallId: 'call_none', approved: true }],
    ['POST', `/v1/sessions/${id}/interrupt`, bad],
    ['POST', `/v1/sessions/${id}/resume`, bad],
    ['POST', `/v1/sessions/${id}/abort`, bad],
    ['POST', `/v1/sessions/${id}/retry`, { checkpointId: 5 }],
    ['POST', `/v1/sessions/${id}/fork`, { checkpointId: 5 }],
    ['POST', `/v1/sessions/${id}/plans/validate`, { plan: 5 }],
    ['POST', `/v1/sessions/${id}/schedules`, { message: 5 }],
    ['DELETE', `/v1/sessions/${id}/schedules/sch_none`],
  ];
}

/** A route's answer as [status, error code]; a stream's once its head arrives. */
async function tryRoute(worker, [method, path, body, kind], token) {
  if (kind !== 'stream') {
    const res = await api(worker, method, path, body, token);
    return [res.status, res.body?.error?.code ?? null];
  }
  const stop = new AbortController();
  const res = await fetch(worker.baseUrl + path, { headers: { authorization: `Bearer ${token}` }, signal: stop.signal });
  const code = res.headers.get('content-type')?.includes('json') ? (await res.json()).error?.code : null;
  stop.abort();
  return [res.status, code];
}

test('every route, every user and session token, every session: the tenant\'s answer or 404; nothing crosses', async () => {
  const keys = await issuer();
  const { worker, llm } = await startWithMock({
    JWT_ISSUER: ISSUER, JWT_AUDIENCE: AUDIENCE, JWT_ALGORITHMS: 'RS256', JWT_JWKS_URL: keys.url,
    JWT_TENANT_CLAIM: 'org', JWT_ROLES_CLAIM: 'roles',
  });
  running.push(async () => { await worker.stop(); await llm.close(); worker.cleanup(); });
  const users = {
    ann: { org: 'acme', token: keys.token('ann', 'acme', ['finance']) },
    bob: { org: 'acme', token: keys.token('bob', 'acme') },
    cy: { org: 'globex', token: keys.token('cy', 'globex', ['finance']) },
    dan: { org: 'globex', token: keys.token('dan', 'globex') },
  };
  const sessions = {};
  for (const [name, user] of Object.entries(users)) {
    const id = `m-${name}-${process.pid}`;
    llm.push({ calls: [{ name: 'delete_file', args: { path: `/tmp/${name}` } }] });
    const created = await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input: 'go' }, user.token);
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const waiting = await waitFor(worker, id, (s) => s.pendingToolCalls.length === 1, 15_000, user.token);
    sessions[name] = { id, owner: name, org: user.org, sessionToken: created.body.sessionToken, call: waiting.pendingToolCalls[0].toolCallId };
  }
  const before = {};
  for (const s of Object.values(sessions)) before[s.id] = (await api(worker, 'GET', `/v1/sessions/${s.id}`)).body;

  const counts = {};
  const count = (status) => { counts[status] = (counts[status] ?? 0) + 1; };
  for (const target of Object.values(sessions)) {
    for (const route of routes(target.id)) {
      const own = await tryRoute(worker, route, users[target.owner].token);
      count(own[0]);
      assert.notDeepEqual(own, [404, 'session_not_found'], `the owner reaches ${route[0]} ${route[1]}`);
      for (const [name, user] of Object.entries(users)) {
        if (name === target.owner) continue;
        const got = await tryRoute(worker, route, user.token);
        count(got[0]);
        const expected = user.org === target.org ? own : [404, 'session_not_found'];
        assert.deepEqual(got, expected, `${name} on ${target.owner}'s: ${route[0]} ${route[1]}`);
      }
      for (const other of Object.values(sessions)) {
        const got = await tryRoute(worker, route, other.sessionToken);
        count(got[0]);
        const expected = other.id === target.id ? own : [403, 'forbidden'];
        assert.deepEqual(got, expected, `${other.owner}'s session token on ${target.owner}'s: ${route[0]} ${route[1]}`);
      }
    }
  }
  // A deletion by anyone who does not reach the session changes nothing.
  for (const target of Object.values(sessions)) {
    for (const [name, user] of Object.entries(users)) {
      if (user.org === target.org) continue;
      const res = await api(worker, 'DELETE', `/v1/sessions/${target.id}`, undefined, user.token);
      count(res.status);
      assert.deepEqual([res.status, res.body.error?.code], [404, 'session_not_found'], `${name} deleting ${target.owner}'s`);
    }
  }
  for (const s of Object.values(sessions)) {
    const after = (await api(worker, 'GET', `/v1/sessions/${s.id}`)).body;
    assert.deepEqual(after, before[s.id], `${s.owner}'s session is as it was`);
  }
  const total = Object.values(counts).reduce((a, b) => a + b, 0);
  console.log(`users matrix: ${total} requests: ${Object.entries(counts).sort().map(([s, n]) => `${n} × ${s}`).join(', ')}`);
  assert.ok(counts[404] > 0 && counts[403] > 0 && counts[200] > 0);

  // Lists and the inbox: exactly what each reaches, then an answer takes a call out.
  for (const s of Object.values(sessions)) {
    await replicated(worker, s.id);
  }
  const ours = new Set(Object.values(sessions).map((s) => s.id));
  const inbox = async (token) => (await api(worker, 'GET', '/v1/inbox?limit=100', undefined, token)).body.items
    .filter((i) => ours.has(i.sessionId)).map((i) => i.toolCallId).sort();
  const listed = async (token) => (await api(worker, 'GET', '/v1/sessions?limit=100', undefined, token)).body.sessions
    .map((s) => s.sessionId).filter((id) => ours.has(id)).sort();
  const reachable = (org) => Object.values(sessions).filter((s) => s.org === org);
  for (const [name, user] of Object.entries(users)) {
    assert.deepEqual(await inbox(user.token), reachable(user.org).map((s) => s.call).sort(), `${name}'s inbox`);
    assert.deepEqual(await listed(user.token), reachable(user.org).map((s) => s.id).sort(), `${name}'s list`);
  }
  llm.push({ text: 'Deleted.' });
  const answered = await api(worker, 'POST', `/v1/sessions/${sessions.ann.id}/tool-results`,
    { kind: 'approval-response', toolCallId: sessions.ann.call, approved: true }, users.bob.token);
  assert.equal(answered.status, 202, 'a tenant member answers a shared session\'s call');
  await waitFor(worker, sessions.ann.id, (s) => s.status === 'completed');
  await replicated(worker, sessions.ann.id);
  assert.deepEqual(await inbox(users.ann.token), [sessions.bob.call], 'the answered call left the inbox');

  // A payment: its approval needs `finance`, never its requester's.
  const pay = `m-pay-${process.pid}`;
  llm.push({ calls: [{ name: 'pay_invoice', args: { invoice: 'INV-9', amount_cents: 900 } }] });
  assert.equal((await api(worker, 'POST', '/v1/sessions', { agent: 'treasurer', sessionId: pay, input: 'pay' }, users.ann.token)).status, 201);
  const waiting = await waitFor(worker, pay, (s) => s.pendingToolCalls.length === 1, 15_000, users.ann.token);
  const call = waiting.pendingToolCalls[0].toolCallId;
  const approve = (token) => api(worker, 'POST', `/v1/sessions/${pay}/tool-results`, { kind: 'approval-response', toolCallId: call, approved: true }, token);
  assert.deepEqual((await approve(users.ann.token)).status, 403, 'the requester, though in finance');
  assert.deepEqual((await approve(users.bob.token)).status, 403, 'a member without the role');
  assert.deepEqual((await approve(users.cy.token)).body.error?.code, 'session_not_found', 'another tenant\'s holder');
  const ok = keys.token('eli', 'acme', ['finance']);
  llm.push({ text: 'Paid.' });
  assert.equal((await approve(ok)).status, 202, 'a holder of the tenant');
  await waitFor(worker, pay, (s) => s.status === 'completed');
  const messages = (await api(worker, 'GET', `/v1/sessions/${pay}/messages?limit=100`)).body.messages;
  const paid = messages.filter((m) => m.role === 'tool' && m.toolName === 'pay_invoice');
  assert.equal(paid.length, 1, 'it ran once');
  assert.deepEqual(paid[0].metadata?.decidedBy, { subject: 'eli', tenant: 'acme' });

  // Tokens that fail a check: 401, nothing done.
  for (const [why, token] of Object.entries(keys.bad('ann', 'acme'))) {
    const res = await api(worker, 'GET', `/v1/sessions/${sessions.ann.id}`, undefined, token);
    assert.deepEqual([res.status, res.body.error?.code], [401, 'unauthorized'], why);
    const made = await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: `m-bad-${process.pid}`, input: 'x' }, token);
    assert.equal(made.status, 401, why);
  }
  assert.equal((await api(worker, 'GET', `/v1/sessions/m-bad-${process.pid}`)).status, 404, 'nothing was created');
});
