// Schedules against the real worker (wrangler dev, local D1 and Durable Objects, real
// alarms) with a mock model: an `every 2 s` schedule with a count fires exactly that many
// runs; a one-off `at` fire survives a SIGKILL while it is due and runs once after the
// restart; a fire while the session waits on an approval follows its policy (`reject`
// skips it, `enqueue` runs it once the approval is answered); bad input is refused
// with a clear 400/429/404 and changes nothing. Follow-ups sent while a run is busy
// follow their `whenBusy`: three `enqueue`d messages run in order, one run each; `reject`
// is 409; `merge` joins the last queued message; `interrupt` stops a slow step's run and
// runs first, or cancels the calls a run waits on a human for (the model sees why); the stream tells each (`message_queued`, `message_merged`) and the
// session view shows the queue. A chat message (`/v1/chat`) with `whenBusy: enqueue`
// answers with its own run once that starts. The `secretary` schedules a run of its own
// session with its `schedule_run` tool, and it fires; a message that finds it busy waits
// (its agent's policy). `GET /v1/schedules` lists every session's schedules from D1 as
// they change. Prints the alarm's drift (fire − due).

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { API_TOKEN, api, startWithMock, waitFor } from './client.mjs';
import { openStream } from './sse.mjs';

let worker;
let llm;
const start = async (persistDir) => { ({ worker, llm } = await startWithMock({}, persistDir)); };
before(async () => { await start(); });
after(async () => { await worker?.stop(); await llm?.close(); worker?.cleanup(); });

let n = 0;
const newId = (name) => `${name}-${process.pid}-${++n}`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const drifts = [];

async function session(id) {
  llm.respondWith(() => ({ text: 'ok' }));
  const res = await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input: 'hello' });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  await waitFor(worker, id, (s) => s.status === 'completed');
}

const runs = async (id) => (await api(worker, 'GET', `/v1/sessions/${id}/runs`)).body.runs;
const userTexts = async (id) => {
  const page = (await api(worker, 'GET', `/v1/sessions/${id}/messages?limit=200`)).body;
  return page.messages.filter((m) => m.role === 'user').map((m) => m.content);
};

/** Records each run's start against the fires the schedule was due at. */
function drift(runList, firstDue, everyMs) {
  runList.slice(1).forEach((run, i) => drifts.push(run.startedAt - (firstDue + i * everyMs)));
}

test('an every-2-s schedule with a count of 3 starts exactly three runs, then is gone', async () => {
  const id = newId('every');
  await session(id);
  const created = await api(worker, 'POST', `/v1/sessions/${id}/schedules`, { every: 2, count: 3, message: 'tick' });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const { scheduleId, nextFireAt } = created.body;
  assert.match(scheduleId, /^schedule_/);
  const firstDue = Date.parse(nextFireAt);
  const listed = await api(worker, 'GET', `/v1/sessions/${id}/schedules`);
  assert.equal(listed.body.schedules[0].scheduleId, scheduleId);
  assert.equal(listed.body.schedules[0].every, 2);
  await waitFor(worker, id, () => true); // a read, as a client would make
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline && (await runs(id)).length < 4) await sleep(250);
  await sleep(3_000); // a fourth fire would have come by now
  const all = await runs(id);
  assert.equal(all.length, 4, `the create's run and three fires: ${JSON.stringify(all.map((r) => r.runId))}`);
  assert.deepEqual(await userTexts(id), ['hello', 'tick', 'tick', 'tick']);
  await waitFor(worker, id, (s) => s.status === 'completed');
  const after = await api(worker, 'GET', `/v1/sessions/${id}/schedules`);
  assert.deepEqual(after.body, { schedules: [], queue: [] }, 'spent');
  drift(all, firstDue, 2_000);
});

