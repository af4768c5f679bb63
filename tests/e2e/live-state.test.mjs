// Live state on the real worker: the `ledger` agent's `track` notes a label, then
// reports it to the mock, which holds the report (the tool is still running). Its
// write streams as a `state_patch` marked with the call before the call ends and its
// step commits, while `GET` still shows the committed state; the commit adds nothing.
// Then the worker is SIGKILLed mid-tool: after the restart the stream disowns the live
// patch (`stream_resync`), the step runs again, and the TypeScript client's mirror,
// which followed across the kill, equals `GET`.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { HelixClient } from '@helix-edge/client';
import { API_TOKEN, api, replayPatches, startWithMock, waitFor } from './client.mjs';
import { startWorker } from './harness.mjs';
import { openStream } from './sse.mjs';

let worker;
let llm;
before(async () => { ({ worker, llm } = await startWithMock({}, undefined, { flavour: 'test' })); });
after(async () => { await worker?.stop(); await llm?.close(); worker?.cleanup(); });

const stream = (id) => openStream(`${worker.baseUrl}/v1/sessions/${id}/stream`, {
  headers: { authorization: `Bearer ${API_TOKEN}` },
});
const live = (e) => e.type === 'state_patch' && e.json.toolCallId !== undefined;

test('a running tool\'s write streams before its end and its commit; GET shows it once committed', async () => {
  const id = `live-${process.pid}`;
  llm.setLedgerDelay(1_500);
  llm.push({ calls: [{ id: 'call_track_1', name: 'track', args: { label: 'milk' } }] }, { text: 'Tracked.' });
  assert.equal((await api(worker, 'POST', '/v1/sessions', { agent: 'ledger', sessionId: id, input: 'track milk' })).status, 201);
  const sse = await stream(id);
  try {
    const seen = await sse.until(live);
    const patch = seen.find(live);
    assert.equal(patch.json.toolCallId, 'call_track_1');
    assert.deepEqual(patch.json.patches, [{ op: 'add', path: '/notes/-', value: { text: 'milk' } }]);
    assert.ok(!seen.some((e) => e.type === 'tool_end'), 'the tool is still running');
    const mid = (await api(worker, 'GET', `/v1/sessions/${id}`)).body;
    assert.deepEqual(mid.state, { notes: [] }, 'the committed state is unchanged');
    assert.ok(mid.streamSequence < patch.id, 'GET reflects the stream up to the step in progress');

    const events = await sse.until((e) => e.type === 'end', 20_000);
    const at = (pred) => events.findIndex(pred);
    assert.ok(at(live) < at((e) => e.type === 'tool_end') && at((e) => e.type === 'tool_end') < at((e) => e.type === 'step_committed'));
    assert.equal(events.filter((e) => e.type === 'state_patch').length, 1, 'the write committed as shown: nothing more');
    const done = (await api(worker, 'GET', `/v1/sessions/${id}`)).body;
    assert.deepEqual(done.state, { notes: [{ text: 'milk' }] });
    assert.deepEqual(replayPatches({ notes: [] }, events), done.state);
  } finally {
    sse.close();
    llm.setLedgerDelay(0);
  }
});

test('a SIGKILL mid-tool: the live patch is disowned, and the client mirror equals GET after the resync', async () => {
  const id = `live-crash-${process.pid}`;
  llm.reset();
  llm.setLedgerDelay(60_000); // the tool runs until the worker dies
  llm.push({ calls: [{ name: 'track', args: { label: 'eggs' } }] });
  // The client follows whichever worker is up: the restart listens on another port.
  const client = new HelixClient({
    baseUrl: 'http://worker',
    token: API_TOKEN,
    fetch: (url, init) => fetch(String(url).replace('http://worker', worker.baseUrl), init),
  });
  const session = await client.createSession({ agent: 'ledger', sessionId: id, input: 'track eggs' });
  const mirror = await session.mirror({ initialDelayMs: 200, maxDelayMs: 1_000 });
  try {
    const shown = () => mirror.state.notes?.length === 1;
    for (let i = 0; i < 200 && !shown(); i++) await new Promise((r) => setTimeout(r, 50));
    assert.ok(shown(), `the mirror applied the live write: ${JSON.stringify(mirror.state)}`);
    assert.deepEqual((await api(worker, 'GET', `/v1/sessions/${id}`)).body.state, { notes: [] });

    const persistDir = worker.persistDir;
    await worker.kill();
    llm.setLedgerDelay(0);
    llm.push({ calls: [{ name: 'track', args: { label: 'eggs' } }] }, { text: 'Tracked again.' });
    worker = await startWorker({
      flavour: 'test',
      persistDir,
      migrate: false,
      vars: { API_TOKEN, LLM_PROVIDER: 'openai', LLM_BASE_URL: llm.url, LLM_API_KEY: 'test-key', LEDGER_URL: llm.ledgerUrl },
    });
    const done = await waitFor(worker, id, (s) => s.status === 'completed', 30_000);
    await mirror.settled();
    for (let i = 0; i < 100 && mirror.sequence < done.streamSequence; i++) await new Promise((r) => setTimeout(r, 50));
    const server = (await api(worker, 'GET', `/v1/sessions/${id}`)).body;
    assert.deepEqual(server.state, { notes: [{ text: 'eggs' }] }, 'one note: the torn write never landed');
    assert.deepEqual(mirror.state, server.state, 'the mirror equals GET');
    assert.equal(mirror.sequence, server.streamSequence);
    assert.ok(mirror.resyncs >= 1, 'the mirror refetched on the resync');

    const sse = await stream(id);
    const events = await sse.until((e) => e.type === 'end', 20_000);
    sse.close();
    const resync = events.find((e) => e.type === 'stream_resync');
    assert.ok(resync, 'the stream says what it disowned');
    const firstLive = events.find(live);
    assert.ok(resync.json.fromSequence <= firstLive.id && firstLive.id < resync.id, 'the torn live patch is disowned');
    assert.deepEqual(replayPatches({ notes: [] }, events), server.state);
  } finally {
    mirror.close();
  }
});
