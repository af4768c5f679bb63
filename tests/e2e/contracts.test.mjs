// Agent contracts over HTTP against the real worker (wrangler dev, local D1 and Durable
// Objects, a scripted OpenAI-compatible model): typed state checked on create, a
// client result checked against its tool's output schema, typed output that is not an
// object, the schemas `GET /v1/agents` shows, a retry with a replacement message and a
// fork, each announced by `stream_resync` with its reason; rich input (a list of
// messages with metadata and attachments, prior history) as the model receives it; a
// tool's picture given with its result.

import { after, before, beforeEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { API_TOKEN, api, replayPatches, startWithMock, waitFor } from './client.mjs';
import { openStream } from './sse.mjs';

let worker;
let llm;
before(async () => { ({ worker, llm } = await startWithMock()); });
after(async () => { await worker?.stop(); await llm?.close(); worker?.cleanup(); });
beforeEach(() => llm?.reset());

let n = 0;
const newId = (name) => `${name}-${process.pid}-${++n}`;
const settled = (id) => waitFor(worker, id, (s) => s.status !== 'active' || s.pendingToolCalls.length > 0, 20_000);

test('typed state: defaults apply, and a create whose state breaks the type is refused naming the field', async () => {
  const id = newId('typed');
  const bad = await api(worker, 'POST', '/v1/sessions',
    { agent: 'typed', sessionId: id, input: { message: 'go', state: { added: 'many' } } });
  assert.equal(bad.status, 400, JSON.stringify(bad.body));
  assert.equal(bad.body.error.code, 'validation_error');
  assert.match(bad.body.error.message, /input\.state.*\/added/);
  assert.equal((await api(worker, 'GET', `/v1/sessions/${id}`)).status, 404, 'nothing was created');

  llm.push({ calls: [{ name: 'add_task', args: { title: 'write tests' } }] }, { text: 'Added.' });
  const ok = await api(worker, 'POST', '/v1/sessions',
    { agent: 'typed', sessionId: id, input: { message: 'go', state: { label: 'mine' } } });
  assert.equal(ok.status, 201, JSON.stringify(ok.body));
  const done = await settled(id);
  assert.equal(done.status, 'completed');
  assert.deepEqual(done.state, { tasks: ['write tests'], added: 1, label: 'mine' });
});

test('a client result that breaks the tool\'s output schema gets 400 and the call stays open', async () => {
  const id = newId('measure');
  llm.push({ calls: [{ name: 'measure', args: { title: 'temperature' } }] }, { text: 'Thanks.' });
  assert.equal((await api(worker, 'POST', '/v1/sessions', { agent: 'typed', sessionId: id, input: 'measure' })).status, 201);
  const waiting = await settled(id);
  const call = waiting.pendingToolCalls[0];
  assert.equal(call.kind, 'client');
  const submit = (result) => api(worker, 'POST', `/v1/sessions/${id}/tool-results`,
    { kind: 'client-tool-result', toolCallId: call.toolCallId, result });
  const bad = await submit({ value: 'warm' });
  assert.equal(bad.status, 400, JSON.stringify(bad.body));
  assert.equal(bad.body.error.code, 'tool_output_invalid');
  assert.match(bad.body.error.message, /\/value/);
  assert.equal((await api(worker, 'GET', `/v1/sessions/${id}`)).body.pendingToolCalls.length, 1);
  assert.equal((await submit({ value: 21.5 })).status, 202);
  const done = await waitFor(worker, id, (s) => s.status === 'completed', 20_000);
  assert.equal(done.status, 'completed');

  // The agent asks for a one-hour prompt cache: OpenAI gets the session as the cache key.
  const bodies = llm.requests.map((r) => r.body);
  assert.equal(bodies.length, 2);
  for (const body of bodies) {
    assert.equal(body.prompt_cache_key, id);
    assert.equal(body.prompt_cache_retention, '24h');
  }
  // The run shows each model step's usage and stop reason, and how long the client took.
  const runs = (await api(worker, 'GET', `/v1/sessions/${id}/runs`)).body.runs;
  assert.equal(runs.length, 1);
  const [run] = runs;
  assert.deepEqual(run.steps.map((s) => [s.step, s.stopReason, s.usage.inputTokens]),
    [[1, 'tool_use', 11], [2, 'end_turn', 11]]);
  assert.equal(run.usage.inputTokens, 22);
  assert.equal(run.waits.length, 1);
  assert.deepEqual({ ...run.waits[0], waitedMs: undefined },
    { toolCallId: call.toolCallId, toolName: 'measure', kind: 'client', outcome: 'result', waitedMs: undefined });
  assert.ok(run.waits[0].waitedMs >= 0 && run.waits[0].waitedMs < 20_000, JSON.stringify(run.waits[0]));
  const messages = (await api(worker, 'GET', `/v1/sessions/${id}/messages`)).body.messages;
  const result = messages.find((m) => m.role === 'tool');
  assert.equal(result.metadata.waitedMs, run.waits[0].waitedMs, 'the tool message carries the wait');
});

test('typed output that is not an object comes through __finish__ as {"output": …}', async () => {
  const id = newId('lister');
  llm.push({ calls: [{ name: '__finish__', args: { output: ['a', 'b'] } }] });
  assert.equal((await api(worker, 'POST', '/v1/sessions', { agent: 'lister', sessionId: id, input: 'list' })).status, 201);
  const done = await waitFor(worker, id, (s) => s.status !== 'active', 20_000);
  assert.equal(done.status, 'completed', JSON.stringify(done.error));
  assert.deepEqual(done.output, ['a', 'b']);
  const finish = llm.requests.at(-1).body.tools.find((t) => t.function.name === '__finish__');
  assert.deepEqual(finish.function.parameters.required, ['output']);
});

test('GET /v1/agents shows typed state and output schemas', async () => {
  const { body } = await api(worker, 'GET', '/v1/agents');
  const typed = body.agents.find((a) => a.name === 'typed');
  assert.deepEqual(Object.keys(typed.stateSchema.properties).sort(), ['added', 'tasks']);
  const lister = body.agents.find((a) => a.name === 'lister');
  assert.equal(lister.outputSchema.type, 'array');
  assert.equal(body.agents.find((a) => a.name === 'assistant').stateSchema, undefined);
});

const stream = (id) => openStream(`${worker.baseUrl}/v1/sessions/${id}/stream`, {
  headers: { authorization: `Bearer ${API_TOKEN}` },
});
const transcript = async (id) => (await api(worker, 'GET', `/v1/sessions/${id}/messages?limit=100`))
  .body.messages.map((m) => `${m.role}: ${m.content ?? ''}`);

test('a retry with a message replaces the run\'s input, announced as a rollback', async () => {
  const id = newId('edit');
  llm.push({ calls: [{ name: 'add_note', args: { text: 'first try' } }] }, { text: 'First answer.' });
  assert.equal((await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input: 'original' })).status, 201);
  assert.equal((await waitFor(worker, id, (s) => s.status === 'completed', 20_000)).state.notes.length, 1);
  assert.equal((await api(worker, 'POST', `/v1/sessions/${id}/retry`, { message: '  ' })).status, 400);
  const firstBranch = (await api(worker, 'GET', `/v1/sessions/${id}/checkpoints`)).body.checkpoints.map((c) => c.checkpointId ?? c.id);

  llm.push({ text: 'Second answer.' });
  const retry = await api(worker, 'POST', `/v1/sessions/${id}/retry`, { message: 'edited' });
  assert.equal(retry.status, 202, JSON.stringify(retry.body));
  const done = await waitFor(worker, id, (s) => s.status === 'completed' && s.stepCount > 0, 20_000);
  assert.deepEqual(await transcript(id), ['user: edited', 'assistant: Second answer.']);
  assert.deepEqual(done.state, { notes: [] }, 'the note is rolled back');
  const events = await (await stream(id)).until((e) => e.type === 'stream_resync');
  const resync = events.find((e) => e.type === 'stream_resync');
  assert.equal(resync.json.reason, 'rollback');
  assert.equal(resync.json.fromSequence, resync.id, 'a rollback discards nothing');
  assert.equal(resync.json.messageCount, 0);
  const all = await (await stream(id)).until((e) => e.type === 'run_finished' && e.id > resync.id);
  assert.deepEqual(replayPatches({ notes: [] }, all), done.state, 'patches still replay to the state');
  // The checkpoints of the branch the rollback abandoned (each held the replaced input)
  // are gone: not listed, and going back to one is 404.
  const listed = (await api(worker, 'GET', `/v1/sessions/${id}/checkpoints`)).body.checkpoints.map((c) => c.checkpointId ?? c.id);
  assert.ok(firstBranch.length > 0 && firstBranch.every((c) => !listed.includes(c)), `${firstBranch} vs ${listed}`);
  for (const checkpointId of firstBranch) {
    const fork = await api(worker, 'POST', `/v1/sessions/${id}/fork`, { checkpointId });
    assert.equal(fork.status, 404, JSON.stringify(fork.body));
    assert.equal(fork.body.error.code, 'checkpoint_not_found');
  }
});

