// The cycles the benchmarks drive (bench/e2e.mjs times them, bench/profile.mjs profiles
// them), and the mock model's script for them.

import { API_TOKEN, api } from '../tests/e2e/client.mjs';
import { openStream } from '../tests/e2e/sse.mjs';

/** The model: asks to delete a file (approval always), then answers once it ran. */
export function respond(body) {
  const last = body?.messages?.at(-1);
  if (last?.role === 'tool') return { text: 'Deleted.' };
  return { calls: [{ name: 'delete_file', args: { path: '/tmp/bench' } }] };
}

/** Throws unless `res` has `status`. */
export function expectStatus(what, res, status) {
  if (res.status !== status) throw new Error(`${what}: ${res.status} ${JSON.stringify(res.body)}`);
}

const stream = (worker, path) => openStream(`${worker.baseUrl}${path}`, {
  headers: { authorization: `Bearer ${API_TOKEN}` },
});

/**
 * The floor's cycle (test build): two of the least a session request can do, in
 * sequence (`/__test/floor`). Times in ms: `one`, `two`.
 */
export async function floorCycle(worker, id, check = expectStatus) {
  const t0 = performance.now();
  check('floor', await api(worker, 'POST', `/__test/floor/${id}`), 200);
  const t1 = performance.now();
  check('floor', await api(worker, 'POST', `/__test/floor/${id}`), 200);
  return { one: t1 - t0, two: performance.now() - t0 };
}

/**
 * A HITL cycle: (a) POST /v1/sessions (with `input`) → `tool_approval_request` on the
 * session's SSE stream, (b) the approval POST (after `pauseMs`, a person's pause) → the
 * stream's `end`.
 * `check(what, res, status)` judges each answer. Times in ms: `a`, `b`, `cycle`.
 */
export async function hitlCycle(worker, id, check = expectStatus, pauseMs = 0, input = 'delete /tmp/bench') {
  const t0 = performance.now();
  const created = await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input });
  check('create', created, 201);
  const sse = await stream(worker, `/v1/sessions/${id}/stream`);
  try {
    const events = await sse.until((e) => e.type === 'tool_approval_request');
    const t1 = performance.now();
    const request = events.find((e) => e.type === 'tool_approval_request');
    if (pauseMs > 0) await new Promise((r) => setTimeout(r, pauseMs));
    const approved = await api(worker, 'POST', `/v1/sessions/${id}/tool-results`, {
      kind: 'approval-response', toolCallId: request.json.toolCallId, approved: true,
    });
    check('approve', approved, 202);
    await sse.until((e) => e.type === 'end');
    const t2 = performance.now();
    return { a: t1 - t0, b: t2 - t1, cycle: t2 - t0 };
  } finally {
    sse.close();
  }
}

/**
 * The same HITL cycle in two requests (SPEC §2d, one request fewer): (a) the create
 * answers with the run's stream, read to `tool_approval_request`; (b) the approval
 * answers with the continuation, read to `end`. Times as above.
 */
export async function streamedCycle(worker, id, check = expectStatus, input = 'delete /tmp/bench') {
  const headers = { authorization: `Bearer ${API_TOKEN}` };
  const t0 = performance.now();
  const created = await openStream(`${worker.baseUrl}/v1/sessions`, {
    method: 'POST', headers, body: { agent: 'assistant', sessionId: id, input },
  });
  check('streamed create', { status: created.status, body: created.body }, 201);
  let request;
  try {
    const events = await created.until((e) => e.type === 'tool_approval_request');
    request = events.find((e) => e.type === 'tool_approval_request');
  } finally {
    created.close();
  }
  const t1 = performance.now();
  const approved = await openStream(`${worker.baseUrl}/v1/sessions/${id}/tool-results`, {
    method: 'POST', headers, body: { kind: 'approval-response', toolCallId: request.json.toolCallId, approved: true },
  });
  check('streamed approve', { status: approved.status, body: approved.body }, 202);
  try {
    await approved.until((e) => e.type === 'end');
  } finally {
    approved.close();
  }
  const t2 = performance.now();
  return { a: t1 - t0, b: t2 - t1, cycle: t2 - t0 };
}

/**
 * The crossings floor's cycle (test build): the same requests, stream and model calls
 * as a HITL cycle without helix-edge's work (`/__test/crossings`). Times as above.
 */
export async function crossingsCycle(worker, id, check = expectStatus) {
  const t0 = performance.now();
  check('crossings create', await api(worker, 'POST', `/__test/crossings/${id}`), 201);
  const sse = await stream(worker, `/__test/crossings/${id}/stream`);
  try {
    await sse.until((e) => e.type === 'tool_approval_request');
    const t1 = performance.now();
    check('crossings approve', await api(worker, 'POST', `/__test/crossings/${id}/approve`), 202);
    await sse.until((e) => e.type === 'end');
    const t2 = performance.now();
    return { a: t1 - t0, b: t2 - t1, cycle: t2 - t0 };
  } finally {
    sse.close();
  }
}
