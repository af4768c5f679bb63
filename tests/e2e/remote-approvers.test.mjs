// An approval pending in a remote sub-agent's session obeys the approver rule at the
// parent, where it is answered (SPEC §2d): two real workers, the parent with users of
// an identity provider (HS256, a `finance` role claim, tenant-wide sharing), the remote
// reached with its API token, one scripted model for both. Ann's `dispatcher` session
// hands a payment to the remote `treasurer`, whose `pay_invoice` needs a finance holder
// other than the session's owner. Ann's session token and Ann herself (a finance
// holder, but the owner) are refused with 403 and nothing reaches the remote; Bob (finance,
// Ann's tenant) decides, and the remote records that Bob decided.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { api, waitFor } from './client.mjs';
import { startWorker } from './harness.mjs';
import { startMockLlm } from './mock-llm.mjs';
import { openStream } from './sse.mjs';

const PARENT_TOKEN = 'parent-token';
const REMOTE_TOKEN = 'remote-token';
const ISSUER = 'https://id.example.test';
const AUDIENCE = 'helix-edge-e2e';
const SECRET = 'e2e-remote-approvers-secret-32-bytes!';
const b64 = (v) => Buffer.from(JSON.stringify(v)).toString('base64url');
const now = () => Math.floor(Date.now() / 1000);

/** A user's token: `sub` of tenant acme with `roles`. */
function token(sub, roles) {
  const claims = { iss: ISSUER, aud: AUDIENCE, sub, tenant: 'acme', roles, iat: now(), exp: now() + 600 };
  const input = `${b64({ alg: 'HS256', typ: 'JWT' })}.${b64(claims)}`;
  return `${input}.${createHmac('sha256', SECRET).update(input).digest('base64url')}`;
}

let llm;
let remote;
let parent;
before(async () => {
  llm = await startMockLlm();
  // The dispatcher hands its input to the treasurer, which pays; then each says done.
  llm.respondWith((body) => {
    const system = body.messages?.[0]?.content ?? '';
    const last = body.messages?.at(-1) ?? {};
    if (last.role === 'tool') return { text: 'Done.' };
    if (system.startsWith('You are a treasurer')) {
      return { calls: [{ name: 'pay_invoice', args: { invoice: 'INV-7', amount_cents: 12000 } }] };
    }
    return { calls: [{ name: 'ask_treasurer', args: { task: String(last.content) } }] };
  });
  const model = { LLM_PROVIDER: 'openai', LLM_BASE_URL: llm.url, LLM_API_KEY: 'k' };
  remote = await startWorker({ vars: { API_TOKEN: REMOTE_TOKEN, ...model } });
  parent = await startWorker({
    vars: {
      API_TOKEN: PARENT_TOKEN,
      ...model,
      REMOTE_AGENT_URL: remote.baseUrl,
      REMOTE_AGENT_TOKEN: REMOTE_TOKEN,
      JWT_ISSUER: ISSUER,
      JWT_AUDIENCE: AUDIENCE,
      JWT_ALGORITHMS: 'HS256',
      JWT_SECRET: SECRET,
      JWT_TENANT_CLAIM: 'tenant',
      JWT_TENANT_SHARING: 'true',
      JWT_ROLES_CLAIM: 'roles',
    },
  });
});
after(async () => {
  await parent?.stop();
  await remote?.stop();
  await llm?.close();
  parent?.cleanup();
  remote?.cleanup();
});

