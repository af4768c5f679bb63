// Crash injection against the real worker: wrangler dev and workerd are killed with
// SIGKILL at chosen moments of approval cycles (while the model streams, while the
// approved tool runs, right after a commit, between a commit in the session's object
// and its replication to D1, while suspended, while the resumed run's model streams),
// then restarted on the same persist directory. The sessions must then
// complete, and every one must be consistent: a contiguous transcript with no lost or
// duplicated message, the approved tool executed at most once (exactly once when its
// result is in the transcript; the test agent reports executions to the mock server,
// outside the worker), a gap-free stream whose state patches replay to the final state,
// and a `stream_resync` wherever chunks of a step that never committed were streamed;
// and D1's rows of the session equal the object's once replication has caught up (no
// step lost or duplicated there either).
// A step that crashes every time stops after its documented 3 attempts.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { API_TOKEN, api, gapFree, replayPatches, withoutTorn } from './client.mjs';
import { ROOT, startWorker } from './harness.mjs';
import { startMockLlm } from './mock-llm.mjs';
import { openStream } from './sse.mjs';

const TRIALS = Number(process.env.CRASH_TRIALS ?? 20);
const SESSIONS_PER_TRIAL = 3;
const PHASES = ['model', 'tool', 'commit', 'replicating', 'suspended', 'resumed-model'];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let llm;
let worker;
let persistDir;
const hangs = new Set(); // sessions whose model never finishes (the bounded-recovery test)

/** The ledger agent's model: notes and an approval, then a closing text; slow streams. */
function respond(body) {
  const user = body?.messages?.find((m) => m.role === 'user')?.content ?? '';
  const last = body?.messages?.at(-1) ?? {};
  if (hangs.has(user)) return { text: 'thinking about it', stallAfter: 2 };
  if (last.role === 'tool') return { text: `All recorded for ${user}.`, chunkDelayMs: 12 };
  return {
    text: 'Recording it now.',
    chunkDelayMs: 12,
    calls: [
      { name: 'add_note', args: { text: `${user} a` } },
      { name: 'record', args: { label: user } },
      { name: 'add_note', args: { text: `${user} b` } },
    ],
  };
}

async function start(migrate) {
  worker = await startWorker({
    flavour: 'test',
    persistDir,
    migrate,
    vars: {
      API_TOKEN,
      LLM_PROVIDER: 'openai',
      LLM_BASE_URL: llm.url,
      LLM_API_KEY: 'test-key',
      LLM_MAX_RETRIES: '0',
      LEDGER_URL: llm.ledgerUrl,
    },
  });
}

before(async () => {
  llm = await startMockLlm();
  llm.respondWith(respond);
  llm.setLedgerDelay(250); // `record` is "running" for a quarter second
  mkdirSync(join(ROOT, '.e2e'), { recursive: true });
  persistDir = mkdtempSync(join(ROOT, '.e2e', 'crash-'));
  await start(true);
});
after(async () => { await worker?.stop(); await llm?.close(); worker?.cleanup(); });

/** Requests that may meet a dead worker: errors are expected while it is down. */
const tryApi = (...args) => api(worker, ...args).catch(() => ({ status: 0, body: null }));

async function until(pred, timeoutMs = 20_000, what = 'condition') {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await pred()) return;
    await sleep(10);
  }
  throw new Error(`timed out waiting for ${what}`);
}

const modelCalls = (id) => llm.requests.filter((r) =>
  r.body?.messages?.find((m) => m.role === 'user')?.content === id).length;

async function approveAll(id) {
  const s = await tryApi('GET', `/v1/sessions/${id}`);
  for (const p of s.body?.pendingToolCalls ?? []) {
    if (p.kind === 'approval') {
      await tryApi('POST', `/v1/sessions/${id}/tool-results`,
        { kind: 'approval-response', toolCallId: p.toolCallId, approved: true });
    }
  }
  return s.body;
}

