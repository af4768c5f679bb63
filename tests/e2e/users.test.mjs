// Users of the deployment's identity provider (feature `users`, SPEC §2c): bearer JWTs
// checked against a shared secret (HS256) or a key set served on loopback (RS256), the
// user owning what they create — children and forks included — and reaching nothing
// else: every other session answers 404 `session_not_found`, the list and the inbox
// show only theirs, tenants share where the deployment names a tenant claim. The API
// token keeps full access. Tokens are signed here with node:crypto, per run.

import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { readFileSync } from 'node:fs';
import { createHmac, generateKeyPairSync, sign } from 'node:crypto';
import { api, replicated, startWithMock, waitFor } from './client.mjs';
import { openStream } from './sse.mjs';
import { logged } from './harness.mjs';

const running = [];
after(async () => {
  for (const { worker, llm } of running) {
    await worker.stop();
    await llm.close();
    worker.cleanup();
  }
});

const ISSUER = 'https://id.example.test';
const AUDIENCE = 'helix-edge-e2e';
const SECRET = 'e2e-users-secret-of-at-least-32-bytes!';
const b64 = (v) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');
const now = () => Math.floor(Date.now() / 1000);

function claims(sub, extra = {}) {
  return { iss: ISSUER, aud: AUDIENCE, sub, iat: now(), exp: now() + 600, ...extra };
}

function hs256(payload, { secret = SECRET, header = {} } = {}) {
  const input = `${b64({ alg: 'HS256', typ: 'JWT', ...header })}.${b64(payload)}`;
  return `${input}.${createHmac('sha256', secret).update(input).digest('base64url')}`;
}

async function start(vars) {
  const started = await startWithMock(vars);
  running.push(started);
  return started;
}

