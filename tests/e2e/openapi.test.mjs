// The published API schema against the running worker: GET /v1/openapi.json serves the
// document; a seeded property-based fuzzer sends valid, mutated and hostile requests to
// every documented operation and checks that no answer is a 5xx, every status is one the
// document lists for the operation, and every JSON body matches the documented schema.
// Then races: simultaneous answers to one approval, simultaneous creators of one id.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { API_TOKEN, api, startWithMock, waitFor } from './client.mjs';

let worker;
let llm;
let doc;

before(async () => {
  // Notifications go to a sink that is not there: the routes answer as configured.
  ({ worker, llm } = await startWithMock({ NOTIFY_WEBHOOK_URL: 'http://127.0.0.1:9/hook' }));
  llm.respondWith((body) => {
    const last = body?.messages?.at(-1) ?? {};
    if (last.role === 'tool') return { text: 'Done.' };
    if (String(last.content).startsWith('delete ')) {
      return { calls: [{ name: 'delete_file', args: { path: String(last.content).slice(7) } }] };
    }
    return { text: 'ok' };
  });
});
after(async () => { await worker?.stop(); await llm?.close(); worker?.cleanup(); });

/** A small JSON Schema check (the keywords the document uses); returns the problems. */
function check(schema, value, path = '$') {
  if (schema.$ref) return check(doc.components.schemas[schema.$ref.split('/').pop()], value, path);
  if (schema.oneOf) {
    const fits = schema.oneOf.filter((s) => check(s, value, path).length === 0).length;
    return fits === 1 ? [] : [`${path}: matches ${fits} of oneOf`];
  }
  const errors = [];
  const typeOf = (v) => (v === null ? 'null' : Array.isArray(v) ? 'array'
    : Number.isInteger(v) ? 'integer' : typeof v);
  if (schema.type) {
    const types = [].concat(schema.type);
    const t = typeOf(value);
    if (!types.includes(t) && !(t === 'integer' && types.includes('number'))) {
      return [`${path}: ${t}, expected ${types.join('|')}`];
    }
  }
  if ('const' in schema && value !== schema.const) errors.push(`${path}: not ${schema.const}`);
  if (schema.enum && !schema.enum.includes(value)) errors.push(`${path}: ${value} not in enum`);
  if (schema.pattern && typeof value === 'string' && !new RegExp(schema.pattern).test(value)) {
    errors.push(`${path}: does not match ${schema.pattern}`);
  }
  if (value && typeof value === 'object' && !Array.isArray(value)) {
    for (const key of schema.required ?? []) if (!(key in value)) errors.push(`${path}: missing ${key}`);
    for (const [key, sub] of Object.entries(schema.properties ?? {})) {
      if (key in value) errors.push(...check(sub, value[key], `${path}.${key}`));
    }
  }
  if (Array.isArray(value) && schema.items) {
    value.forEach((v, i) => errors.push(...check(schema.items, v, `${path}[${i}]`)));
  }
  return errors;
}

