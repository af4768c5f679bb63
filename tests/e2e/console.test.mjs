// The browser console in a real browser (Debian's chromium, driven by puppeteer-core):
// with the demo model and no credentials, start a session, see the approval card,
// reload mid-session and reattach, approve from the keyboard, and see the run complete
// with the note in the state tree — on a phone-sized screen; a session's schedules and
// its queue of waiting messages. The final page is saved as .e2e/artifacts/console.png.
// The reference worker serves it as static assets.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { launchBrowser, pageErrors } from './browser.mjs';
import { api } from './client.mjs';
import { ROOT, startWorker } from './harness.mjs';

let worker;
let browser;
before(async () => {
  browser = await launchBrowser();
  worker = await startWorker({ vars: { API_TOKEN: '', ALLOW_UNAUTHENTICATED: 'true', LLM_PROVIDER: '' } });
});
after(async () => {
  await browser?.close();
  await worker?.stop();
  worker?.cleanup();
});

const text = (page, selector) => page.$eval(selector, (el) => el.textContent);

test('the console: start, approval card, reload and reattach, approve, completed state', async () => {
  const page = await browser.newPage();
  await page.setViewport({ width: 400, height: 900 });
  const errors = pageErrors(page);

  const res = await page.goto(`${worker.baseUrl}/`);
  assert.equal(res.status(), 200);
  assert.match(res.headers()['content-security-policy'], /script-src 'self'/);
  await page.waitForSelector('#agent option[value="assistant"]');

  await page.type('#first-message', 'note buy milk; delete /tmp/x');
  await page.click('#new-session button[type=submit]');
  await page.waitForFunction(() => document.querySelector('#pending h3')?.textContent === 'Approve delete_file?');
  const id = new URL(page.url()).searchParams.get('session');
  assert.match(id, /^s_/);
  assert.equal(await text(page, '#session-label'), id);
  assert.match(await text(page, '#transcript'), /note buy milk; delete \/tmp\/x/);
  assert.match(await text(page, '#status'), /waiting for you \(1 call\)/);

  // Reload mid-session: the page reattaches to the same session, the card is back.
  await page.reload();
  await page.waitForFunction(() => document.querySelector('#pending h3')?.textContent === 'Approve delete_file?');
  assert.equal(new URL(page.url()).searchParams.get('session'), id);
  assert.equal(await text(page, '#session-label'), id);
  await page.waitForFunction(() => document.querySelector('#connection')?.textContent === 'Live');
  assert.match(await text(page, '#state'), /buy milk/);

  // Approve from the keyboard: type a reason, press Enter in the card's form.
  await page.focus('#pending input');
  await page.keyboard.type('ok');
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => /Status: completed/.test(document.querySelector('#status')?.textContent ?? ''));
  await page.waitForFunction(() => document.querySelectorAll('#pending .card').length === 0);
  assert.match(await text(page, '#state'), /text: "buy milk"/);
  await page.waitForFunction(() => /delete_file returned/.test(document.querySelector('#transcript')?.textContent ?? ''));
  await page.waitForFunction(() => /turn 1 · completed/.test(document.querySelector('#runs')?.textContent ?? ''));
  assert.ok((await page.$$('#checkpoints li')).length >= 2);
  // The first checkpoint opens the session as it was there, beside its state now.
  await page.click('#checkpoints li:first-child button');
  await page.waitForFunction(() => /At step \d+/.test(document.querySelector('#checkpoint h3')?.textContent ?? ''));
  const past = await text(page, '#checkpoint');
  assert.match(past, /Then[\s\S]*Now/);
  assert.match(past, /Changed since[\s\S]*add \/notes\/- \{"text":"buy milk"\}/);
  // And the transcript the agent had seen by then: the request, not what came after.
  const then = await text(page, '#checkpoint ol[aria-label="Transcript then"]');
  assert.match(then, /note buy milk; delete \/tmp\/x/);
  assert.doesNotMatch(then, /delete_file returned/);

  // The server agrees with what the page shows.
  const session = await api(worker, 'GET', `/v1/sessions/${id}`, undefined, null);
  assert.equal(session.body.status, 'completed');
  assert.deepEqual(session.body.state, { notes: [{ text: 'buy milk' }] });

  // A phone-sized screen: nothing wider than the viewport.
  assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth));
  const dir = join(ROOT, '.e2e', 'artifacts');
  mkdirSync(dir, { recursive: true });
  await page.screenshot({ path: join(dir, 'console.png'), fullPage: true });
  assert.deepEqual(errors, []);
  await page.close();
});