test('a fork continues from a checkpoint in a new session; the source stays as it was', async () => {
  const id = newId('source');
  llm.push(
    { calls: [{ name: 'add_note', args: { text: 'shared' } }] },
    { calls: [{ name: 'add_note', args: { text: 'source only' } }] },
    { text: 'Source done.' },
  );
  assert.equal((await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input: 'go' })).status, 201);
  await waitFor(worker, id, (s) => s.status === 'completed', 20_000);
  const { checkpoints } = (await api(worker, 'GET', `/v1/sessions/${id}/checkpoints`)).body;
  const afterFirst = checkpoints[1];

  const forkId = newId('fork');
  assert.equal((await api(worker, 'POST', `/v1/sessions/${id}/fork`, { sessionId: 'bad id!' })).status, 400);
  assert.equal((await api(worker, 'POST', `/v1/sessions/${id}/fork`, { checkpointId: 'ckpt_nope' })).status, 404);
  llm.push({ text: 'Fork answer.' });
  const fork = await api(worker, 'POST', `/v1/sessions/${id}/fork`, { checkpointId: afterFirst.id, sessionId: forkId });
  assert.equal(fork.status, 201, JSON.stringify(fork.body));
  assert.equal(fork.body.sessionId, forkId);
  assert.ok(fork.body.runId);
  const forked = await waitFor(worker, forkId, (s) => s.status === 'completed', 20_000);
  assert.deepEqual(forked.state, { notes: [{ text: 'shared' }] });
  assert.deepEqual(forked.forkedFrom, { sessionId: id, checkpointId: afterFirst.id, stepCount: afterFirst.stepCount });
  const lines = await transcript(forkId);
  assert.equal(lines.length, 4);
  assert.equal(lines[3], 'assistant: Fork answer.');
  const events = await (await stream(forkId)).until((e) => e.type === 'run_finished');
  assert.deepEqual(events.slice(0, 2).map((e) => e.type), ['run_started', 'stream_resync']);
  assert.equal(events[1].json.reason, 'branch');
  assert.equal(events[1].json.fromSequence, events[1].id);
  assert.equal((await api(worker, 'GET', `/v1/sessions/${id}`)).body.state.notes.length, 2, 'the source is untouched');
  assert.equal((await api(worker, 'POST', `/v1/sessions/${id}/fork`, { sessionId: forkId })).status, 409, 'the id is taken');
});