test('a due one-off fire survives a SIGKILL and runs exactly once after the restart', async () => {
  const id = newId('crash');
  await session(id);
  const at = new Date(Date.now() + 2_000).toISOString();
  const created = await api(worker, 'POST', `/v1/sessions/${id}/schedules`, { at, message: 'remind me' });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const persistDir = worker.persistDir;
  await worker.kill(); // down before the fire is due, up after it
  await sleep(3_000);
  await start(persistDir);
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline && (await userTexts(id)).length < 2) await sleep(250);
  await sleep(2_000);
  assert.deepEqual(await userTexts(id), ['hello', 'remind me'], 'the missed fire ran once');
  assert.equal((await runs(id)).length, 2);
  assert.deepEqual((await api(worker, 'GET', `/v1/sessions/${id}/schedules`)).body.schedules, []);
});

test('a fire while a run waits on an approval follows its policy: reject skips, enqueue waits its turn', async () => {
  const id = newId('busy');
  llm.respondWith((body) => {
    const last = body.messages?.at(-1);
    if (last?.role === 'user' && last.content === 'delete it') return { calls: [{ name: 'delete_file', args: { path: '/tmp/x' } }] };
    return { text: 'ok' };
  });
  const res = await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input: 'delete it' });
  assert.equal(res.status, 201);
  const waiting = await waitFor(worker, id, (s) => s.pendingToolCalls?.length === 1);
  const skip = await api(worker, 'POST', `/v1/sessions/${id}/schedules`, { every: 1, count: 1, message: 'skipped', whenBusy: 'reject' });
  const queue = await api(worker, 'POST', `/v1/sessions/${id}/schedules`, { every: 1, count: 1, message: 'queued', whenBusy: 'enqueue' });
  assert.equal(skip.status, 201);
  assert.equal(queue.status, 201);
  let listed;
  const deadline = Date.now() + 15_000;
  do {
    await sleep(250);
    listed = (await api(worker, 'GET', `/v1/sessions/${id}/schedules`)).body;
  } while (Date.now() < deadline && listed.queue.length === 0);
  assert.equal(listed.queue.length, 1, JSON.stringify(listed));
  assert.equal(listed.queue[0].messages[0].content, 'queued');
  assert.deepEqual(listed.schedules, [], 'both spent (count 1): one skipped, one queued');
  assert.deepEqual(await userTexts(id), ['delete it'], 'nothing ran while the approval waits');
  const call = waiting.pendingToolCalls[0].toolCallId;
  const answer = await api(worker, 'POST', `/v1/sessions/${id}/tool-results`, { kind: 'approval-response', toolCallId: call, approved: true });
  assert.equal(answer.status, 202);
  const end = Date.now() + 15_000;
  while (Date.now() < end && (await userTexts(id)).length < 2) await sleep(250);
  await waitFor(worker, id, (s) => s.status === 'completed');
  assert.deepEqual(await userTexts(id), ['delete it', 'queued'], 'the queued fire ran after the approved run');
  assert.deepEqual((await api(worker, 'GET', `/v1/sessions/${id}/schedules`)).body.queue, []);
});

