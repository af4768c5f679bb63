// Human-in-the-loop flows against the real worker (wrangler dev, local D1 and Durable
// Objects) with an OpenAI-compatible mock model: approvals, client tools, deadlines,
// reconnects, parallel tools, interrupts, aborts and follow-ups.

import { after, before, beforeEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { api, gapFree, replayPatches, startWithMock, waitFor } from './client.mjs';
import { openStream } from './sse.mjs';

let worker;
let llm;
before(async () => { ({ worker, llm } = await startWithMock({ ASK_USER_DEADLINE_MS: '2500', SSE_PING_MS: '300' })); });
after(async () => { await worker?.stop(); await llm?.close(); worker?.cleanup(); });
beforeEach(() => llm?.reset());

let n = 0;
const newId = (name) => `${name}-${process.pid}-${++n}`;

async function create(id, input) {
  const res = await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body;
}

const stream = (id, opts) => openStream(`${worker.baseUrl}/v1/sessions/${id}/stream`, {
  headers: { authorization: 'Bearer e2e-api-token' }, ...opts,
});

test('an approval suspends the run; approving resumes it on the same stream to the end', async () => {
  const id = newId('approve');
  llm.push({ calls: [{ name: 'delete_file', args: { path: '/tmp/x' } }] }, { text: 'Deleted it.' });
  const created = await create(id, 'delete /tmp/x');
  assert.match(created.streamUrl, new RegExp(`/v1/sessions/${id}/stream\\?token=`));
  assert.equal(typeof created.sessionToken, 'string');
  const sse = await stream(id);
  assert.equal(sse.status, 200);
  assert.match(sse.contentType, /text\/event-stream/);
  const [request] = (await sse.until((e) => e.type === 'tool_approval_request'))
    .filter((e) => e.type === 'tool_approval_request');
  assert.equal(request.json.toolName, 'delete_file');
  assert.deepEqual(request.json.arguments, { path: '/tmp/x' });

  const session = await waitFor(worker, id, (s) => s.pendingToolCalls.length === 1);
  assert.equal(session.status, 'active');
  assert.equal(session.pendingToolCalls[0].kind, 'approval');
  assert.equal(session.pendingToolCalls[0].toolCallId, request.json.toolCallId);
  assert.equal(session.suspendedReason, 'suspended_approval');

  const ok = await api(worker, 'POST', `/v1/sessions/${id}/tool-results`,
    { kind: 'approval-response', toolCallId: request.json.toolCallId, approved: true });
  assert.deepEqual([ok.status, ok.body], [202, { accepted: true }]);
  const again = await api(worker, 'POST', `/v1/sessions/${id}/tool-results`,
    { kind: 'approval-response', toolCallId: request.json.toolCallId, approved: true });
  assert.deepEqual([again.status, again.body.error.code], [409, 'tool_call_already_resolved']);

  const events = await sse.until((e) => e.type === 'end');
  await sse.closed;
  assert.ok(gapFree(events), `gap-free ids: ${events.map((e) => e.id)}`);
  const ends = events.filter((e) => e.type === 'tool_end');
  assert.equal(ends.length, 1, 'delete_file ran once');
  assert.deepEqual(ends[0].json.result, { deleted: '/tmp/x' });
  assert.ok(events.some((e) => e.type === 'run_resumed' && e.json.runId === created.runId), 'same run id');

  const final = await api(worker, 'GET', `/v1/sessions/${id}`);
  assert.equal(final.body.status, 'completed');
  const msgs = await api(worker, 'GET', `/v1/sessions/${id}/messages`);
  assert.deepEqual(msgs.body.messages.map((m) => m.role), ['user', 'assistant', 'tool', 'assistant']);
  assert.equal(msgs.body.messages[0].content, 'delete /tmp/x');
  assert.equal(msgs.body.messages[3].content, 'Deleted it.');
  assert.deepEqual([msgs.body.total, msgs.body.hasMore], [4, false]);
});

test('a suspended stream stays open with ping comments', async () => {
  const id = newId('ping');
  llm.push({ calls: [{ name: 'delete_file', args: { path: '/x' } }] });
  await create(id, 'delete /x');
  const sse = await stream(id);
  await sse.until((e) => e.type === 'run_suspended');
  const start = Date.now();
  while (sse.comments < 2 && Date.now() - start < 5_000) await new Promise((r) => setTimeout(r, 50));
  assert.ok(sse.comments >= 2, `pings seen: ${sse.comments}`);
  assert.equal(sse.ended, false, 'the connection stays open while suspended');
  sse.close();
  await api(worker, 'POST', `/v1/sessions/${id}/abort`, {});
});

test('a denied approval never runs the tool and the model is told', async () => {
  const id = newId('deny');
  llm.push({ calls: [{ name: 'delete_file', args: { path: '/etc' } }] }, { text: 'OK, I will not.' });
  await create(id, 'delete /etc');
  const s = await waitFor(worker, id, (x) => x.pendingToolCalls.length === 1);
  const sse = await stream(id);
  await api(worker, 'POST', `/v1/sessions/${id}/tool-results`,
    { kind: 'approval-response', toolCallId: s.pendingToolCalls[0].toolCallId, approved: false, reason: 'no' });
  const events = await sse.until((e) => e.type === 'end');
  const end = events.find((e) => e.type === 'tool_end');
  assert.equal(end.json.success, false);
  assert.equal(end.json.error, 'Tool call was not approved by the user');
  const lastRequest = llm.requests.at(-1).body.messages.at(-1);
  assert.equal(lastRequest.role, 'tool');
  assert.match(lastRequest.content, /not approved by the user/);
  assert.equal(JSON.parse(lastRequest.content).reason, 'no', 'the model is told the reason');
});

test('send_email needs approval for 5 recipients but not for 2', async () => {
  const id = newId('email');
  llm.push({ calls: [
    { name: 'send_email', args: { to: ['a', 'b'], subject: 's', body: 'b' } },
    { name: 'send_email', args: { to: ['a', 'b', 'c', 'd', 'e'], subject: 's', body: 'b' } },
  ] }, { text: 'Sent both.' });
  await create(id, 'two emails');
  const s = await waitFor(worker, id, (x) => x.pendingToolCalls.length === 1);
  assert.deepEqual(s.pendingToolCalls[0].arguments.to, ['a', 'b', 'c', 'd', 'e']);
  const msgs = await api(worker, 'GET', `/v1/sessions/${id}/messages`);
  assert.deepEqual(msgs.body.messages.at(-1).content, { sent: 2 }, 'the small send already ran');
  await api(worker, 'POST', `/v1/sessions/${id}/tool-results`,
    { kind: 'approval-response', toolCallId: s.pendingToolCalls[0].toolCallId, approved: true });
  const done = await waitFor(worker, id, (x) => x.status === 'completed');
  assert.equal(done.pendingToolCalls.length, 0);
});

test('a client tool is answered with a result, or with an error', async () => {
  for (const answer of [{ result: { answer: 'blue' } }, { error: 'camera unavailable' }]) {
    const id = newId('client');
    llm.push({ calls: [{ name: 'ask_user', args: { question: 'Favourite colour?' } }] }, { text: 'Thanks.' });
    await create(id, 'ask me something');
    const sse = await stream(id);
    const events = await sse.until((e) => e.type === 'run_suspended');
    const start = events.find((e) => e.type === 'tool_start' && e.json.executor === 'client');
    assert.ok(start.json.deadline > Date.now(), 'a client call has a deadline');
    assert.equal((await api(worker, 'GET', `/v1/sessions/${id}`)).body.suspendedReason, 'suspended_client_tool');
    const res = await api(worker, 'POST', `/v1/sessions/${id}/tool-results`,
      { kind: 'client-tool-result', toolCallId: start.json.toolCallId, ...answer });
    assert.equal(res.status, 202);
    const all = await sse.until((e) => e.type === 'end');
    const end = all.find((e) => e.type === 'tool_end');
    if (answer.result) assert.deepEqual([end.json.success, end.json.result], [true, answer.result]);
    else assert.deepEqual([end.json.success, end.json.error], [false, 'camera unavailable']);
  }
});

test('an unanswered client tool times out at its deadline and the run continues', async () => {
  const id = newId('deadline');
  llm.push({ calls: [{ name: 'ask_user', args: { question: 'Still there?' } }] }, { text: 'Moving on.' });
  await create(id, 'ask me something');
  const sse = await stream(id);
  const events = await sse.until((e) => e.type === 'end', 20_000);
  const end = events.find((e) => e.type === 'tool_end');
  assert.equal(end.json.error, 'Tool call timed out waiting for the client');
  const kinds = await api(worker, 'POST', `/v1/sessions/${id}/tool-results`,
    { kind: 'client-tool-result', toolCallId: end.json.toolCallId, result: 1 });
  assert.equal(kinds.status, 409, 'a late answer is refused');
});

test('wrong answer kinds and unknown calls are refused', async () => {
  const id = newId('kinds');
  llm.push({ calls: [{ name: 'delete_file', args: { path: '/x' } }] }, { text: 'ok' });
  await create(id, 'delete /x');
  const s = await waitFor(worker, id, (x) => x.pendingToolCalls.length === 1);
  const callId = s.pendingToolCalls[0].toolCallId;
  const wrong = await api(worker, 'POST', `/v1/sessions/${id}/tool-results`,
    { kind: 'client-tool-result', toolCallId: callId, result: 1 });
  assert.deepEqual([wrong.status, wrong.body.error.code], [400, 'kind_mismatch']);
  const unknown = await api(worker, 'POST', `/v1/sessions/${id}/tool-results`,
    { kind: 'approval-response', toolCallId: 'nope', approved: true });
  assert.deepEqual([unknown.status, unknown.body.error.code], [404, 'tool_call_not_found']);
  const missing = await api(worker, 'GET', `/v1/sessions/${newId('missing')}`);
  assert.deepEqual([missing.status, missing.body.error.code], [404, 'session_not_found']);
  await api(worker, 'POST', `/v1/sessions/${id}/abort`, {});
});

test('parallel add_note calls all land and the patches replay to the final state', async () => {
  const id = newId('notes');
  llm.push({ calls: ['a', 'b', 'c', 'd'].map((text) => ({ name: 'add_note', args: { text } })) }, { text: 'Noted.' });
  await create(id, 'four notes');
  const sse = await stream(id);
  const events = await sse.until((e) => e.type === 'end');
  const session = await api(worker, 'GET', `/v1/sessions/${id}`);
  assert.deepEqual(session.body.state, { notes: [{ text: 'a' }, { text: 'b' }, { text: 'c' }, { text: 'd' }] });
  assert.deepEqual(replayPatches({ notes: [] }, events), session.body.state);
});

test('reconnecting with Last-Event-ID mid-run loses and repeats nothing', async () => {
  const id = newId('reconnect');
  llm.push({ text: 'x'.repeat(200), chunkDelayMs: 20 });
  await create(id, 'talk');
  const first = await stream(id);
  await first.until((e) => e.type === 'text_delta');
  first.close();
  const seen = [...first.events];
  const second = await stream(id, { lastEventId: seen.at(-1).id });
  const rest = await second.until((e) => e.type === 'end');
  const all = [...seen, ...rest];
  assert.ok(gapFree(all), `ids ${all.map((e) => e.id)}`);
  const full = await stream(id, { lastEventId: 0 });
  await full.until((e) => e.type === 'end');
  assert.deepEqual(all.map((e) => e.data), full.events.map((e) => e.data), 'the same bytes as a full replay');
  const query = await openStream(`${worker.baseUrl}/v1/sessions/${id}/stream?after=${seen.at(-1).id}`,
    { headers: { authorization: 'Bearer e2e-api-token' } });
  await query.until((e) => e.type === 'end');
  assert.deepEqual(query.events.map((e) => e.id), rest.map((e) => e.id), '?after= works like Last-Event-ID');
});

test('interrupt stops at the next step; resume completes the same run', async () => {
  const id = newId('interrupt');
  llm.push({ calls: [{ name: 'add_note', args: { text: 'one' } }], delayMs: 800 }, { text: 'Finished.' });
  const created = await create(id, 'note one');
  const res = await api(worker, 'POST', `/v1/sessions/${id}/interrupt`, { reason: 'hold on' });
  assert.equal(res.status, 202);
  const s = await waitFor(worker, id, (x) => x.status === 'interrupted');
  assert.equal(s.stepCount, 1);
  assert.deepEqual([s.canResume, s.resumeReason], [true, 'interrupted']);
  const resumed = await api(worker, 'POST', `/v1/sessions/${id}/resume`);
  assert.deepEqual([resumed.status, resumed.body.runId], [202, created.runId]);
  const done = await waitFor(worker, id, (x) => x.status === 'completed');
  assert.deepEqual([done.canResume, done.resumeReason], [false, 'completed']);
  const runs = await api(worker, 'GET', `/v1/sessions/${id}/runs`);
  assert.deepEqual(runs.body.runs.map((r) => [r.runId, r.status]), [[created.runId, 'completed']]);
});

test('abort is terminal', async () => {
  const id = newId('abort');
  llm.push({ calls: [{ name: 'delete_file', args: { path: '/x' } }] });
  await create(id, 'delete /x');
  const waiting = await waitFor(worker, id, (x) => x.pendingToolCalls.length === 1);
  assert.deepEqual([waiting.canResume, waiting.resumeReason], [false, 'awaiting_tool_results']);
  assert.equal((await api(worker, 'POST', `/v1/sessions/${id}/abort`, { reason: 'stop' })).status, 202);
  const s = await waitFor(worker, id, (x) => x.status === 'aborted');
  assert.equal(s.pendingToolCalls.length, 0);
  const more = await api(worker, 'POST', `/v1/sessions/${id}/messages`, { message: 'again' });
  assert.deepEqual([more.status, more.body.error.code], [409, 'session_aborted']);
});

test('a follow-up message starts a new run in the same session; busy sessions refuse', async () => {
  const id = newId('followup');
  llm.push({ calls: [{ name: 'delete_file', args: { path: '/x' } }] }, { text: 'first' }, { text: 'second' });
  const created = await create(id, 'delete /x');
  const s = await waitFor(worker, id, (x) => x.pendingToolCalls.length === 1);
  const busy = await api(worker, 'POST', `/v1/sessions/${id}/messages`, { message: 'hello?' });
  assert.deepEqual([busy.status, busy.body.error.code], [409, 'session_busy']);
  await api(worker, 'POST', `/v1/sessions/${id}/tool-results`,
    { kind: 'approval-response', toolCallId: s.pendingToolCalls[0].toolCallId, approved: true });
  await waitFor(worker, id, (x) => x.status === 'completed');
  const next = await api(worker, 'POST', `/v1/sessions/${id}/messages`, { message: 'and now?' });
  assert.equal(next.status, 202);
  assert.notEqual(next.body.runId, created.runId);
  await waitFor(worker, id, (x) => x.status === 'completed' && x.stepCount === 3);
  const runs = await api(worker, 'GET', `/v1/sessions/${id}/runs`);
  assert.deepEqual(runs.body.runs.map((r) => r.turn), [1, 2]);
  const checkpoints = await api(worker, 'GET', `/v1/sessions/${id}/checkpoints`);
  assert.ok(checkpoints.body.checkpoints.length >= 3);
});

// SPEC §2d, "one request fewer": what starts or continues a run answers with its stream.
const post = (path, body) => openStream(`${worker.baseUrl}${path}`, {
  method: 'POST', body, headers: { authorization: 'Bearer e2e-api-token' },
});

test('a create, an approval and a follow-up answer with their run\'s stream; GET …/stream resumes it', async () => {
  const id = newId('streamed');
  llm.push({ calls: [{ name: 'delete_file', args: { path: '/s' } }] }, { text: 'Deleted.' }, { text: 'Again.' });
  const created = await post('/v1/sessions', { agent: 'assistant', sessionId: id, input: 'delete /s' });
  assert.equal(created.status, 201, created.body);
  assert.match(created.contentType, /^text\/event-stream/);
  assert.equal(created.headers.get('x-helix-session-id'), id);
  const runId = created.headers.get('x-helix-run-id');
  assert.match(runId, /./);
  assert.equal(typeof created.headers.get('x-helix-session-token'), 'string');
  const first = await created.until((e) => e.type === 'run_suspended');
  assert.deepEqual([first[0].id, first[0].type, first[0].json.runId], [1, 'run_started', runId]);
  const request = first.find((e) => e.type === 'tool_approval_request');
  assert.equal(request.json.toolName, 'delete_file');
  assert.equal(created.ended, false, 'suspended: the stream stays open as GET …/stream does');
  created.close();
  const suspendedAt = first.at(-1).id;

  const approved = await post(`/v1/sessions/${id}/tool-results`,
    { kind: 'approval-response', toolCallId: request.json.toolCallId, approved: true });
  assert.equal(approved.status, 202, approved.body);
  assert.match(approved.contentType, /^text\/event-stream/);
  assert.equal(approved.headers.get('x-helix-accepted'), 'true');
  const rest = await approved.until((e) => e.type === 'end');
  await approved.closed;
  assert.equal(rest[0].id, suspendedAt + 1, 'from just after what the client had');
  assert.equal(approved.headers.get('x-helix-after'), String(suspendedAt));
  assert.equal(created.headers.get('x-helix-after'), '0');
  assert.ok(gapFree([...first, ...rest]), 'nothing lost or repeated across the two answers');
  assert.ok(rest.some((e) => e.type === 'run_resumed' && e.json.runId === runId));
  assert.deepEqual(rest.find((e) => e.type === 'tool_end').json.result, { deleted: '/s' });

  const followed = await post(`/v1/sessions/${id}/messages`, { message: 'again' });
  assert.equal(followed.status, 202, followed.body);
  const second = await followed.until((e) => e.type === 'end');
  await followed.closed;
  assert.equal(second[0].id, rest.at(-1).id + 1);
  assert.deepEqual([second[0].type, second[0].json.runId], ['run_started', followed.headers.get('x-helix-run-id')]);
  assert.notEqual(followed.headers.get('x-helix-run-id'), runId);

  // Resuming with Last-Event-ID is exactly as before: the same events, once.
  const resumed = await stream(id, { lastEventId: suspendedAt });
  const replay = await resumed.until((e) => e.type === 'end' && e.json !== undefined && e.id === rest.at(-1).id);
  resumed.close();
  assert.deepEqual(replay.slice(0, rest.length).map((e) => [e.id, e.data]), rest.map((e) => [e.id, e.data]));
  const final = await api(worker, 'GET', `/v1/sessions/${id}`);
  assert.equal(final.body.status, 'completed');
});

test('a refused start or answer asked as a stream is its JSON error, and changes nothing', async () => {
  const id = newId('streamed-refused');
  llm.push({ calls: [{ name: 'delete_file', args: { path: '/r' } }] });
  await create(id, 'delete /r');
  const s = await waitFor(worker, id, (x) => x.pendingToolCalls.length === 1);
  const taken = await post('/v1/sessions', { agent: 'assistant', sessionId: id, input: 'again' });
  assert.equal(taken.status, 409);
  assert.equal(JSON.parse(taken.body).error.code, 'session_exists');
  const busy = await post(`/v1/sessions/${id}/messages`, { message: 'more' });
  assert.deepEqual([busy.status, JSON.parse(busy.body).error.code], [409, 'session_busy']);
  const wrong = await post(`/v1/sessions/${id}/tool-results`,
    { kind: 'client-tool-result', toolCallId: s.pendingToolCalls[0].toolCallId, result: 1 });
  assert.deepEqual([wrong.status, JSON.parse(wrong.body).error.code], [400, 'kind_mismatch']);
  const after = await api(worker, 'GET', `/v1/sessions/${id}`);
  assert.deepEqual([after.body.version, after.body.pendingToolCalls], [s.version, s.pendingToolCalls]);
  await api(worker, 'POST', `/v1/sessions/${id}/abort`, {});
});

test('without NOTIFY_WEBHOOK_URL, notifications say what to set; a link this deployment never made is refused', async () => {
  const id = newId('unnotified');
  llm.push({ text: 'Hi.' });
  await create(id, 'hello');
  const listed = await api(worker, 'GET', `/v1/sessions/${id}/notifications`);
  assert.equal(listed.status, 503);
  assert.equal(listed.body.error.code, 'notifications_not_configured');
  assert.match(listed.body.error.message, /NOTIFY_WEBHOOK_URL/);
  const forged = await fetch(`${worker.baseUrl}/v1/decisions/aGVsbG8.d29ybGQ`, { method: 'POST' });
  assert.equal(forged.status, 404);
  assert.match(forged.headers.get('content-type'), /^text\/html/);
});
