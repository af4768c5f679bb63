// The console's Inbox in Chromium, for an approver signed in with their identity
// provider's token (HS256 here): a payment another user of their tenant asks for
// appears in their inbox within the replication lag, without a reload, and they approve
// it there; it runs once and names them. Their own sessions list shows none of the
// requester's.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { launchBrowser, pageErrors } from './browser.mjs';
import { api, startWithMock, waitFor } from './client.mjs';

const ISSUER = 'https://id.example.test';
const AUDIENCE = 'helix-edge-e2e';
const SECRET = 'e2e-console-inbox-secret-32-bytes!!';
const b64 = (v) => Buffer.from(JSON.stringify(v)).toString('base64url');
const now = () => Math.floor(Date.now() / 1000);
function token(sub, org, roles = []) {
  const input = `${b64({ alg: 'HS256', typ: 'JWT' })}.${b64({ iss: ISSUER, aud: AUDIENCE, sub, org, roles, iat: now(), exp: now() + 900 })}`;
  return `${input}.${createHmac('sha256', SECRET).update(input).digest('base64url')}`;
}

let worker;
let llm;
let browser;
before(async () => {
  browser = await launchBrowser();
  ({ worker, llm } = await startWithMock({
    JWT_ISSUER: ISSUER, JWT_AUDIENCE: AUDIENCE, JWT_ALGORITHMS: 'HS256', JWT_SECRET: SECRET,
    JWT_TENANT_CLAIM: 'org', JWT_TENANT_SHARING: 'false', JWT_ROLES_CLAIM: 'roles',
  }));
});
after(async () => {
  await browser?.close();
  await worker?.stop();
  await llm?.close();
  worker?.cleanup();
});

test('an approver\'s inbox shows another user\'s new payment live and approves it', async () => {
  const ann = token('ann', 'acme');
  const bob = token('bob', 'acme', ['finance']);
  const page = await browser.newPage();
  const errors = pageErrors(page);
  await page.setViewport({ width: 1280, height: 900 });
  await page.goto(`${worker.baseUrl}/`);
  await page.waitForFunction(() => /\(unauthorized\)$/.test(document.querySelector('#notice')?.textContent ?? ''));
  await page.type('#token', bob);
  await page.keyboard.press('Enter');
  await page.waitForSelector('#nav-inbox:not([hidden])');
  await page.click('#nav-inbox');
  await page.waitForFunction(() => /Nothing waits on you/.test(document.querySelector('#inbox-list')?.textContent ?? ''));

  // Ann asks for a payment; Bob's open inbox shows it without a reload.
  const id = `inbox-ui-${process.pid}`;
  llm.push({ calls: [{ name: 'pay_invoice', args: { invoice: 'INV-42', amount_cents: 4200 } }] });
  const created = await api(worker, 'POST', '/v1/sessions', { agent: 'treasurer', sessionId: id, input: 'pay INV-42' }, ann);
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const asked = Date.now();
  await page.waitForSelector('.inbox-item', { timeout: 20_000 });
  console.log(`the approval reached the approver's inbox ${Date.now() - asked} ms after the request`);
  const card = await page.$eval('.inbox-item', (c) => c.textContent);
  assert.match(card, /pay_invoice/);
  assert.match(card, /INV-42/);
  assert.match(card, /finance/);
  assert.equal(await page.$eval('#inbox-count', (c) => c.textContent), '1');

  llm.push({ text: 'Paid INV-42.' });
  await page.type('.inbox-item input', 'within budget');
  await page.$eval('.inbox-item button.primary', (b) => b.click());
  await page.waitForFunction(() => /Nothing waits on you/.test(document.querySelector('#inbox-list')?.textContent ?? ''), { timeout: 20_000 });
  const done = await waitFor(worker, id, (s) => s.status === 'completed', 15_000, ann);
  assert.equal(done.status, 'completed');
  const messages = (await api(worker, 'GET', `/v1/sessions/${id}/messages?limit=100`, undefined, ann)).body.messages;
  const paid = messages.filter((m) => m.role === 'tool' && m.toolName === 'pay_invoice');
  assert.equal(paid.length, 1, 'it ran once');
  assert.deepEqual(paid[0].metadata?.decidedBy, { subject: 'bob', tenant: 'acme' });

  // Bob's sessions list has none of Ann's.
  await page.click('#nav-sessions');
  await page.waitForSelector('#session-list .empty');
  assert.doesNotMatch(await page.$eval('#session-list', (l) => l.textContent), new RegExp(id));
  assert.ok(errors.every((e) => /401/.test(e)), errors.join('\n'));
  await page.close();
});