/** A seeded PRNG (mulberry32), so a failing case can be replayed. */
function prng(seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const VALID_BODIES = {
  createSession: () => ({ agent: 'assistant', input: 'note fuzz' }),
  sendMessage: () => ({ message: 'again' }),
  submitToolResult: () => ({ kind: 'approval-response', toolCallId: 'call_x', approved: true }),
  interruptSession: () => ({ reason: 'fuzz' }),
  resumeSession: () => ({}),
  abortSession: () => ({ reason: 'fuzz' }),
  retrySession: () => ({ checkpointId: 'ckpt_nope' }),
  forkSession: () => ({ checkpointId: 'ckpt_nope' }),
  chat: () => ({ id: `fuzz-chat-${process.pid}`, messages: [{ role: 'user', parts: [{ type: 'text', text: 'hello' }] }] }),
};

const HOSTILE = [
  '', 'null', '[]', '[1', '{"a":', '"text"', '12', 'true', '{"agent": 5, "input": []}',
  '{"kind": "approval-response"}', '{"kind": "client-tool-result", "toolCallId": 7}',
  '{"message": ""}', '{"message": null}', '{"reason": {"deep": [1, 2]}}', '{"checkpointId": 3}',
  `{"agent": "assistant", "input": "${'x'.repeat(2000)}", "sessionId": "${'y'.repeat(129)}"}`,
  '{"agent": "nobody", "input": "hi"}', '{"agent": "assistant", "input": {"message": "m", "state": []}}',
  '{"agent": "assistant", "sessionId": "../etc/passwd", "input": "x"}',
  '{"agent": "assistant", "sessionId": "a\'; DROP TABLE sessions; --", "input": "x"}',
];

function mutate(body, rand) {
  const out = structuredClone(body);
  const keys = Object.keys(out);
  const values = [null, 0, -1, 1.5, '', 'x', [], {}, true, '\u0000', '🦀'.repeat(50)];
  switch (Math.floor(rand() * 4)) {
    case 0: if (keys.length) delete out[keys[Math.floor(rand() * keys.length)]]; break;
    case 1: if (keys.length) out[keys[Math.floor(rand() * keys.length)]] = values[Math.floor(rand() * values.length)]; break;
    case 2: out[`extra${Math.floor(rand() * 9)}`] = values[Math.floor(rand() * values.length)]; break;
    default: return values[Math.floor(rand() * values.length)];
  }
  return out;
}

test('GET /v1/openapi.json serves the OpenAPI 3.1 document of the v1 API', async () => {
  const res = await api(worker, 'GET', '/v1/openapi.json');
  assert.equal(res.status, 200);
  assert.equal(res.body.openapi, '3.1.0');
  doc = res.body;
  assert.equal((await api(worker, 'GET', '/v1/openapi.json', undefined, null)).status, 401);
  assert.equal((await api(worker, 'POST', '/v1/openapi.json', {})).status, 405);
});

test('a seeded fuzzer finds no 5xx and no answer outside the document', async () => {
  assert.ok(doc, 'the document was fetched');
  const real = `fuzz-${process.pid}`;
  assert.equal((await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: real, input: 'delete /tmp/f' })).status, 201);
  await waitFor(worker, real, (s) => s.pendingToolCalls.length === 1);
  const ids = [real, 'no-such-session', '..', 'a%2F..%2Fb', `${'z'.repeat(129)}`, '%F0%9F%A6%80', "a'%3B--", 'a%00b'];
  const seed = Number(process.env.FUZZ_SEED ?? 20261122);
  const rand = prng(seed);
  const problems = [];
  let requests = 0;
  for (const [template, item] of Object.entries(doc.paths)) {
    for (const method of ['get', 'post', 'delete']) {
      const op = item[method];
      if (!op) continue;
      for (let i = 0; i < 24; i++) {
        let id = ids[Math.floor(rand() * ids.length)];
        if (method === 'delete' && id === real) id = 'no-such-session'; // the real one is checked below
        let path = template.replace('{id}', id);
        if (op.operationId === 'listMessages') {
          const q = [['offset', Math.floor(rand() * 5) - 1], ['limit', [0, 1, 50, 501, 'x'][Math.floor(rand() * 5)]]];
          path += `?${q.map(([k, v]) => `${k}=${v}`).join('&')}`;
        }
        let body;
        if (method === 'post') {
          const valid = VALID_BODIES[op.operationId]?.() ?? {};
          const pick = rand();
          body = pick < 0.3 ? JSON.stringify(valid)
            : pick < 0.7 ? JSON.stringify(mutate(valid, rand))
              : pick < 0.95 ? HOSTILE[Math.floor(rand() * HOSTILE.length)]
                : Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d]); // invalid UTF-8
        }
        const controller = new AbortController();
        const res = await worker.fetch(path, {
          method: method.toUpperCase(),
          headers: { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json' },
          body,
          signal: controller.signal,
        });
        requests++;
        const where = `${method.toUpperCase()} ${path} ${typeof body === 'string' ? body.slice(0, 80) : '<bytes>'}`;
        // An id of `..` takes the path to another route (`/v1/sessions/../schedules` is
        // `/v1/schedules`): the answer is that route's, documented there.
        const served = new URL(path, 'http://x').pathname;
        let answered = op;
        if (served !== path.split('?')[0]) {
          const route = Object.entries(doc.paths).find(([t]) => new RegExp(`^${t.replace(/\{[^}]+\}/g, '[^/]+')}$`).test(served));
          if (route) answered = route[1][method] ?? { responses: { 405: { description: 'the route\'s other methods' } } };
        }
        const documented = answered.responses[String(res.status)];
        if (res.status >= 500) problems.push(`${res.status} for ${where}`);
        else if (!documented) problems.push(`undocumented ${res.status} for ${where}`);
        if (res.headers.get('content-type')?.includes('text/event-stream')) {
          controller.abort();
          continue;
        }
        const text = await res.text();
        if (res.status === 204) {
          if (text !== '') problems.push(`a body with 204 for ${where}`);
          continue;
        }
        // A page for a browser (the MCP callback's) is HTML, as documented.
        if (documented?.content?.['text/html']) {
          if (!res.headers.get('content-type')?.startsWith('text/html')) problems.push(`not HTML: ${res.status} for ${where}`);
          continue;
        }
        let json;
        try { json = JSON.parse(text); } catch { problems.push(`non-JSON ${res.status} for ${where}`); continue; }
        let schema = documented?.$ref ? doc.components.responses[documented.$ref.split('/').pop()] : documented;
        schema = schema?.content?.['application/json']?.schema;
        if (schema) {
          const errors = check(schema, json);
          if (errors.length) problems.push(`schema: ${errors.join('; ')} for ${where}`);
        }
      }
    }
  }
  assert.ok(requests >= 300, `requests sent: ${requests}`);
  assert.deepEqual(problems, [], `seed ${seed}`);
  // No hostile request changed the pending approval of the real session, or made it fail.
  const after = await api(worker, 'GET', `/v1/sessions/${real}`);
  assert.ok(['active', 'aborted', 'interrupted'].includes(after.body.status), JSON.stringify(after.body));
});

