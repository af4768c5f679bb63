// Agent contracts over HTTP against the real worker (wrangler dev, local D1 and Durable
// Objects, a scripted OpenAI-compatible model): typed state checked on create, a
// client result checked against its tool's output schema, typed output that is not an
// object, and the schemas `GET /v1/agents` shows.

import { after, before, beforeEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { api, startWithMock, waitFor } from './client.mjs';

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