test('bad schedules are refused with what is wrong and change nothing', async () => {
  const id = newId('bad');
  await session(id);
  const bad = [
    [{ cron: 'not a cron', message: 'x' }, /^cron:/],
    [{ cron: '0 9 * * *', timezone: 'Mars/Olympus', message: 'x' }, /no time zone named "Mars\/Olympus"/],
    [{ at: '2020-01-01T00:00:00Z', message: 'x' }, /has passed/],
    [{ every: -5, message: 'x' }, /every: a whole number from 1/],
    [{ every: 5, at: '2099-01-01T00:00:00Z', message: 'x' }, /exactly one of at, every and cron/],
    [{ cron: '0 9 30 2 *', message: 'x' }, /never fires/],
    [{ every: 5 }, /exactly one of message and messages/],
  ];
  for (const [body, message] of bad) {
    const res = await api(worker, 'POST', `/v1/sessions/${id}/schedules`, body);
    assert.equal(res.status, 400, JSON.stringify(body));
    assert.equal(res.body.error.code, 'validation_error');
    assert.match(res.body.error.message, message);
  }
  for (let i = 0; i < 20; i++) {
    const ok = await api(worker, 'POST', `/v1/sessions/${id}/schedules`, { cron: '0 9 * * MON-FRI', timezone: 'Europe/Berlin', message: 'standup' });
    assert.equal(ok.status, 201);
  }
  const more = await api(worker, 'POST', `/v1/sessions/${id}/schedules`, { every: 3600, message: 'x' });
  assert.equal(more.status, 429);
  assert.equal(more.body.error.code, 'too_many_schedules');
  const listed = (await api(worker, 'GET', `/v1/sessions/${id}/schedules`)).body.schedules;
  assert.equal(listed.length, 20);
  assert.ok(listed.every((s) => s.cron === '0 9 * * MON-FRI' && s.timezone === 'Europe/Berlin'));
  const gone = await api(worker, 'DELETE', `/v1/sessions/${id}/schedules/${listed[0].scheduleId}`);
  assert.equal(gone.status, 204);
  const again = await api(worker, 'DELETE', `/v1/sessions/${id}/schedules/${listed[0].scheduleId}`);
  assert.equal(again.status, 404);
  assert.equal(again.body.error.code, 'schedule_not_found');
  const missing = await api(worker, 'POST', `/v1/sessions/nobody-${process.pid}/schedules`, { every: 5, message: 'x' });
  assert.equal(missing.status, 404);
  assert.equal((await api(worker, 'GET', `/v1/sessions/${id}/schedules`)).body.schedules.length, 19);
  assert.deepEqual(await userTexts(id), ['hello'], 'no run started');
});

/** A session whose every model call takes `ms` (a slow step), answering with text. */
async function slowSession(id, ms) {
  llm.respondWith(() => ({ text: 'ok', delayMs: ms }));
  const res = await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input: 'first' });
  assert.equal(res.status, 201);
}

test('follow-ups sent during a run: enqueue runs each in order, reject is 409, merge joins the last', async () => {
  const id = newId('queue');
  await slowSession(id, 1_500);
  const ids = [];
  for (const text of ['one', 'two', 'three']) {
    const res = await api(worker, 'POST', `/v1/sessions/${id}/messages`, { message: text, whenBusy: 'enqueue' });
    assert.equal(res.status, 202, JSON.stringify(res.body));
    assert.equal(res.body.queued, true);
    ids.push(res.body.runId);
  }
  const refused = await api(worker, 'POST', `/v1/sessions/${id}/messages`, { message: 'no', whenBusy: 'reject' });
  assert.equal(refused.status, 409);
  assert.equal(refused.body.error.code, 'session_busy');
  const plain = await api(worker, 'POST', `/v1/sessions/${id}/messages`, { message: 'no' });
  assert.equal(plain.status, 409, 'reject is the default');
  const merged = await api(worker, 'POST', `/v1/sessions/${id}/messages`, { message: 'three and a half', whenBusy: 'merge' });
  assert.equal(merged.status, 202);
  assert.equal(merged.body.runId, ids[2], 'joins the last queued message');
  const listed = (await api(worker, 'GET', `/v1/sessions/${id}/schedules`)).body.queue;
  assert.deepEqual(listed.map((q) => q.runId), ids);
  assert.equal(listed[2].merged, 1);
  const view = (await api(worker, 'GET', `/v1/sessions/${id}`)).body;
  assert.deepEqual(view.queue?.map((q) => q.runId), ids, 'the session view shows the queue');
  const sse = await openStream(`${worker.baseUrl}/v1/sessions/${id}/stream?after=0`, {
    headers: { authorization: `Bearer ${API_TOKEN}` },
  });
  const told = await sse.until((e) => e.type === 'message_merged');
  sse.close();
  const queued = told.filter((e) => e.type === 'message_queued').map((e) => e.json);
  assert.deepEqual(queued.map((q) => [q.queuedRunId, q.position, q.policy]),
    [[ids[0], 1, 'enqueue'], [ids[1], 2, 'enqueue'], [ids[2], 3, 'enqueue']]);
  const joined = told.find((e) => e.type === 'message_merged').json;
  assert.deepEqual([joined.queuedRunId, joined.merged], [ids[2], 1]);
  const end = Date.now() + 30_000;
  while (Date.now() < end && (await runs(id)).length < 4) await sleep(250);
  await waitFor(worker, id, (s) => s.status === 'completed', 15_000);
  assert.equal((await api(worker, 'GET', `/v1/sessions/${id}`)).body.queue, undefined, 'none wait');
  const all = await runs(id);
  assert.deepEqual(all.slice(1).map((r) => r.runId), ids, 'one run each, in order, with the ids given');
  assert.deepEqual(await userTexts(id), ['first', 'one', 'two', 'three', 'three and a half']);
});