test('a follow-up message, a client tool answered in its form, and a session opened by id', async () => {
  const page = await browser.newPage();
  await page.setViewport({ width: 1200, height: 900 });
  await page.goto(`${worker.baseUrl}/`);
  await page.waitForSelector('#agent option[value="assistant"]');
  await page.type('#first-message', 'what time is it');
  await page.click('#new-session button[type=submit]');
  await page.waitForFunction(() => /Status: completed/.test(document.querySelector('#status')?.textContent ?? ''));
  const id = new URL(page.url()).searchParams.get('session');

  await page.type('#message', 'ask me something');
  await page.keyboard.press('Enter');
  await page.waitForSelector('#pending .card input');
  assert.match(await text(page, '#pending'), /ask_user asks/);
  await page.type('#pending .card input', 'blue');
  await page.click('#pending .card button[type=submit]');
  await page.waitForFunction(() => /Status: completed/.test(document.querySelector('#status')?.textContent ?? ''));
  await page.waitForFunction(() => /ask_user returned/.test(document.querySelector('#transcript')?.textContent ?? ''));
  await page.waitForFunction(() => /turn 2 · completed/.test(document.querySelector('#runs')?.textContent ?? ''));

  // Another tab opens the session by its id.
  const other = await browser.newPage();
  await other.goto(`${worker.baseUrl}/`);
  await other.type('#session-id', id);
  await other.click('#open-session button[type=submit]');
  await other.waitForFunction(() => /ask_user returned/.test(document.querySelector('#transcript')?.textContent ?? ''));
  assert.equal(await text(other, '#session-label'), id);
  await other.close();
  await page.close();
});

test('Abort from the console ends a session that waits for an approval', async () => {
  const page = await browser.newPage();
  const errors = pageErrors(page);
  await page.goto(`${worker.baseUrl}/`);
  await page.waitForSelector('#agent option[value="assistant"]');
  await page.type('#first-message', 'delete /tmp/y');
  await page.click('#new-session button[type=submit]');
  await page.waitForFunction(() => document.querySelector('#pending h3')?.textContent === 'Approve delete_file?');
  const id = new URL(page.url()).searchParams.get('session');
  await page.click('#abort');
  await page.waitForFunction(() => /Status: aborted/.test(document.querySelector('#status')?.textContent ?? ''));
  await page.waitForFunction(() => document.querySelectorAll('#pending .card').length === 0);
  const session = await api(worker, 'GET', `/v1/sessions/${id}`, undefined, null);
  assert.equal(session.body.status, 'aborted');
  assert.deepEqual(session.body.pendingToolCalls, []);
  assert.deepEqual(errors, []);
  await page.close();
});