/** Waits for the moment of `phase` in session `id`'s cycle (driving the cycle on). */
async function reach(phase, id) {
  const suspended = async () => (await tryApi('GET', `/v1/sessions/${id}`)).body?.pendingToolCalls?.length > 0;
  switch (phase) {
    case 'model':
      await until(() => modelCalls(id) >= 1, 20_000, 'the first model call');
      return sleep(Math.random() * 150);
    case 'commit': {
      await until(suspended, 20_000, 'the suspension commit');
      return undefined; // at once: the commit has just landed
    }
    case 'replicating':
      // The commit is in the object; its replication to D1 waits up to ~100 ms to
      // coalesce, then is in flight: kill somewhere in between.
      await until(suspended, 20_000, 'the suspension commit');
      return sleep(Math.random() * 120);
    case 'suspended':
      await until(suspended, 20_000, 'the suspension');
      return sleep(50 + Math.random() * 300);
    case 'tool':
      await until(suspended, 20_000, 'the suspension');
      await approveAll(id);
      await until(() => llm.ledger.some((e) => e.session === id), 20_000, 'the tool to run');
      return sleep(Math.random() * 200); // within the ledger's 250 ms answer
    case 'resumed-model':
      await until(suspended, 20_000, 'the suspension');
      await approveAll(id);
      await until(() => modelCalls(id) >= 2, 20_000, 'the second model call');
      return sleep(Math.random() * 150);
    default:
      throw new Error(phase);
  }
}

/**
 * After the restart: reads the session and answers its approvals until it is terminal.
 * Nothing else: the next request must be enough to continue a session (no `resume`).
 */
async function complete(id, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const s = await approveAll(id);
    if (s && s.status !== 'active') return s;
    await sleep(50);
  }
  throw new Error(`session ${id} did not finish`);
}

/** The whole stream of a finished session, replayed from the start. */
async function replay(id) {
  const sse = await openStream(`${worker.baseUrl}/v1/sessions/${id}/stream?after=0`, {
    headers: { authorization: `Bearer ${API_TOKEN}` },
  });
  await Promise.race([sse.closed, sleep(10_000)]);
  sse.close();
  return sse.events;
}

/** Every consistency check of one finished session; returns what the tool outcome was. */
async function checkSession(id) {
  const session = (await api(worker, 'GET', `/v1/sessions/${id}`)).body;
  assert.equal(session.status, 'completed', `${id}: ${JSON.stringify(session.error)}`);
  const { messages, total } = (await api(worker, 'GET', `/v1/sessions/${id}/messages?limit=500`)).body;
  assert.equal(messages.length, total);
  assert.deepEqual(messages.map((m) => m.role), ['user', 'assistant', 'tool', 'tool', 'tool', 'assistant'],
    `${id}: one of each message, in order`);
  const calls = messages[1].toolCalls;
  assert.deepEqual(messages.slice(2, 5).map((m) => m.toolCallId).sort(), calls.map((c) => c.id).sort(),
    `${id}: one result per call`);
  assert.equal(messages[5].content, `All recorded for ${id}.`);

  // The approved tool: at most once, and exactly once when its result was kept.
  const record = calls.find((c) => c.name === 'record');
  const result = messages.find((m) => m.role === 'tool' && m.toolCallId === record.id);
  const ran = llm.ledger.filter((e) => e.session === id);
  assert.ok(ran.every((e) => e.toolCallId === record.id), `${id}: only the committed call ran`);
  assert.ok(ran.length <= 1, `${id}: the tool ran ${ran.length} times`);
  if (!result.isError) assert.equal(ran.length, 1, `${id}: a kept result means it ran once`);
  else assert.equal(result.content.code, 'tool_interrupted', `${id}: ${JSON.stringify(result.content)}`);

  // The stream: gap-free; state patches replay to the final state; and, once the chunks
  // disowned by `stream_resync` are dropped, exactly the committed steps.
  const events = await replay(id);
  assert.ok(events.length > 0 && gapFree(events), `${id}: gap-free ids`);
  assert.equal(events.at(-1).type, 'end');
  assert.deepEqual(replayPatches({ notes: [] }, events), session.state, `${id}: patches replay to the state`);
  assert.equal(session.state.notes.length, 2);
  const clean = withoutTorn(events);
  const text = (step) => clean.filter((e) => e.type === 'text_delta' && e.json.step === step)
    .map((e) => e.json.delta).join('');
  assert.equal(text(1), messages[1].content, `${id}: step 1's text streamed once (resync where torn)`);
  assert.equal(text(2), messages[5].content, `${id}: step 2's text streamed once (resync where torn)`);
  const ids = (type) => clean.filter((e) => e.type === type).map((e) => e.json.toolCallId).sort();
  assert.deepEqual(ids('tool_end'), calls.map((c) => c.id).sort(), `${id}: one tool_end per committed call`);
  // An approved call streams tool_start when it runs; one interrupted by the crash ends
  // without running again (its first tool_start was disowned with its torn step).
  assert.deepEqual(ids('tool_start'), calls.filter((c) => c !== record || !result.isError).map((c) => c.id).sort(),
    `${id}: one tool_start per call that ran`);
  assert.equal(clean.filter((e) => e.type === 'tool_approval_request').length, 1);

  // D1, fed from the object's commit log: once caught up, the same rows.
  const replica = await api(worker, 'POST', `/__test/replica/${id}`, {});
  assert.equal(replica.status, 200);
  assert.ok(replica.body.caughtUp, `${id}: replication caught up`);
  assert.ok(replica.body.equal, `${id}: D1 equals the object: ${JSON.stringify(replica.body)}`);
  return { interrupted: Boolean(result.isError), resyncs: events.filter((e) => e.type === 'stream_resync').length };
}