test('interrupt stops the running step\'s run at its boundary and runs first', async () => {
  const id = newId('interrupt');
  // Two slow steps: a note, then the answer; the interrupt comes during the first.
  llm.respondWith((body) => {
    const last = body.messages?.at(-1);
    if (last?.role === 'user' && last.content === 'first') return { calls: [{ name: 'add_note', args: { text: 'x' } }], delayMs: 1_500 };
    return { text: 'ok', delayMs: 1_500 };
  });
  const res = await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input: 'first' });
  assert.equal(res.status, 201);
  await sleep(300);
  const queued = await api(worker, 'POST', `/v1/sessions/${id}/messages`, { message: 'later', whenBusy: 'enqueue' });
  const urgent = await api(worker, 'POST', `/v1/sessions/${id}/messages`, { message: 'now', whenBusy: 'interrupt' });
  assert.equal(urgent.status, 202, JSON.stringify(urgent.body));
  assert.equal(urgent.body.position, 1, 'first in line');
  const end = Date.now() + 30_000;
  while (Date.now() < end && (await runs(id)).length < 3) await sleep(250);
  await waitFor(worker, id, (s) => s.status === 'completed', 15_000);
  const all = await runs(id);
  assert.equal(all[0].status, 'interrupted', JSON.stringify(all.map((r) => [r.runId, r.status])));
  assert.deepEqual(all.slice(1).map((r) => r.runId), [urgent.body.runId, queued.body.runId]);
  assert.deepEqual((await userTexts(id)).slice(1), ['now', 'later']);
});

test('interrupt while a run waits on an approval: the call is cancelled, the model sees why, then the message runs', async () => {
  const id = newId('cancel');
  const seen = [];
  llm.respondWith((body) => {
    const last = body.messages?.at(-1);
    if (last?.role === 'user' && last.content === 'delete it') return { calls: [{ name: 'delete_file', args: { path: '/x' } }] };
    if (last?.role === 'user' && last.content === 'never mind, do this') seen.push(body.messages);
    return { text: 'ok' };
  });
  const res = await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input: 'delete it' });
  assert.equal(res.status, 201);
  await waitFor(worker, id, (s) => s.pendingToolCalls.length === 1);
  const urgent = await api(worker, 'POST', `/v1/sessions/${id}/messages`, { message: 'never mind, do this', whenBusy: 'interrupt' });
  assert.equal(urgent.status, 202, JSON.stringify(urgent.body));
  const end = Date.now() + 20_000;
  while (Date.now() < end && (await runs(id)).length < 2) await sleep(250);
  const done = await waitFor(worker, id, (s) => s.status === 'completed');
  assert.deepEqual(done.pendingToolCalls, []);
  const all = await runs(id);
  assert.deepEqual(all.map((r) => r.status), ['interrupted', 'completed']);
  assert.equal(all[1].runId, urgent.body.runId);
  const page = (await api(worker, 'GET', `/v1/sessions/${id}/messages?limit=50`)).body.messages;
  const result = page.find((m) => m.role === 'tool');
  assert.match(JSON.stringify(result), /Cancelled: a new message took its turn/, 'the call has its result');
  assert.equal(seen.length, 1);
  assert.match(JSON.stringify(seen[0]), /Cancelled: a new message took its turn/, 'the model sees why');
});

