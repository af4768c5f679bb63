// Erasing a session tree (the test flavour: its replica check counts the rows of the
// session objects' own storage): DELETE of a root that waits on its child removes both
// — every row of the object's storage and of D1 — and ends the open stream; a child
// alone is refused; a second DELETE is 404.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { api, startWithMock } from './client.mjs';
import { openStream } from './sse.mjs';
import { research } from './research.mjs';

let worker;
let llm;

before(async () => {
  ({ worker, llm } = await startWithMock({ SSE_PING_MS: '300' }, undefined, { flavour: 'test' }));
  llm.respondWith(research);
});
after(async () => { await worker?.stop(); await llm?.close(); worker?.cleanup(); });

let n = 0;
const newId = (name) => `${name}-${process.pid}-${++n}`;

async function create(id, input) {
  const res = await api(worker, 'POST', '/v1/sessions', { agent: 'coordinator', sessionId: id, input });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body;
}

const stream = (id) => openStream(`${worker.baseUrl}/v1/sessions/${id}/stream`, {
  headers: { authorization: 'Bearer e2e-api-token' },
});

test('DELETE removes a waiting session, its children and every row of them; a child alone is refused; again is 404', async () => {
  const id = newId('erase');
  await create(id, 'delete /tmp/secret');
  const sse = await stream(id);
  const seen = await sse.until((e) => e.type === 'tool_approval_request');
  const childId = seen.find((e) => e.type === 'tool_approval_request').json.sessionId;
  const rows = async (session) => {
    const report = await api(worker, 'POST', `/__test/replica/${session}`);
    assert.equal(report.status, 200, JSON.stringify(report.body));
    assert.equal(report.body.caughtUp, true);
    return report.body.rows;
  };
  const before = await rows(id);
  assert.ok(before.local > 0 && before.remote === before.local, JSON.stringify(before));

  const child = await api(worker, 'DELETE', `/v1/sessions/${childId}`);
  assert.deepEqual([child.status, child.body.error.code], [409, 'session_is_subagent']);
  assert.match(child.body.error.message, new RegExp(id));

  const gone = await api(worker, 'DELETE', `/v1/sessions/${id}`);
  assert.equal(gone.status, 204, JSON.stringify(gone.body));
  await sse.closed; // the open stream ends
  for (const session of [id, childId]) {
    const got = await api(worker, 'GET', `/v1/sessions/${session}`);
    assert.deepEqual([got.status, got.body.error.code], [404, 'session_not_found'], session);
    assert.deepEqual(await rows(session), { local: 0, remote: 0 }, `nothing of ${session} is left`);
  }
  const listed = await api(worker, 'GET', '/v1/sessions?limit=100');
  assert.ok(!listed.body.sessions.some((s) => s.sessionId === id || s.sessionId === childId));
  const again = await api(worker, 'DELETE', `/v1/sessions/${id}`);
  assert.deepEqual([again.status, again.body.error.code], [404, 'session_not_found']);
  const approve = await api(worker, 'POST', `/v1/sessions/${id}/tool-results`,
    { kind: 'approval-response', toolCallId: 'x', approved: true });
  assert.equal(approve.status, 404, 'nothing can be done in it');
});