test('a checkpoint read later is the session as GET answered when it stood there', async () => {
  const id = newId('past');
  llm.push(
    { calls: [{ name: 'add_note', args: { text: 'first' } }] },
    { calls: [{ name: 'delete_file', args: { path: '/tmp/x' } }] },
    { text: 'Deleted.' },
  );
  assert.equal((await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input: 'note, then delete' })).status, 201);
  const waiting = await waitFor(worker, id, (s) => s.pendingToolCalls.length === 1, 20_000);
  const then = (await api(worker, 'GET', `/v1/sessions/${id}/messages?limit=100`)).body;
  const at = (await api(worker, 'GET', `/v1/sessions/${id}/checkpoints`)).body.checkpoints.at(-1);
  assert.equal(at.status, 'suspended');

  // The session moves on: the approval, then a follow-up that writes again.
  const call = waiting.pendingToolCalls[0].toolCallId;
  await api(worker, 'POST', `/v1/sessions/${id}/tool-results`, { kind: 'approval-response', toolCallId: call, approved: true });
  await waitFor(worker, id, (s) => s.status === 'completed', 20_000);
  llm.push({ calls: [{ name: 'add_note', args: { text: 'later' } }] }, { text: 'Noted.' });
  assert.equal((await api(worker, 'POST', `/v1/sessions/${id}/messages`, { message: 'note later' })).status, 202);
  const now = await waitFor(worker, id, (s) => s.status === 'completed' && s.state.notes.length === 2, 20_000);

  const read = await api(worker, 'GET', `/v1/sessions/${id}/checkpoints/${at.id}?limit=100`);
  assert.equal(read.status, 200, JSON.stringify(read.body));
  assert.deepEqual(read.body.checkpoint, at);
  assert.deepEqual(read.body.state, waiting.state, 'the state GET answered then');
  assert.notDeepEqual(read.body.state, now.state);
  assert.deepEqual(read.body.messages, then.messages, 'the transcript GET answered then');
  assert.deepEqual([read.body.total, read.body.offset, read.body.hasMore], [then.total, 0, false]);
  const page = (await api(worker, 'GET', `/v1/sessions/${id}/checkpoints/${at.id}?offset=1&limit=1`)).body;
  assert.deepEqual(page.messages, [then.messages[1]]);
  assert.deepEqual([page.total, page.offset, page.limit, page.hasMore], [then.total, 1, 1, true]);
  const past = (await api(worker, 'GET', `/v1/sessions/${id}/checkpoints/${at.id}?offset=100`)).body;
  assert.deepEqual([past.messages, past.hasMore], [[], false]);

  const missing = await api(worker, 'GET', `/v1/sessions/${id}/checkpoints/ckpt_nope`);
  assert.equal(missing.status, 404);
  assert.equal(missing.body.error.code, 'checkpoint_not_found');
  assert.equal((await api(worker, 'GET', `/v1/sessions/${id}/checkpoints/${at.id}?limit=0`)).status, 400);
  assert.equal((await api(worker, 'GET', `/v1/sessions/nope-${id}/checkpoints/${at.id}`)).status, 404);
});