test('a session\'s schedules and queue: a message queued while an approval waits, a schedule cancelled and one added', async () => {
  const page = await browser.newPage();
  await page.setViewport({ width: 1200, height: 900 });
  const errors = pageErrors(page);
  await page.goto(`${worker.baseUrl}/`);
  await page.waitForSelector('#agent option[value="assistant"]');
  await page.type('#first-message', 'delete /tmp/z');
  await page.click('#new-session button[type=submit]');
  await page.waitForFunction(() => document.querySelector('#pending h3')?.textContent === 'Approve delete_file?');
  const id = new URL(page.url()).searchParams.get('session');
  const made = await api(worker, 'POST', `/v1/sessions/${id}/schedules`, { every: 3_600, message: 'hourly check' }, null);
  assert.equal(made.status, 201);
  await page.reload();
  await page.waitForFunction(() => /every 3600 s .*hourly check/.test(document.querySelector('#schedules')?.textContent ?? ''));
  assert.equal(await page.$eval('#schedules-section', (el) => el.hidden), false);

  // A follow-up while the run waits on the approval: queued, shown as waiting.
  await page.type('#message', 'and then this');
  await page.select('#when-busy', 'enqueue');
  await page.click('#follow-up button[type=submit]');
  await page.waitForFunction(() => /and then this/.test(document.querySelector('#queue')?.textContent ?? ''));
  await page.waitForFunction(() => /Message queued \(enqueue, place 1\)/.test(document.querySelector('#transcript')?.textContent ?? ''));

  // Cancel the hourly schedule; add one from the form.
  // The list is drawn again whenever the queue changes (the follow-up's answer and its
  // stream notice each refresh it): the button is found and clicked in one step.
  await page.$eval(`#schedule-${made.body.scheduleId} button`, (button) => button.click());
  await page.waitForFunction(() => !/hourly check/.test(document.querySelector('#schedules')?.textContent ?? ''));
  await page.type('#schedule-every', '7200');
  await page.type('#schedule-message', 'every two hours');
  await page.click('#new-schedule button[type=submit]');
  await page.waitForFunction(() => /every 7200 s .*every two hours/.test(document.querySelector('#schedules')?.textContent ?? ''));
  const listed = (await api(worker, 'GET', `/v1/sessions/${id}/schedules`, undefined, null)).body;
  assert.deepEqual(listed.schedules.map((s) => s.every), [7_200]);

  // Approved, the run ends and the queued message runs: the queue empties.
  await page.click('#pending .card button[type=submit]');
  await page.waitForFunction(() => /turn 2 · completed/.test(document.querySelector('#runs')?.textContent ?? ''), { timeout: 30_000 });
  await page.waitForFunction(() => document.querySelectorAll('#queue li').length === 0);
  const texts = (await api(worker, 'GET', `/v1/sessions/${id}/messages`, undefined, null)).body.messages
    .filter((m) => m.role === 'user').map((m) => m.content);
  assert.deepEqual(texts, ['delete /tmp/z', 'and then this']);
  assert.deepEqual(errors, []);
  await page.close();
});

test('the console is served as static assets: its files with their headers, not its sources', async () => {
  for (const [path, type] of [['/', 'text/html'], ['/console.js', 'text/javascript'], ['/console.css', 'text/css']]) {
    const res = await worker.fetch(path);
    assert.equal(res.status, 200, path);
    assert.match(res.headers.get('content-type'), new RegExp(`^${type}`), path);
    assert.match(res.headers.get('content-security-policy'), /^default-src 'none'; script-src 'self';/, path);
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff', path);
    await res.arrayBuffer();
  }
  for (const path of ['/src/main.ts', '/build.mjs', '/tsconfig.json', '/_headers', '/.assetsignore']) {
    const res = await worker.fetch(path);
    assert.equal(res.status, 404, `${path} is not served`);
    await res.arrayBuffer();
  }
});

test('the committed console.js is the build of the current sources', async () => {
  const { execFileSync } = await import('node:child_process');
  const { readFileSync, rmSync } = await import('node:fs');
  const out = join(ROOT, '.e2e', 'console-build.js');
  execFileSync(process.execPath, [join(ROOT, 'crates', 'helix-edge', 'console', 'build.mjs'), '--out', out]);
  const fresh = readFileSync(out, 'utf8');
  rmSync(out);
  assert.equal(fresh, readFileSync(join(ROOT, 'crates', 'helix-edge', 'console', 'console.js'), 'utf8'),
    'run `node crates/helix-edge/console/build.mjs` and commit console.js');
});