test('a remote role-gated approval is decided at the parent only by whom its rule names', async () => {
  const ann = token('ann', ['finance']);
  const bob = token('bob', ['finance']);
  const id = `pay-${process.pid}`;
  const created = await api(parent, 'POST', '/v1/sessions', { agent: 'dispatcher', sessionId: id, input: 'pay INV-7' }, ann);
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const waiting = await waitFor(parent, id, (s) => s.pendingToolCalls.length > 0, 30_000, PARENT_TOKEN);
  const pending = waiting.pendingToolCalls[0];
  assert.equal(pending.toolName, 'pay_invoice');
  assert.deepEqual(pending.approvers, { role: 'finance', notOwner: true }, 'the parent lists who may decide');
  const stream = await openStream(`${parent.baseUrl}/v1/sessions/${id}/stream`, {
    headers: { authorization: `Bearer ${PARENT_TOKEN}` },
  });
  const events = await stream.until((e) => e.type === 'subagent_start');
  stream.close();
  const child = events.find((e) => e.type === 'subagent_start').json.subSessionId;
  const answer = (credential) => api(parent, 'POST', `/v1/sessions/${id}/tool-results`,
    { kind: 'approval-response', toolCallId: pending.toolCallId, approved: true }, credential);

  for (const [who, credential] of [['her session token', created.body.sessionToken], ['the owner herself', ann]]) {
    const refused = await answer(credential);
    assert.deepEqual([refused.status, refused.body.error?.code], [403, 'forbidden'], `${who}: ${JSON.stringify(refused.body)}`);
  }
  const untouched = await api(remote, 'GET', `/v1/sessions/${child}`, undefined, REMOTE_TOKEN);
  assert.equal(untouched.body.pendingToolCalls.length, 1, 'nothing reached the remote');

  const decided = await answer(bob);
  assert.deepEqual([decided.status, decided.body], [202, { accepted: true }], JSON.stringify(decided.body));
  const done = await waitFor(parent, id, (s) => s.status !== 'active', 30_000, PARENT_TOKEN);
  assert.equal(done.status, 'completed');
  const messages = (await api(remote, 'GET', `/v1/sessions/${child}/messages`, undefined, REMOTE_TOKEN)).body.messages;
  const paid = messages.find((m) => m.role === 'tool');
  assert.deepEqual(paid.metadata?.decidedBy, { subject: 'bob', tenant: 'acme' }, 'the remote knows who decided');
});

test('only the API token may name who decided an answer', async () => {
  const forged = await api(remote, 'POST', `/v1/sessions/nowhere-${process.pid}/tool-results`,
    { kind: 'approval-response', toolCallId: 'call_1', approved: true, decidedBy: { subject: 'mallory' } }, REMOTE_TOKEN);
  assert.equal(forged.status, 404, 'the field is read (an unknown session), not refused as unknown');
  const client = await api(remote, 'POST', `/v1/sessions/nowhere-${process.pid}/tool-results`,
    { kind: 'client-tool-result', toolCallId: 'call_1', result: 1, decidedBy: { subject: 'mallory' } }, REMOTE_TOKEN);
  assert.equal(client.status, 400, 'decidedBy belongs to approvals only');
});

test('a remote token never travels in the clear: plain http to another host fails the call, nothing sent', async () => {
  const clear = await startWorker({
    vars: {
      API_TOKEN: PARENT_TOKEN, LLM_PROVIDER: 'openai', LLM_BASE_URL: llm.url, LLM_API_KEY: 'k',
      REMOTE_AGENT_URL: 'http://remote.example.test', REMOTE_AGENT_TOKEN: REMOTE_TOKEN,
    },
  });
  try {
    const id = `clear-${process.pid}`;
    const created = await api(clear, 'POST', '/v1/sessions', { agent: 'dispatcher', sessionId: id, input: 'pay INV-8' }, PARENT_TOKEN);
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const done = await waitFor(clear, id, (s) => s.status !== 'active', 30_000, PARENT_TOKEN);
    assert.equal(done.status, 'completed');
    const messages = (await api(clear, 'GET', `/v1/sessions/${id}/messages`, undefined, PARENT_TOKEN)).body.messages;
    const failed = messages.find((m) => m.role === 'tool');
    assert.ok(failed.isError, JSON.stringify(failed));
    assert.equal(failed.content.code, 'subagent_remote_rejected');
    assert.match(failed.content.error ?? failed.content.message ?? JSON.stringify(failed.content), /in the clear/);
  } finally {
    await clear.stop();
    clear.cleanup();
  }
});