test('a finished session forks into an idle copy; its retry without a message is refused; no model call', async () => {
  const id = newId('finished');
  llm.push({ calls: [{ name: 'add_note', args: { text: 'a' } }, { name: 'add_note', args: { text: 'b' } }] }, { text: 'Noted.' });
  assert.equal((await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input: 'note a and b' })).status, 201);
  const source = await waitFor(worker, id, (s) => s.status === 'completed', 20_000);
  const asked = llm.requests.length;

  const forkId = newId('copy');
  const fork = await api(worker, 'POST', `/v1/sessions/${id}/fork`, { sessionId: forkId });
  assert.equal(fork.status, 201, JSON.stringify(fork.body));
  assert.equal(fork.body.status, 'completed', 'an idle copy: nothing to continue');
  const copy = (await api(worker, 'GET', `/v1/sessions/${forkId}`)).body;
  assert.equal(copy.status, 'completed');
  assert.deepEqual(copy.state, source.state, 'the notes once, not twice');
  assert.deepEqual(await transcript(forkId), await transcript(id));
  const events = await (await stream(forkId)).until((e) => e.type === 'stream_resync');
  assert.deepEqual(events.map((e) => e.type), ['stream_resync']);
  assert.equal(events[0].json.reason, 'branch');

  const retry = await api(worker, 'POST', `/v1/sessions/${id}/retry`, {});
  assert.equal(retry.status, 409, JSON.stringify(retry.body));
  assert.equal(retry.body.error.code, 'checkpoint_run_ended');
  assert.deepEqual((await api(worker, 'GET', `/v1/sessions/${id}`)).body.state, source.state, 'nothing changed');
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(llm.requests.length, asked, 'no model was asked to answer its own answer');

  // A message runs the copy.
  llm.push({ text: 'More.' });
  assert.equal((await api(worker, 'POST', `/v1/sessions/${forkId}/messages`, { message: 'and then?' })).status, 202);
  await waitFor(worker, forkId, (s) => s.status === 'completed' && s.stepCount > copy.stepCount, 20_000);
  assert.equal((await transcript(forkId)).at(-1), 'assistant: More.');
  assert.equal(llm.requests.at(-1).body.messages.at(-1).role, 'user');
});