test('a user owns what they create and reaches nothing else; the API token reaches all', async () => {
  const { worker, llm } = await start({
    JWT_ISSUER: ISSUER, JWT_AUDIENCE: AUDIENCE, JWT_ALGORITHMS: 'HS256', JWT_SECRET: SECRET,
  });
  const ann = hs256(claims('ann'));
  const bob = hs256(claims('bob'));
  const id = `users-${process.pid}`;
  llm.push({ calls: [{ name: 'delete_file', args: { path: '/tmp/ann' } }] });
  const created = await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input: 'go' }, ann);
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const waiting = await waitFor(worker, id, (s) => s.pendingToolCalls.length === 1, 15_000, ann);
  const call = waiting.pendingToolCalls[0].toolCallId;
  assert.deepEqual(waiting.owner, { subject: 'ann' }, 'the session view names its owner');

  // Bob reaches none of it: every route answers as for a session that does not exist.
  const missing = await api(worker, 'GET', `/v1/sessions/never-${process.pid}`, undefined, bob);
  assert.deepEqual([missing.status, missing.body.error.code], [404, 'session_not_found']);
  for (const [method, path, body] of [
    ['GET', `/v1/sessions/${id}`],
    ['GET', `/v1/sessions/${id}/messages`],
    ['GET', `/v1/sessions/${id}/stream`],
    ['GET', `/v1/sessions/${id}/checkpoints`],
    ['POST', `/v1/sessions/${id}/tool-results`, { kind: 'approval-response', toolCallId: call, approved: true }],
    ['POST', `/v1/sessions/${id}/abort`, {}],
    ['POST', `/v1/sessions/${id}/fork`, {}],
    ['DELETE', `/v1/sessions/${id}`],
  ]) {
    const res = await api(worker, method, path, body, bob);
    const same = missing.body.error.message.replace(`never-${process.pid}`, id);
    assert.deepEqual([res.status, res.body.error?.code, res.body.error?.message], [404, 'session_not_found', same], `${method} ${path}`);
  }
  assert.equal((await api(worker, 'GET', `/v1/sessions/${id}`)).status, 200, 'the API token reaches it');
  assert.equal((await api(worker, 'GET', `/v1/sessions/${id}`, undefined, created.body.sessionToken)).status, 200, 'and its session token');

  // Lists and the inbox: each user's own (D1, once replicated).
  await replicated(worker, id);
  const listed = async (token) => (await api(worker, 'GET', '/v1/sessions?limit=100', undefined, token)).body.sessions.map((s) => s.sessionId);
  assert.ok((await listed(ann)).includes(id));
  assert.ok(!(await listed(bob)).includes(id));
  assert.ok((await listed()).includes(id), 'the API token lists every session');
  const annsByOwner = (await api(worker, 'GET', '/v1/sessions?owner=ann&limit=100')).body.sessions;
  assert.ok(annsByOwner.length > 0 && annsByOwner.every((s) => s.owner?.subject === 'ann'), 'the API token filters by owner');
  assert.ok(annsByOwner.some((s) => s.sessionId === id));
  assert.deepEqual((await api(worker, 'GET', '/v1/sessions?owner=ann', undefined, bob)).body.sessions, [], 'not past what Bob reaches');
  const inbox = async (token) => (await api(worker, 'GET', '/v1/inbox', undefined, token)).body.items.map((i) => i.toolCallId);
  assert.deepEqual(await inbox(ann), [call]);
  assert.deepEqual(await inbox(bob), []);
  assert.equal((await api(worker, 'GET', '/v1/schedules', undefined, ann)).status, 403, 'every schedule is the API token\'s');

  // Ann answers; her fork is hers, not Bob's.
  llm.push({ text: 'Deleted.' });
  const approved = await api(worker, 'POST', `/v1/sessions/${id}/tool-results`, { kind: 'approval-response', toolCallId: call, approved: true }, ann);
  assert.equal(approved.status, 202, JSON.stringify(approved.body));
  await waitFor(worker, id, (s) => s.status === 'completed', 15_000, ann);
  const fork = await api(worker, 'POST', `/v1/sessions/${id}/fork`, { sessionId: `${id}-fork` }, ann);
  assert.equal(fork.status, 201, JSON.stringify(fork.body));
  assert.equal((await api(worker, 'GET', `/v1/sessions/${id}-fork`, undefined, ann)).status, 200);
  assert.equal((await api(worker, 'GET', `/v1/sessions/${id}-fork`, undefined, bob)).status, 404);

  // A child belongs to its root's owner.
  const tree = `${id}-tree`;
  llm.push(
    { calls: [{ name: 'research', args: { topic: 'owls' } }] },
    { calls: [{ name: '__finish__', args: { summary: 'owls hoot' } }] },
    { text: 'Owls hoot.' },
  );
  assert.equal((await api(worker, 'POST', '/v1/sessions', { agent: 'coordinator', sessionId: tree, input: 'owls' }, ann)).status, 201);
  const done = await waitFor(worker, tree, (s) => s.status === 'completed', 15_000, ann);
  assert.equal(done.status, 'completed');
  const sse = await openStream(`${worker.baseUrl}/v1/sessions/${tree}/stream`, { headers: { authorization: `Bearer ${ann}` } });
  const events = await sse.until((e) => e.type === 'end');
  const child = events.find((e) => e.type === 'subagent_start')?.json.subSessionId;
  assert.ok(child, 'the child started');
  assert.equal((await api(worker, 'GET', `/v1/sessions/${child}`, undefined, ann)).status, 200);
  assert.equal((await api(worker, 'GET', `/v1/sessions/${child}`, undefined, bob)).status, 404);

  // A chat a user starts is theirs.
  const chatId = `${id}-chat`;
  llm.push({ text: 'Hello, Ann.' });
  const chat = await fetch(`${worker.baseUrl}/v1/chat`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ann}`, 'content-type': 'application/json' },
    body: JSON.stringify({ id: chatId, agent: 'assistant', trigger: 'submit-message',
      messages: [{ id: 'm1', role: 'user', parts: [{ type: 'text', text: 'hi' }] }] }),
  });
  assert.equal(chat.status, 200);
  await chat.text();
  assert.equal((await api(worker, 'GET', `/v1/sessions/${chatId}`, undefined, ann)).status, 200);
  assert.equal((await api(worker, 'GET', `/v1/sessions/${chatId}`, undefined, bob)).status, 404);

  // A user named past ASCII (and their tenant) is told to the object intact.
  const jurgen = hs256(claims('jürgen 😀'));
  llm.push({ text: 'Grüezi.' });
  const greeted = await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: `${id}-u`, input: 'hi' }, jurgen);
  assert.equal(greeted.status, 201, JSON.stringify(greeted.body));
  assert.equal((await api(worker, 'GET', `/v1/sessions/${id}-u`, undefined, jurgen)).status, 200);
  assert.equal((await api(worker, 'GET', `/v1/sessions/${id}-u`, undefined, hs256(claims('jürgen')))).status, 404);

  // Tokens that fail a check are 401, with nothing created.
  for (const [why, token] of [
    ['another secret', hs256(claims('ann'), { secret: `${SECRET}-other` })],
    ['expired', hs256(claims('ann', { exp: now() - 3600 }))],
    ['another audience', hs256(claims('ann', { aud: 'someone-else' }))],
    ['another issuer', hs256(claims('ann', { iss: 'https://evil.example' }))],
    ['alg none', `${b64({ alg: 'none', typ: 'JWT' })}.${b64(claims('ann'))}.`],
    ['no subject', hs256({ ...claims('ann'), sub: undefined })],
    ['a critical extension (RFC 7515 §4.1.11)', hs256(claims('ann'), { header: { crit: ['exp'] } })],
  ]) {
    const res = await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: `${id}-bad`, input: 'go' }, token);
    assert.deepEqual([res.status, res.body.error?.code], [401, 'unauthorized'], why);
  }
  assert.equal((await api(worker, 'GET', `/v1/sessions/${id}-bad`)).status, 404, 'nothing was created');
});

test('with a tenant claim and a key set (RS256), a tenant\'s users share its sessions', async (t) => {
  const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = { ...publicKey.export({ format: 'jwk' }), kid: 'k1', alg: 'RS256', use: 'sig' };
  let fetched = 0;
  const jwks = http.createServer((req, res) => {
    fetched++;
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ keys: [jwk] }));
  });
  await new Promise((r) => jwks.listen(0, '127.0.0.1', r));
  t.after(() => jwks.close());
  const rs256 = (payload) => {
    const input = `${b64({ alg: 'RS256', typ: 'JWT', kid: 'k1' })}.${b64(payload)}`;
    return `${input}.${sign('sha256', Buffer.from(input), privateKey).toString('base64url')}`;
  };
  const { worker, llm } = await start({
    JWT_ISSUER: ISSUER, JWT_AUDIENCE: AUDIENCE, JWT_ALGORITHMS: 'RS256',
    JWT_JWKS_URL: `http://127.0.0.1:${jwks.address().port}/jwks`, JWT_TENANT_CLAIM: 'org',
  });
  const ann = rs256(claims('ann', { org: 'acme' }));
  const cy = rs256(claims('cy', { org: 'acme' }));
  const dan = rs256(claims('dan', { org: 'other' }));
  const id = `tenants-${process.pid}`;
  llm.push({ text: 'Hi.' });
  const created = await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input: 'hi' }, ann);
  assert.equal(created.status, 201, JSON.stringify(created.body));
  await waitFor(worker, id, (s) => s.status === 'completed', 15_000, ann);
  assert.equal((await api(worker, 'GET', `/v1/sessions/${id}`, undefined, cy)).status, 200, 'the tenant\'s');
  assert.equal((await api(worker, 'GET', `/v1/sessions/${id}`, undefined, dan)).status, 404, 'another tenant\'s');
  assert.ok(fetched >= 1 && fetched <= 2, `the key set is fetched once and kept: ${fetched}`);
  // HS256 is not accepted here: a secret never checks what a key set should.
  const forged = hs256(claims('ann', { org: 'acme' }), { header: { kid: 'k1' } });
  assert.equal((await api(worker, 'GET', `/v1/sessions/${id}`, undefined, forged)).status, 401);
});

