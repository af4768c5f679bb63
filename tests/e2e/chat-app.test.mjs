// The example app (examples/chat-app: the AI SDK's framework-free chat in a page) built
// as CI builds it and driven in headless Chromium against the worker with the demo
// model: an approval answered from the page's button, and `ask_user` answered in its
// form — the AI SDK's own code paths in a real browser.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { launchBrowser, pageErrors } from './browser.mjs';
import { api, waitFor } from './client.mjs';
import { ROOT, freePort, startWorker } from './harness.mjs';

const APP = join(ROOT, 'examples', 'chat-app');
let worker;
let server;
let browser;
let base;

before(async () => {
  execFileSync(process.execPath, [join(APP, 'build.mjs')], { stdio: 'inherit' });
  browser = await launchBrowser();
  worker = await startWorker({ vars: { API_TOKEN: '', ALLOW_UNAUTHENTICATED: 'true', LLM_PROVIDER: '' } });
  const port = await freePort();
  server = spawn(process.execPath, [join(APP, 'serve.mjs')], {
    env: { ...process.env, WORKER_URL: worker.baseUrl, PORT: String(port) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise((resolve, reject) => {
    server.stdout.once('data', resolve);
    server.once('exit', (code) => reject(new Error(`serve.mjs exited with ${code}`)));
  });
  base = `http://127.0.0.1:${port}`;
});
after(async () => {
  await browser?.close();
  server?.kill();
  await worker?.stop();
  worker?.cleanup();
});

const lastAgentText = (page) => page.$eval('#messages', (el) => el.lastElementChild?.textContent ?? '');

/** Waits until the chat is idle (the page re-renders while it streams) and `selector` is there. */
async function idleWith(page, selector) {
  await page.waitForFunction(
    (s) => document.querySelector('#status')?.textContent === '' && document.querySelector(s),
    {},
    selector,
  );
  return page.$(selector);
}

test('the example app: an approval from its button, a client tool from its form', async () => {
  const page = await browser.newPage();
  const errors = pageErrors(page);
  await page.goto(`${base}/`);
  const id = new URL(page.url()).searchParams.get('chat');
  assert.match(id, /^chat-/);

  await page.type('#input', 'note buy milk; delete /tmp/x');
  await page.keyboard.press('Enter');
  const approve = await idleWith(page, '.tool button');
  assert.match(await lastAgentText(page), /delete_file \{"path":"\/tmp\/x"\}: approval-requested/);
  assert.equal(await approve.evaluate((b) => b.textContent), 'Approve');
  await approve.click();
  await page.waitForFunction(() => /delete_file .*: output-available → \{"deleted":"\/tmp\/x"\}/.test(document.querySelector('#messages')?.textContent ?? ''));
  await page.waitForFunction(() => document.querySelector('#status')?.textContent === '');

  await page.type('#input', 'ask me something');
  await page.keyboard.press('Enter');
  const answer = await idleWith(page, '.tool form input');
  await answer.type('blue');
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => /ask_user .*: output-available → "blue"/.test(document.querySelector('#messages')?.textContent ?? ''));

  // The chat is the session: the server has it, with both turns. The answer resumes the
  // run, which takes one more model step after the page shows the tool's output.
  const session = await waitFor(worker, id, (s) => s.status !== 'active', 10_000, null);
  assert.equal(session.status, 'completed');
  assert.deepEqual(session.state.notes, [{ text: 'buy milk' }]);
  const runs = await api(worker, 'GET', `/v1/sessions/${id}/runs`, undefined, null);
  assert.equal(runs.body.runs.length, 2);
  assert.deepEqual(errors, []);
  await page.close();
});