test('50 trials of two simultaneous answers to one approval: one 202, one 409, the tool ran once', async () => {
  for (let trial = 0; trial < 50; trial++) {
    const id = `race-${process.pid}-${trial}`;
    assert.equal((await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input: `delete /tmp/r${trial}` })).status, 201);
    const s = await waitFor(worker, id, (x) => x.pendingToolCalls.length === 1);
    const call = s.pendingToolCalls[0].toolCallId;
    const answer = () => api(worker, 'POST', `/v1/sessions/${id}/tool-results`,
      { kind: 'approval-response', toolCallId: call, approved: true });
    const statuses = (await Promise.all([answer(), answer()])).map((r) => r.status).sort();
    assert.deepEqual(statuses, [202, 409], `trial ${trial}`);
    const done = await waitFor(worker, id, (x) => x.status === 'completed');
    assert.equal(done.pendingToolCalls.length, 0);
    const msgs = await api(worker, 'GET', `/v1/sessions/${id}/messages`);
    const results = msgs.body.messages.filter((m) => m.role === 'tool' && m.toolCallId === call);
    assert.equal(results.length, 1, `trial ${trial}: one result`);
    assert.deepEqual(results[0].content, { deleted: `/tmp/r${trial}` }, `trial ${trial}: it ran`);
  }
});

test('simultaneous creators of one session id: exactly one 201, the rest 409', async () => {
  for (let trial = 0; trial < 10; trial++) {
    const id = `creators-${process.pid}-${trial}`;
    const all = await Promise.all(Array.from({ length: 6 }, () =>
      api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input: 'note hi' })));
    const statuses = all.map((r) => r.status).sort();
    assert.deepEqual(statuses, [201, 409, 409, 409, 409, 409], `trial ${trial}`);
    assert.ok(all.filter((r) => r.status === 409).every((r) => r.body.error.code === 'session_exists'));
  }
});