test('a chat message sent during a run waits its turn and streams its own run', async () => {
  const id = newId('chat');
  llm.respondWith((body) => {
    const last = body.messages?.at(-1)?.content;
    return { text: `answer to ${last}`, delayMs: last === 'first' ? 1_500 : 0 };
  });
  const res = await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input: 'first' });
  assert.equal(res.status, 201);
  const post = (whenBusy) => fetch(`${worker.baseUrl}/v1/chat`, {
    method: 'POST',
    headers: { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      id, trigger: 'submit-message', whenBusy,
      messages: [{ id: 'u2', role: 'user', parts: [{ type: 'text', text: 'second' }] }],
    }),
  });
  const refused = await post(undefined);
  assert.equal(refused.status, 409, 'the agent\'s policy: reject');
  const chat = await post('enqueue');
  assert.equal(chat.status, 200);
  const raw = await chat.text();
  const parts = raw.split('\n\n').filter((f) => f.startsWith('data: {'))
    .map((f) => JSON.parse(f.slice('data: '.length)));
  const text = parts.filter((p) => p.type === 'text-delta').map((p) => p.delta).join('');
  assert.equal(text, 'answer to second', 'only its own run\'s answer');
  const all = await runs(id);
  assert.equal(all.length, 2);
  assert.equal(parts[0].messageId, all[1].runId, 'the message is the queued run');
  assert.equal(parts.at(-1).type, 'finish');
});

test('an agent\'s own policy applies to a message that names none', async () => {
  const id = newId('secretary-busy');
  llm.respondWith((body) => ({ text: 'noted', delayMs: body.messages?.at(-1)?.content === 'first' ? 1_500 : 0 }));
  const res = await api(worker, 'POST', '/v1/sessions', { agent: 'secretary', sessionId: id, input: 'first' });
  assert.equal(res.status, 201);
  const waits = await api(worker, 'POST', `/v1/sessions/${id}/messages`, { message: 'then this' });
  assert.equal(waits.status, 202, JSON.stringify(waits.body));
  assert.equal(waits.body.queued, true, 'the secretary enqueues by default');
  const refused = await api(worker, 'POST', `/v1/sessions/${id}/messages`, { message: 'no', whenBusy: 'reject' });
  assert.equal(refused.status, 409, 'a request\'s own policy wins');
  const end = Date.now() + 20_000;
  while (Date.now() < end && (await runs(id)).length < 2) await sleep(250);
  await waitFor(worker, id, (s) => s.status === 'completed');
  assert.deepEqual(await userTexts(id), ['first', 'then this']);
});

test('an agent schedules a run of its own session with its tool, and it fires', async () => {
  const id = newId('secretary');
  llm.respondWith((body) => {
    const last = body.messages?.at(-1);
    if (last?.role === 'user' && last.content === 'remind me to stretch in two seconds') {
      const at = new Date(Date.now() + 2_000).toISOString();
      return { calls: [{ name: 'schedule_run', args: { at, message: 'Reminder: stretch' } }] };
    }
    if (last?.role === 'tool') return { text: 'Scheduled.' };
    return { text: 'Time to stretch!' };
  });
  const res = await api(worker, 'POST', '/v1/sessions', { agent: 'secretary', sessionId: id, input: 'remind me to stretch in two seconds' });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  const scheduled = await waitFor(worker, id, (s) => s.status === 'completed');
  assert.equal(scheduled.output ?? null, null);
  const listed = (await api(worker, 'GET', `/v1/sessions/${id}/schedules`)).body.schedules;
  assert.equal(listed.length, 1, 'the tool made one schedule');
  assert.match(listed[0].scheduleId, /^schedule_/);
  const end = Date.now() + 15_000;
  while (Date.now() < end && (await userTexts(id)).length < 2) await sleep(250);
  await waitFor(worker, id, (s) => s.status === 'completed');
  assert.deepEqual(await userTexts(id), ['remind me to stretch in two seconds', 'Reminder: stretch']);
  const page = (await api(worker, 'GET', `/v1/sessions/${id}/messages?limit=50`)).body.messages;
  assert.equal(page.at(-1).content, 'Time to stretch!');
  assert.deepEqual((await api(worker, 'GET', `/v1/sessions/${id}/schedules`)).body.schedules, [], 'spent');
});

