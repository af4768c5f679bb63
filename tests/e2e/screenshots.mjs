// The console's screenshots in docs/ (the Sessions workspace and the Inbox, 1280 and
// 400 px wide; a run's timeline), taken in headless Chromium against the reference
// worker with the mock model: a finished session and one waiting on an approval. After a change to the
// console: `bash scripts/artifacts.sh && node tests/e2e/screenshots.mjs`.

import { launchBrowser } from './browser.mjs';
import { api, startWithMock, waitFor } from './client.mjs';
const { worker, llm } = await startWithMock();
const browser = await launchBrowser();
try {
  llm.push({ text: 'Noted: buy milk.' });
  await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: 'demo-notes', input: 'note buy milk' });
  await waitFor(worker, 'demo-notes', (s) => s.status === 'completed');
  llm.push({ calls: [{ name: 'add_note', args: { text: 'quarterly report' } }, { name: 'delete_file', args: { path: '/tmp/report-draft.txt' } }] });
  await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: 'demo-cleanup', input: 'note the report, then delete the draft' });
  await waitFor(worker, 'demo-cleanup', (s) => s.pendingToolCalls.length === 1);
  // A run that waited on a person for a while, for its timeline.
  llm.push({ calls: [{ name: 'add_note', args: { text: 'ship it' } }, { name: 'delete_file', args: { path: '/tmp/old-release.txt' } }] }, { text: 'Done: noted and deleted.' });
  await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: 'demo-release', input: 'note ship it, delete the old release' });
  const asked = await waitFor(worker, 'demo-release', (s) => s.pendingToolCalls.length === 1);
  await new Promise((r) => setTimeout(r, 2_500));
  await api(worker, 'POST', '/v1/sessions/demo-release/tool-results',
    { kind: 'approval-response', toolCallId: asked.pendingToolCalls[0].toolCallId, approved: true });
  await waitFor(worker, 'demo-release', (s) => s.status === 'completed');
  for (const id of ['demo-notes', 'demo-cleanup', 'demo-release']) await api(worker, 'POST', `/__test/replica/${id}`, {});
  for (const [w, hgt] of [[1280, 860], [400, 900]]) {
    const page = await browser.newPage();
    await page.setViewport({ width: w, height: hgt });
    await page.goto(`${worker.baseUrl}/?token=e2e-api-token&session=demo-cleanup`);
    await page.waitForSelector('#pending .card');
    await page.waitForSelector('#session-list li button');
    await page.waitForFunction(() => document.querySelector('#connection')?.textContent === 'Live');
    await page.evaluate(() => { document.activeElement?.blur(); window.scrollTo(0, 0); });
    await new Promise((r) => setTimeout(r, 500));
    await page.screenshot({ path: `docs/console-${w}.png` });
    await page.click('#nav-inbox');
    await page.waitForSelector('.inbox-item');
    await page.evaluate(() => { document.activeElement?.blur(); window.scrollTo(0, 0); });
    await page.screenshot({ path: `docs/inbox-${w}.png` });
    await page.close();
  }
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 900 });
  await page.goto(`${worker.baseUrl}/?token=e2e-api-token&session=demo-release`);
  await page.waitForFunction(() => /completed/.test(document.querySelector('#runs')?.textContent ?? ''));
  await page.click('#runs li button');
  await page.waitForSelector('#timeline .lane');
  await page.evaluate(() => { document.activeElement?.blur(); document.querySelector('#runs-title').scrollIntoView(); });
  await page.screenshot({ path: 'docs/console-timeline.png' });
  await page.close();
} finally {
  await browser.close(); await worker.stop(); await llm.close(); worker.cleanup();
}