test('rich input: history, several messages, metadata and attachments reach the model as content parts', async () => {
  const id = newId('rich');
  const png = { type: 'image', mediaType: 'image/png', data: 'iVBORw0KGgo=' };
  const pdf = { type: 'file', mediaType: 'application/pdf', url: 'https://example.com/r.pdf', name: 'r.pdf' };
  const history = [
    { role: 'user', content: 'Earlier question' },
    { role: 'assistant', content: '', toolCalls: [{ id: 'h1', name: 'add_note', arguments: { text: 'old' } }] },
    { role: 'tool', toolCallId: 'h1', toolName: 'add_note', content: { count: 1 }, isError: false },
    { role: 'assistant', content: 'Earlier answer' },
  ];
  const bad = await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input: 'x', messages: history.slice(0, 2) });
  assert.equal(bad.status, 400);
  assert.match(bad.body.error.message, /never answered/);
  const tiff = await api(worker, 'POST', '/v1/sessions',
    { agent: 'assistant', sessionId: id, input: { message: 'x', attachments: [{ ...png, mediaType: 'image/tiff' }] } });
  assert.equal(tiff.status, 400);
  assert.match(tiff.body.error.message, /attachments\[0\]/);

  llm.push({ reasoning: 'Looking at the picture.', text: 'A pixel.' });
  const input = [{ message: 'context for the UI', metadata: { hidden: true } }, { message: 'What is this?', attachments: [png, pdf] }];
  const res = await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input, messages: history });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  await waitFor(worker, id, (s) => s.status === 'completed', 20_000);
  const sent = llm.requests.at(-1).body.messages;
  assert.deepEqual(sent.slice(1, 5).map((m) => m.role), ['user', 'assistant', 'tool', 'assistant'], 'history first');
  assert.equal(sent[5].content, 'context for the UI');
  assert.deepEqual(sent[6].content, [
    { type: 'text', text: 'What is this?' },
    { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } },
    { type: 'text', text: '[Attachment: r.pdf (application/pdf) at https://example.com/r.pdf]' },
  ]);
  const { body } = await api(worker, 'GET', `/v1/sessions/${id}/messages?limit=100`);
  assert.equal(body.total, 7);
  assert.deepEqual(body.messages[4].metadata, { hidden: true });
  assert.deepEqual(body.messages[5].attachments, [png, pdf]);
  assert.equal(body.messages[6].thinking[0].content, 'Looking at the picture.');
  const stripped = (await api(worker, 'GET', `/v1/sessions/${id}/messages?limit=100&includeThinking=false`)).body;
  assert.equal(stripped.messages[6].thinking, undefined);
  assert.equal(stripped.messages[6].content, 'A pixel.');

  llm.push({ text: 'Another.' });
  const more = await api(worker, 'POST', `/v1/sessions/${id}/messages`, { message: '', attachments: [png] });
  assert.equal(more.status, 202, JSON.stringify(more.body));
  await waitFor(worker, id, (s) => s.status === 'completed' && s.stepCount === 2, 20_000);
  assert.equal((await api(worker, 'POST', `/v1/sessions/${id}/messages`, { message: 'x', state: {} })).status, 400);
});