test(`${TRIALS} SIGKILLs at chosen moments: every session completes, consistent`, async (t) => {
  const tally = { interrupted: 0, resyncs: 0, sessions: 0 };
  for (let trial = 0; trial < TRIALS; trial++) {
    const phase = PHASES[trial % PHASES.length];
    const ids = Array.from({ length: SESSIONS_PER_TRIAL }, (_, k) => `crash-${process.pid}-${trial}-${k}`);
    // Sessions start a few ms apart, so the kill finds each at a different point.
    const starting = ids.map(async (id, k) => {
      await sleep(k * 40);
      return tryApi('POST', '/v1/sessions', { agent: 'ledger', sessionId: id, input: id });
    });
    await reach(phase, ids[0]);
    // The others are driven on meanwhile, so the kill finds them anywhere in the cycle.
    void Promise.all(ids.slice(1).map(async (id) => {
      await sleep(Math.random() * 200);
      await approveAll(id);
    }));
    const killedAt = Date.now();
    await worker.kill();
    await Promise.allSettled(starting);
    await start(false);
    const restartedAt = Date.now();

    for (const id of ids) {
      const created = (await api(worker, 'GET', `/v1/sessions/${id}`)).status;
      if (created === 404) {
        // The kill came before the create was durable (the client saw no 201): create again.
        const res = await api(worker, 'POST', '/v1/sessions', { agent: 'ledger', sessionId: id, input: id });
        assert.equal(res.status, 201, JSON.stringify(res.body));
      }
      await complete(id);
      const outcome = await checkSession(id);
      tally.interrupted += outcome.interrupted;
      tally.resyncs += outcome.resyncs;
      tally.sessions++;
    }
    t.diagnostic(`trial ${trial} (${phase}): restart ${restartedAt - killedAt} ms, recovery and checks ${Date.now() - restartedAt} ms`);
  }
  t.diagnostic(`crash injection: ${TRIALS} kills, ${tally.sessions} sessions, ${tally.resyncs} stream_resync, `
    + `${tally.interrupted} approved calls interrupted mid-execution (at most once: never re-run)`);
});

test('a step that crashes every time fails after 3 attempts instead of spending model calls', async () => {
  const id = `crashloop-${process.pid}`;
  hangs.add(id);
  const res = await api(worker, 'POST', '/v1/sessions', { agent: 'ledger', sessionId: id, input: id });
  assert.equal(res.status, 201);
  let kills = 0;
  for (; kills < 6; kills++) {
    const s = (await tryApi('GET', `/v1/sessions/${id}`)).body;
    if (s?.status === 'failed') break;
    // After a restart, `resume` starts the next attempt; wait for its model call, then crash.
    if (kills > 0) await tryApi('POST', `/v1/sessions/${id}/resume`);
    const failed = async () => (await tryApi('GET', `/v1/sessions/${id}`)).body?.status === 'failed';
    await until(async () => modelCalls(id) > kills || await failed(), 10_000, 'the next attempt');
    if (await failed()) break;
    await sleep(60);
    await worker.kill();
    await start(false);
  }
  const s = await complete(id, 20_000);
  assert.equal(s.status, 'failed');
  assert.equal(s.error.code, 'framework_recovery_exhausted', JSON.stringify(s.error));
  assert.equal(modelCalls(id), 3, 'one model call per attempt, 3 attempts');
  assert.ok(kills <= 4, `${kills} kills`);
  const runs = (await api(worker, 'GET', `/v1/sessions/${id}/runs`)).body.runs;
  assert.equal(runs.at(-1).status, 'failed');
});
