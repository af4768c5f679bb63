// The console on a worker that needs a token, with the mock model: the token form
// (the API answers 401 until a token is given; the token is kept in the tab only),
// then Interrupt during a step and Resume from the buttons.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { launchBrowser, pageErrors } from './browser.mjs';
import { API_TOKEN, api, startWithMock } from './client.mjs';

let worker;
let llm;
let browser;
before(async () => {
  browser = await launchBrowser();
  ({ worker, llm } = await startWithMock());
});
after(async () => {
  await browser?.close();
  await worker?.stop();
  await llm?.close();
  worker?.cleanup();
});

/** Presses a button of the page (a DOM click: the transcript can move it while it streams). */
const press = (page, selector) => page.$eval(selector, (b) => b.click());

const statusIs = (page, status) =>
  page.waitForFunction((s) => (document.querySelector('#status')?.textContent ?? '').startsWith(`Status: ${s}`), {}, status);

test('the token form, then Interrupt during a step and Resume', async () => {
  const page = await browser.newPage();
  const errors = pageErrors(page);
  await page.goto(`${worker.baseUrl}/`);
  // No token yet: the agents cannot be listed; the page says so and opens the token form.
  await page.waitForFunction(() => /\(unauthorized\)$/.test(document.querySelector('#notice')?.textContent ?? ''));
  assert.equal(await page.$eval('#auth', (d) => d.open), true);
  await page.type('#token', API_TOKEN);
  await page.keyboard.press('Enter');
  await page.waitForSelector('#agent option[value="assistant"]');
  assert.equal(await page.evaluate(() => sessionStorage.getItem('helix-edge.token')), API_TOKEN);
  assert.equal(await page.$eval('#token', (i) => i.value), '', 'the field does not keep the token');

  // A first step slow enough to interrupt: one tool call streamed over ~2 s.
  llm.push({ calls: [{ name: 'add_note', args: { text: 'slow' } }], chunkDelayMs: 400 }, { text: 'Noted.' });
  await page.type('#first-message', 'note slow');
  await page.click('#new-session button[type=submit]');
  await statusIs(page, 'active');
  await press(page, '#interrupt');
  await statusIs(page, 'interrupted');
  const id = new URL(page.url()).searchParams.get('session');
  assert.equal((await api(worker, 'GET', `/v1/sessions/${id}`)).body.status, 'interrupted');

  await press(page, '#resume');
  await statusIs(page, 'completed');
  await page.waitForFunction(() => /Noted\./.test(document.querySelector('#transcript')?.textContent ?? ''));
  const session = (await api(worker, 'GET', `/v1/sessions/${id}`)).body;
  assert.equal(session.status, 'completed');
  assert.deepEqual(session.state.notes, [{ text: 'slow' }]);
  // The 401 of the first agents request is the only error the page logged.
  assert.ok(errors.every((e) => /401/.test(e)), errors.join('\n'));
  await page.close();
});