test('GET /v1/schedules lists every session\'s schedules from D1, soonest first, as they change', async () => {
  const [one, two] = [newId('listed'), newId('listed')];
  await session(one);
  await session(two);
  const day = 24 * 3_600_000;
  const later = new Date(Date.now() + 10 * day).toISOString();
  const sooner = new Date(Date.now() + 9 * day).toISOString();
  const a = (await api(worker, 'POST', `/v1/sessions/${one}/schedules`, { at: later, message: 'later' })).body;
  const b = (await api(worker, 'POST', `/v1/sessions/${two}/schedules`, { at: sooner, message: 'sooner' })).body;
  const c = (await api(worker, 'POST', `/v1/sessions/${two}/schedules`, { every: 3_600, message: 'hourly' })).body;
  const mine = (list) => list.schedules.filter((s) => s.sessionId === one || s.sessionId === two);
  const listed = async (query = '') => (await api(worker, 'GET', `/v1/schedules${query}`)).body;
  const until = async (pred, query) => {
    const end = Date.now() + 10_000;
    let got;
    while (Date.now() < end) {
      got = await listed(query);
      if (pred(mine(got))) return got;
      await sleep(200);
    }
    assert.fail(`not listed: ${JSON.stringify(got)}`);
  };
  const all = mine(await until((m) => m.length === 3));
  assert.deepEqual(all.map((s) => s.scheduleId), [c.scheduleId, b.scheduleId, a.scheduleId], 'soonest first');
  assert.deepEqual([all[0].sessionId, all[0].agent, all[0].every], [two, 'assistant', 3_600]);
  assert.equal(all[2].nextFireAt, a.nextFireAt);
  const due = mine(await listed(`?dueBefore=${encodeURIComponent(new Date(Date.now() + 2 * 3_600_000).toISOString())}`));
  assert.deepEqual(due.map((s) => s.scheduleId), [c.scheduleId], 'only what falls due before then');
  assert.deepEqual(mine(await listed('?dueBefore=now')), [], 'nothing of these is due now');
  // Pages of one, followed by their cursors, give the same order.
  const paged = [];
  let cursor;
  do {
    const page = await listed(`?limit=1${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    assert.ok(page.schedules.length <= 1);
    paged.push(...mine(page).map((s) => s.scheduleId));
    cursor = page.nextCursor;
  } while (cursor);
  assert.deepEqual(paged, [c.scheduleId, b.scheduleId, a.scheduleId]);

  assert.equal((await api(worker, 'DELETE', `/v1/sessions/${two}/schedules/${c.scheduleId}`)).status, 204);
  await until((m) => m.length === 2 && !m.some((s) => s.scheduleId === c.scheduleId));
  assert.equal((await api(worker, 'DELETE', `/v1/sessions/${one}`)).status, 204);
  await until((m) => m.length === 1 && m[0].scheduleId === b.scheduleId);
  const aborted = await api(worker, 'POST', `/v1/sessions/${two}/abort`, {});
  assert.ok(aborted.status < 300, JSON.stringify(aborted.body));
  await until((m) => m.length === 0);

  const bad = await api(worker, 'GET', '/v1/schedules?dueBefore=soon');
  assert.equal(bad.status, 400);
  assert.match(bad.body.error.message, /dueBefore/);
  const token = (await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', input: 'hi' })).body.sessionToken;
  if (token) assert.equal((await api(worker, 'GET', '/v1/schedules', undefined, token)).status, 403, 'API token only');
});

test('the alarm drift of the fires above', () => {
  assert.ok(drifts.length >= 3, 'fires were measured');
  const sorted = [...drifts].sort((a, b) => a - b);
  const at = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  console.log(`schedule drift (run start − due), ms: p50 ${at(0.5)}, p99 ${at(0.99)}, n ${sorted.length}`);
  assert.ok(sorted[0] >= 0, 'no fire ran before it was due');
});
