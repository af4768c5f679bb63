// A run's timeline in the console, in Chromium: a run that waited on a person for a
// while shows its model calls, its tool call (approved), its commits and the wait, each
// bar placed on the run's time, with the totals of each kind — from the spans the worker
// keeps (its `otel` feature; no OTLP endpoint needed). Saved as
// .e2e/artifacts/console-timeline.png.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { launchBrowser, pageErrors } from './browser.mjs';
import { api, startWithMock, waitFor } from './client.mjs';
import { ROOT } from './harness.mjs';

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

test("a run's spans as a timeline: model, tools, commits and the wait on a person", async () => {
  const id = `timeline-${process.pid}`;
  llm.push({ calls: [{ name: 'delete_file', args: { path: '/tmp/draft.txt' } }] }, { text: 'Deleted.' });
  const created = await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input: 'delete the draft' });
  assert.equal(created.status, 201);
  const asked = await waitFor(worker, id, (s) => s.pendingToolCalls.length === 1);
  await new Promise((r) => setTimeout(r, 1_500)); // the person takes their time
  await api(worker, 'POST', `/v1/sessions/${id}/tool-results`,
    { kind: 'approval-response', toolCallId: asked.pendingToolCalls[0].toolCallId, approved: true });
  await waitFor(worker, id, (s) => s.status === 'completed');

  const page = await browser.newPage();
  const errors = pageErrors(page);
  await page.setViewport({ width: 1280, height: 900 });
  await page.goto(`${worker.baseUrl}/?token=e2e-api-token&session=${id}`);
  await page.waitForFunction(() => /turn 1 · completed/.test(document.querySelector('#runs')?.textContent ?? ''));
  await page.click('#runs li button');
  await page.waitForSelector('#timeline .lane');

  const lanes = await page.$$eval('#timeline .lane', (ls) => ls.map((l) => ({
    kind: l.dataset.kind,
    text: l.querySelector('.lane-name').textContent,
    width: parseFloat(l.querySelector('.bar').style.width),
    left: parseFloat(l.querySelector('.bar').style.marginLeft),
  })));
  const of = (kind) => lanes.filter((l) => l.kind === kind);
  assert.equal(of('run').length, 1, 'the run itself');
  assert.equal(of('model').length, 2, 'two model calls');
  assert.match(of('model')[0].text, /chat .* 11 in \/ 7 out/, "the model's tokens");
  assert.match(of('tool')[0].text, /execute_tool delete_file .*approved/);
  assert.ok(of('commit').length >= 1);
  const [wait] = of('wait');
  assert.match(wait.text, /await_human \d\.\d+ s/, 'the wait, in seconds');
  assert.ok(wait.width > 40, `the wait is most of the run (${wait.width}%)`);
  assert.ok(of('model').every((m) => m.width < wait.width));
  assert.ok(lanes.every((l) => l.left >= 0 && l.left + l.width <= 100.5), 'every bar within the run');
  const totals = await page.$eval('#timeline .totals', (t) => t.textContent);
  assert.match(totals, /model \d+ ms.*tools \d+ ms.*waiting on people and children \d\.\d+ s/);
  assert.match(await page.$eval('#timeline', (t) => t.textContent), /No OTLP endpoint is configured/);

  const dir = join(ROOT, '.e2e', 'artifacts');
  mkdirSync(dir, { recursive: true });
  await page.screenshot({ path: join(dir, 'console-timeline.png') });
  assert.deepEqual(errors, []);
  await page.close();
});
