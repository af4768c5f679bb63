// Notifications and decision links (SPEC §2d) against the real worker: a waiting
// approval notifies a real webhook receiver on loopback — signed the Standard Webhooks
// way, checked here with the documented recipe —, is retried after a 500 with the same
// idempotency key, and is followed by `call.resolved`; the link's GET shows the call and
// decides nothing (twice, as a mail scanner would), its POST decides once; an expired or
// altered link decides nothing; an approval nobody decides by its deadline is denied;
// in Chromium, the page shows the call and its button decides, once.

import { after, before, beforeEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { createServer } from 'node:http';
import { HelixClient } from '@helix-edge/client';
import { API_TOKEN, api, startWithMock, waitFor } from './client.mjs';
import { launchBrowser, pageErrors } from './browser.mjs';

const SECRET = `whsec_${Buffer.from('e2e-webhook-secret-0123456789').toString('base64')}`;

/** A webhook receiver: records every request; answers each with the next planned status. */
async function startReceiver() {
  const received = [];
  const plan = [];
  const server = createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = Buffer.concat(chunks).toString();
    received.push({ at: Date.now(), headers: req.headers, body, json: JSON.parse(body) });
    res.writeHead(plan.shift() ?? 200).end();
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${server.address().port}/hook`,
    received,
    plan,
    close: () => new Promise((r) => server.close(r)),
    async until(pred, timeoutMs = 15_000) {
      const start = Date.now();
      while (Date.now() - start < timeoutMs) {
        const found = received.filter(pred);
        if (found.length > 0) return found;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`no such notification; got ${received.map((r) => r.json.type).join(',')}`);
    },
  };
}

/** The Standard Webhooks recipe: HMAC-SHA256 of `{id}.{timestamp}.{body}` with the secret's key. */
function verify({ headers, body }) {
  const key = Buffer.from(SECRET.slice('whsec_'.length), 'base64');
  const signed = `${headers['webhook-id']}.${headers['webhook-timestamp']}.${body}`;
  const expected = `v1,${createHmac('sha256', key).update(signed).digest('base64')}`;
  return headers['webhook-signature'] === expected;
}

let worker;
let llm;
let receiver;
before(async () => {
  receiver = await startReceiver();
  // delete_file's approvals are denied when nobody decides within 10 s.
  ({ worker, llm } = await startWithMock({
    NOTIFY_WEBHOOK_URL: receiver.url, NOTIFY_WEBHOOK_SECRET: SECRET, APPROVAL_DEADLINE_MS: '10000',
  }));
});
after(async () => { await worker?.stop(); await llm?.close(); await receiver?.close(); worker?.cleanup(); });
beforeEach(() => llm?.reset());

let n = 0;
const newId = (name) => `${name}-${process.pid}-${++n}`;
const page = async (path, init) => {
  const res = await fetch(`${worker.baseUrl}${path}`, init);
  return { status: res.status, type: res.headers.get('content-type'), csp: res.headers.get('content-security-policy'), html: await res.text() };
};
const decide = (path, reason) => page(path, {
  method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' },
  body: reason === undefined ? '' : `reason=${encodeURIComponent(reason)}`,
});

test('a waiting approval notifies the sink, signed, retried after a 500; its link shows on GET and decides once on POST', async () => {
  const id = newId('notified');
  receiver.plan.push(500); // the sink's first answer fails
  llm.push({ calls: [{ name: 'delete_file', args: { path: '/n' } }] }, { text: 'Deleted.' });
  const created = await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input: 'delete /n' });
  assert.equal(created.status, 201);
  const tries = await receiver.until((r) => r.json.session.id === id && r.json.type === 'call.waiting' && r !== receiver.received.find((x) => x.json.session.id === id));
  const all = receiver.received.filter((r) => r.json.session.id === id && r.json.type === 'call.waiting');
  assert.equal(all.length, 2, 'the failed try, then the retry');
  const [first, retry] = all;
  assert.equal(first.headers['webhook-id'], retry.headers['webhook-id'], 'one idempotency key');
  assert.ok(retry.at - first.at >= 900, `retried after the backoff: ${retry.at - first.at} ms`);
  assert.equal(first.body, retry.body, 'the same body every time');
  for (const r of all) assert.ok(verify(r), 'signed with the documented recipe');
  assert.ok(!verify({ ...first, body: `${first.body} ` }), 'a changed body fails the check');
  const event = tries[0].json;
  assert.equal(event.id, first.headers['webhook-id']);
  assert.deepEqual([event.session.agent, event.call.toolName, event.call.kind], ['assistant', 'delete_file', 'approval']);
  assert.deepEqual(event.call.arguments, { path: '/n' });
  assert.equal(event.links.session, `/v1/sessions/${id}`);
  assert.match(event.links.approve, /^\/v1\/decisions\/[\w-]+\.[\w-]+$/);

  // Opening the link (twice: a mail scanner, then the person) decides nothing.
  for (let i = 0; i < 2; i++) {
    const shown = await page(event.links.approve);
    assert.equal(shown.status, 200);
    assert.match(shown.type, /^text\/html/);
    assert.match(shown.csp, /default-src 'none'/);
    assert.match(shown.html, /delete_file/);
    assert.match(shown.html, /<form method=post>/);
  }
  const still = await api(worker, 'GET', `/v1/sessions/${id}`);
  assert.equal(still.body.pendingToolCalls.length, 1, 'still waiting after the GETs');

  const approved = await decide(event.links.approve, 'fine');
  assert.equal(approved.status, 200, approved.html);
  assert.match(approved.html, /Approved/);
  const again = await decide(event.links.approve);
  assert.equal(again.status, 409, 'a second use decides nothing');
  const deny = await decide(event.links.deny);
  assert.equal(deny.status, 409, 'nor does the other link');
  const done = await waitFor(worker, id, (s) => s.status === 'completed');
  assert.equal(done.pendingToolCalls.length, 0);
  const messages = (await api(worker, 'GET', `/v1/sessions/${id}/messages`)).body.messages;
  const results = messages.filter((m) => m.role === 'tool');
  assert.equal(results.length, 1, 'the tool ran once');
  assert.deepEqual(results[0].content, { deleted: '/n' });
  assert.deepEqual(results[0].metadata?.decidedBy, { subject: 'decision-link' }, 'the channel is recorded');

  const [resolved] = await receiver.until((r) => r.json.session.id === id && r.json.type === 'call.resolved');
  assert.equal(resolved.json.call.toolCallId, event.call.toolCallId);
  assert.ok(verify(resolved));
  assert.equal(resolved.json.links.approve, undefined, 'no decision once resolved');

  const listed = await api(worker, 'GET', `/v1/sessions/${id}/notifications`);
  assert.equal(listed.status, 200);
  assert.equal(listed.body.sinks, 1);
  const byType = Object.fromEntries(listed.body.notifications.map((x) => [x.type, x]));
  assert.deepEqual([byType['call.waiting'].state, byType['call.waiting'].attempts, byType['call.waiting'].status], ['sent', 2, 200]);
  assert.equal(byType['call.waiting'].id, event.id);
  assert.equal(byType['call.waiting'].sink, new URL(receiver.url).origin, "the sink's origin only");
  assert.equal(byType['call.resolved'].state, 'sent');
  const viaClient = await new HelixClient({ baseUrl: worker.baseUrl, token: API_TOKEN }).session(id).notifications();
  assert.deepEqual(viaClient, listed.body);
});

test('a deny link tells the model why; an altered or expired link decides nothing', async () => {
  const id = newId('denied');
  llm.push({ calls: [{ name: 'delete_file', args: { path: '/d' } }] }, { text: 'I will not.' });
  await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input: 'delete /d' });
  const [{ json: event }] = await receiver.until((r) => r.json.session.id === id && r.json.type === 'call.waiting');
  const token = event.links.deny.split('/').pop();
  const [payload, tag] = token.split('.');
  // Altered: the approve link's payload under the deny link's tag.
  const approvePayload = event.links.approve.split('/').pop().split('.')[0];
  assert.equal((await page(`/v1/decisions/${approvePayload}.${tag}`)).status, 404);
  assert.equal((await decide(`/v1/decisions/${approvePayload}.${tag}`)).status, 404);
  // Expired: the same call and verdict, signed as the deployment signs, an hour ago.
  // (The fields: session, call, since, verdict, expiry.)
  const fields = Buffer.from(payload, 'base64url').toString().split('\0');
  assert.deepEqual(fields.slice(0, 2), [id, event.call.toolCallId]);
  fields[4] = String(Math.floor(Date.now() / 1000) - 3600);
  const old = Buffer.from(fields.join('\0')).toString('base64url');
  const mac = createHmac('sha256', API_TOKEN).update('helix-edge/decision-link/v1\0').update(old).digest('base64url');
  assert.equal((await page(`/v1/decisions/${old}.${mac}`)).status, 410);
  assert.equal((await decide(`/v1/decisions/${old}.${mac}`)).status, 410);
  assert.equal((await api(worker, 'GET', `/v1/sessions/${id}`)).body.pendingToolCalls.length, 1, 'nothing decided');

  const denied = await decide(event.links.deny, 'not that file');
  assert.equal(denied.status, 200, denied.html);
  assert.match(denied.html, /Denied/);
  await waitFor(worker, id, (s) => s.status === 'completed');
  const told = llm.requests.at(-1).body.messages.at(-1);
  assert.equal(told.role, 'tool');
  assert.equal(JSON.parse(told.content).reason, 'not that file');
});

test('an unknown session has no notifications to list', async () => {
  const missing = await api(worker, 'GET', '/v1/sessions/nobody-here/notifications');
  assert.equal(missing.status, 404);
  assert.equal(missing.body.error.code, 'session_not_found');
});

test('an approval nobody decides by its deadline is denied, the model told why; its link then decides nothing', async () => {
  const id = newId('deadline');
  llm.push({ calls: [{ name: 'delete_file', args: { path: '/late' } }] }, { text: 'Nobody approved.' });
  const started = Date.now();
  await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input: 'delete /late' });
  const [{ json: event }] = await receiver.until((r) => r.json.session.id === id && r.json.type === 'call.waiting');
  const waiting = await api(worker, 'GET', `/v1/sessions/${id}`);
  const deadline = waiting.body.pendingToolCalls[0].deadline;
  assert.ok(deadline >= started + 9_000 && deadline <= Date.now() + 10_000, `deadline ${deadline - started} ms after the start`);
  assert.equal(event.call.deadline, deadline, 'the notification names it');
  const done = await waitFor(worker, id, (s) => s.status === 'completed', 30_000);
  assert.ok(Date.now() >= deadline, 'not before its deadline');
  assert.equal(done.pendingToolCalls.length, 0);
  const told = llm.requests.at(-1).body.messages.at(-1);
  assert.equal(told.role, 'tool');
  assert.equal(JSON.parse(told.content).reason, 'Nobody decided within the approval\'s deadline (10 s).');
  const messages = (await api(worker, 'GET', `/v1/sessions/${id}/messages`)).body.messages;
  assert.deepEqual(messages.find((m) => m.role === 'tool').metadata?.decidedBy, { subject: 'deadline' });
  assert.equal((await decide(event.links.approve)).status, 409, 'too late to approve');
  await receiver.until((r) => r.json.session.id === id && r.json.type === 'call.resolved');
});

test('in a browser, the link shows the call and its button decides, once', async () => {
  const id = newId('browser');
  llm.push({ calls: [{ name: 'delete_file', args: { path: '/b' } }] }, { text: 'Deleted.' });
  await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input: 'delete /b' });
  const [{ json: event }] = await receiver.until((r) => r.json.session.id === id && r.json.type === 'call.waiting');
  const browser = await launchBrowser();
  try {
    const page = await browser.newPage();
    const errors = pageErrors(page);
    const shown = await page.goto(`${worker.baseUrl}${event.links.approve}`);
    assert.equal(shown.status(), 200);
    assert.equal(await page.title(), 'Approve delete_file?');
    assert.match(await page.$eval('pre', (e) => e.textContent), /"\/b"/);
    const waiting = await api(worker, 'GET', `/v1/sessions/${id}`);
    assert.equal(waiting.body.pendingToolCalls.length, 1, 'opening the page decided nothing');
    await page.type('input[name=reason]', 'ok from the browser');
    const [decided] = await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
    assert.equal(decided.status(), 200);
    assert.equal(await page.title(), 'Approved');
    await waitFor(worker, id, (s) => s.status === 'completed');
    assert.deepEqual(errors, [], 'the pages load without an error');
    // Back and submit again (a double click, a reload): refused, nothing runs twice.
    const again = await page.goto(`${worker.baseUrl}${event.links.approve}`);
    assert.equal(again.status(), 409);
    const messages = (await api(worker, 'GET', `/v1/sessions/${id}/messages`)).body.messages;
    assert.equal(messages.filter((m) => m.role === 'tool').length, 1);
  } finally {
    await browser.close();
  }
});