test('with JWT_TENANT_SHARING=false a tenant\'s users keep to their own sessions, within the tenant', async () => {
  const { worker, llm } = await start({
    JWT_ISSUER: ISSUER, JWT_AUDIENCE: AUDIENCE, JWT_ALGORITHMS: 'HS256', JWT_SECRET: SECRET,
    JWT_TENANT_CLAIM: 'org', JWT_TENANT_SHARING: 'false',
  });
  const ann = hs256(claims('ann', { org: 'acme' }));
  const id = `apart-${process.pid}`;
  llm.push({ text: 'Hi.' });
  const created = await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input: 'hi' }, ann);
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const done = await waitFor(worker, id, (s) => s.status === 'completed', 15_000, ann);
  assert.deepEqual(done.owner, { subject: 'ann', tenant: 'acme' });
  const cy = hs256(claims('cy', { org: 'acme' }));
  assert.equal((await api(worker, 'GET', `/v1/sessions/${id}`, undefined, cy)).status, 404, 'not shared in the tenant');
  const annElsewhere = hs256(claims('ann', { org: 'other' }));
  assert.equal((await api(worker, 'GET', `/v1/sessions/${id}`, undefined, annElsewhere)).status, 404, 'nor across tenants');
});

test('a payment needs a finance approver other than its requester: the owner is refused, a holder approves from the inbox, once', async () => {
  const { worker, llm } = await start({
    JWT_ISSUER: ISSUER, JWT_AUDIENCE: AUDIENCE, JWT_ALGORITHMS: 'HS256', JWT_SECRET: SECRET,
    // Tenant members keep to their own sessions: an approver reaches only what waits on them.
    JWT_TENANT_CLAIM: 'org', JWT_TENANT_SHARING: 'false', JWT_ROLES_CLAIM: 'roles',
  });
  const token = (sub, org, roles = []) => hs256(claims(sub, { org, roles }));
  const ann = token('ann', 'acme', ['finance']);
  const bob = token('bob', 'acme', ['finance']);
  const cy = token('cy', 'acme', ['ops']);
  const eve = token('eve', 'globex', ['finance']);
  const id = `treasury-${process.pid}`;
  llm.push({ calls: [{ name: 'pay_invoice', args: { invoice: 'INV-7', amount_cents: 12_000 } }] });
  const created = await api(worker, 'POST', '/v1/sessions', { agent: 'treasurer', sessionId: id, input: 'pay INV-7' }, ann);
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const waiting = await waitFor(worker, id, (s) => s.pendingToolCalls.length === 1, 15_000, ann);
  const [pending] = waiting.pendingToolCalls;
  assert.deepEqual(pending.approvers, { role: 'finance', notOwner: true });
  const answer = (who, approved = true) => api(worker, 'POST', `/v1/sessions/${id}/tool-results`,
    { kind: 'approval-response', toolCallId: pending.toolCallId, approved }, who);

  // Refused, with nothing changed: the owner (though in finance) and her session token
  // 403; a member without the role and another tenant's holder do not know it is there.
  for (const [who, credential, status, code] of [
    ['the owner', ann, 403, 'forbidden'],
    ['the session token', created.body.sessionToken, 403, 'forbidden'],
    ['a member without the role', cy, 404, 'session_not_found'],
    ['another tenant\'s holder', eve, 404, 'session_not_found'],
  ]) {
    const res = await answer(credential);
    assert.deepEqual([res.status, res.body.error?.code], [status, code], `${who}: ${JSON.stringify(res.body)}`);
  }
  const still = (await api(worker, 'GET', `/v1/sessions/${id}`, undefined, ann)).body;
  assert.deepEqual([still.status, still.pendingToolCalls.length], ['active', 1], 'still waiting');
  assert.equal((await api(worker, 'GET', `/v1/sessions/${id}`, undefined, bob)).status, 404, 'an approver answers, and reads nothing');

  // The inbox of every finance holder of the tenant has it (and its owner's).
  await replicated(worker, id);
  const inbox = async (who) => (await api(worker, 'GET', '/v1/inbox?tool=pay_invoice', undefined, who)).body.items;
  const [item] = await inbox(bob);
  assert.deepEqual([item?.sessionId, item?.toolCallId, item?.approvers?.role], [id, pending.toolCallId, 'finance']);
  assert.equal((await inbox(ann)).length, 1, 'the owner sees what waits in her session');
  assert.deepEqual([(await inbox(cy)).length, (await inbox(eve)).length], [0, 0]);

  llm.push({ text: 'Paid INV-7.' });
  const approved = await answer(bob);
  assert.equal(approved.status, 202, JSON.stringify(approved.body));
  assert.equal((await answer(bob, false)).status, 409, 'the first answer stands');
  await waitFor(worker, id, (s) => s.status === 'completed', 15_000, ann);

  const messages = (await api(worker, 'GET', `/v1/sessions/${id}/messages?limit=100`, undefined, ann)).body.messages;
  const results = messages.filter((m) => m.role === 'tool' && m.toolName === 'pay_invoice');
  assert.equal(results.length, 1, 'it ran once');
  assert.deepEqual(results[0].content, { paid: 'INV-7', amountCents: 12_000 });
  assert.deepEqual(results[0].metadata?.decidedBy, { subject: 'bob', tenant: 'acme' }, 'the transcript names the approver');
  const sse = await openStream(`${worker.baseUrl}/v1/sessions/${id}/stream`, { headers: { authorization: `Bearer ${ann}` } });
  const events = await sse.until((e) => e.type === 'end');
  sse.close();
  const ended = events.find((e) => e.type === 'tool_end' && e.json.toolName === 'pay_invoice');
  assert.deepEqual(ended?.json.decidedBy, { subject: 'bob', tenant: 'acme' }, 'and so does its tool_end');
  const submitted = readFileSync(worker.logPath, 'utf8').split('\n').filter((l) => l.includes('"tool_call_submitted"'));
  assert.ok(submitted.some((l) => l.includes('"decidedBy":"bob"')), `and the log line: ${submitted.join('\n')}`);
});