test('rich input on a retry and a fork: the edited message keeps its metadata and attachments', async () => {
  const id = newId('rich-retry');
  const png = { type: 'image', mediaType: 'image/png', data: 'iVBORw0KGgo=' };
  llm.push({ text: 'First.' });
  assert.equal((await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input: 'What is it?' })).status, 201);
  await waitFor(worker, id, (s) => s.status === 'completed', 20_000);
  const before = llm.requests.length;
  for (const bad of [{ attachments: [png] }, { message: 'a', messages: ['b'] }, { message: 'x', attachments: [{ ...png, mediaType: 'image/tiff' }] }]) {
    const r = await api(worker, 'POST', `/v1/sessions/${id}/retry`, bad);
    assert.equal(r.status, 400, JSON.stringify(bad));
  }
  assert.equal(llm.requests.length, before, 'nothing ran');

  llm.push({ text: 'A pixel.' });
  const retry = await api(worker, 'POST', `/v1/sessions/${id}/retry`,
    { message: 'What is this picture?', metadata: { edited: true }, attachments: [png] });
  assert.equal(retry.status, 202, JSON.stringify(retry.body));
  await waitFor(worker, id, (s) => s.status === 'completed' && s.stepCount > 0, 20_000);
  assert.deepEqual(llm.requests.at(-1).body.messages.at(-1).content, [
    { type: 'text', text: 'What is this picture?' },
    { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } },
  ]);
  const kept = (await api(worker, 'GET', `/v1/sessions/${id}/messages?limit=100`)).body.messages;
  assert.deepEqual([kept.length, kept[0].metadata, kept[0].attachments], [2, { edited: true }, [png]]);

  // A fork answering two messages.
  const forkId = newId('rich-fork');
  llm.push({ text: 'Both seen.' });
  const fork = await api(worker, 'POST', `/v1/sessions/${id}/fork`,
    { sessionId: forkId, messages: ['And this one?', { message: 'Same?', attachments: [png] }] });
  assert.equal(fork.status, 201, JSON.stringify(fork.body));
  await waitFor(worker, forkId, (s) => s.status === 'completed', 20_000);
  const said = (await api(worker, 'GET', `/v1/sessions/${forkId}/messages?limit=100`)).body.messages;
  assert.deepEqual(said.slice(-3).map((m) => [m.role, m.content]), [['user', 'And this one?'], ['user', 'Same?'], ['assistant', 'Both seen.']]);
  assert.deepEqual(said.at(-2).attachments, [png]);
});

test('a tool\'s picture reaches the model after its result, and stays in the transcript', async () => {
  const id = newId('painter');
  llm.push({ calls: [{ name: 'render_chart', args: { title: 'sales' } }] }, { text: 'A single pixel.' });
  const res = await api(worker, 'POST', '/v1/sessions', { agent: 'painter', sessionId: id, input: 'Chart the sales.' });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  await waitFor(worker, id, (s) => s.status === 'completed', 20_000);
  const pixel = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';
  const sent = llm.requests.at(-1).body.messages;
  const at = sent.findIndex((m) => m.role === 'tool');
  assert.equal(sent[at].content, JSON.stringify({ rendered: 'sales' }), 'the tool message stays text');
  const callId = sent[at].tool_call_id;
  assert.deepEqual(sent[at + 1], {
    role: 'user',
    content: [
      { type: 'text', text: `Files from the result of render_chart (call ${callId}):` },
      { type: 'image_url', image_url: { url: `data:image/png;base64,${pixel}` } },
    ],
  }, 'the picture follows, in Chat Completions\' own form');
  const { body } = await api(worker, 'GET', `/v1/sessions/${id}/messages`);
  const tool = body.messages.find((m) => m.role === 'tool');
  assert.deepEqual(tool.attachments, [{ type: 'image', mediaType: 'image/png', data: pixel, name: 'chart.png' }]);
});

test('a poster too large for the transcript is kept in R2 and reaches the model whole', async () => {
  const id = newId('poster');
  const size = 1_400_000; // base64 characters: over the 1 MiB a call keeps inline
  llm.push({ calls: [{ name: 'render_poster', args: { size } }] }, { text: 'A large poster.' });
  const res = await api(worker, 'POST', '/v1/sessions', { agent: 'illustrator', sessionId: id, input: 'A poster.' });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  await waitFor(worker, id, (s) => s.status === 'completed', 20_000);
  const sent = llm.requests.at(-1).body.messages;
  const at = sent.findIndex((m) => m.role === 'tool');
  const [, image] = sent[at + 1].content;
  assert.equal(image.image_url.url.length, 'data:image/png;base64,'.length + size, 'read back from R2, inline');
  assert.ok(image.image_url.url.startsWith('data:image/png;base64,AAAA'));

  const { body } = await api(worker, 'GET', `/v1/sessions/${id}/messages`);
  const tool = body.messages.find((m) => m.role === 'tool');
  assert.deepEqual(tool.attachments, [{
    type: 'image', mediaType: 'image/png', url: `stored:attachments/${id}/${tool.toolCallId}/0`, name: 'poster.png',
  }], 'the transcript keeps a reference');
});