test('what is wrong with the configuration, and where the keys are, go to the log, not to the caller', async () => {
  const hidden = 'keys-at-a-secret-path';
  const { worker } = await start({
    JWT_ISSUER: ISSUER, JWT_AUDIENCE: AUDIENCE, JWT_ALGORITHMS: 'RS256',
    JWT_JWKS_URL: `http://127.0.0.1:9/${hidden}`,
  });
  const rs256 = `${b64({ alg: 'RS256', typ: 'JWT', kid: 'k1' })}.${b64(claims('ann'))}.c2ln`;
  const res = await api(worker, 'GET', '/v1/agents', undefined, rs256);
  assert.deepEqual([res.status, res.body.error?.code], [503, 'auth_unavailable'], JSON.stringify(res.body));
  assert.doesNotMatch(JSON.stringify(res.body), new RegExp(`${hidden}|127\\.0\\.0\\.1`), 'no URL, no fetch error');
  await logged(worker, new RegExp(hidden)); // the operator finds it in the log

  const { worker: broken } = await start({ JWT_ISSUER: ISSUER, JWT_ALGORITHMS: 'HS256', JWT_SECRET: 'short' });
  const bad = await api(broken, 'GET', '/v1/agents', undefined, hs256(claims('ann')));
  assert.deepEqual([bad.status, bad.body.error?.code], [503, 'auth_not_configured'], JSON.stringify(bad.body));
  assert.doesNotMatch(bad.body.error.message, /JWT_|secret|audience/i, 'what is missing is not told to the caller');
  await logged(broken, /"auth_error"/);
});
