import { test } from 'node:test';
import assert from 'node:assert/strict';
import { HelixClient } from '../dist/index.js';
import { chunk, frame, json, scripted, sse } from './fake.mjs';

const snapshot = (over = {}) => ({
  sessionId: 's1', agent: 'a', status: 'active', stepCount: 1, version: 1,
  state: { notes: ['a'] }, pendingToolCalls: [], canResume: false, resumeReason: 'running',
  streamSequence: 4, ...over,
});

function mirrorOf(handlers) {
  const s = scripted(handlers);
  const c = new HelixClient({ baseUrl: 'http://w.test', fetch: s.fetch });
  return { ...s, session: c.session('s1') };
}

test('the mirror applies the patches after the snapshot, in order, and tracks pending calls', async () => {
  const { session, requests } = mirrorOf([
    () => json(200, snapshot()),
    () => sse([
      chunk(5, 'state_patch', { patches: [{ op: 'add', path: '/notes/-', value: 'b' }] }),
      // A child's patch is relayed to the parent's stream; it is not the parent's state.
      chunk(6, 'state_patch', { patches: [{ op: 'add', path: '/x', value: 1 }] }, 's1-child'),
      chunk(7, 'tool_approval_request', { toolCallId: 'c1', toolName: 'delete_file', arguments: { path: '/x' } }),
      chunk(8, 'tool_start', { toolCallId: 'c2', toolName: 'ask_user', arguments: {}, executor: 'client', deadline: 9 }),
      chunk(9, 'tool_end', { toolCallId: 'c1', toolName: 'delete_file', success: true }),
      chunk(10, 'state_patch', { patches: [{ op: 'replace', path: '/notes/0', value: 'A' }] }),
      chunk(11, 'run_finished', { status: 'completed' }),
      frame(12, 'end', {}),
    ]),
  ]);
  const mirror = await session.mirror();
  const pending = [];
  mirror.subscribe((m, e) => e?.seq === 8 && pending.push(m.pendingToolCalls.map((p) => `${p.toolCallId}:${p.kind}`)));
  await mirror.settled();
  assert.equal(requests[1].headers['last-event-id'], '4');
  assert.deepEqual(mirror.state, { notes: ['A', 'b'] });
  assert.deepEqual(pending, [['c1:approval', 'c2:client']]);
  assert.equal(mirror.status, 'completed');
  assert.equal(mirror.sequence, 12);
  assert.equal(mirror.resyncs, 0);
});

for (const [name, events] of [
  ['a gap in the sequence', [chunk(6, 'state_patch', { patches: [{ op: 'add', path: '/notes/-', value: 'lost' }] })]],
  ['a stream_resync', [chunk(5, 'stream_resync', { checkpointId: 'k', stepCount: 1, messageCount: 2, fromSequence: 3, reason: 'crash_recovery' })]],
  ['a patch that does not apply', [chunk(5, 'state_patch', { patches: [{ op: 'replace', path: '/missing/deep', value: 1 }] })]],
  ['a truncated notice', [frame(20, 'truncated', { fromSequence: 21, requestedAfter: 4 })]],
]) {
  test(`${name} makes the mirror refetch instead of drifting`, async () => {
    const { session } = mirrorOf([
      () => json(200, snapshot()),
      () => sse(events, { then: 'hang' }),
      () => json(200, snapshot({ state: { notes: ['server'] }, streamSequence: 30, status: 'completed' })),
      () => sse([]),
      () => json(200, snapshot({ status: 'completed' })),
    ]);
    const mirror = await session.mirror({ initialDelayMs: 1 });
    await mirror.settled();
    assert.equal(mirror.resyncs, 1);
    assert.deepEqual(mirror.state, { notes: ['server'] });
    mirror.close();
  });
}

test('a stream error stops the mirror with the error recorded and listeners told, never unhandled', async () => {
  const { session } = mirrorOf([
    () => json(200, snapshot()),
    () => json(404, { error: { code: 'session_not_found', message: 'No such session.', retryable: false } }),
  ]);
  const mirror = await session.mirror();
  const told = [];
  mirror.subscribe((m) => told.push(m.error?.code));
  await mirror.settled();
  assert.equal(mirror.error.code, 'session_not_found');
  assert.deepEqual(told, ['session_not_found']);
});

test('a follow asked for while the ended run\'s stream is still open follows the next run', async () => {
  const { session, requests } = mirrorOf([
    () => json(200, snapshot()),
    () => sse([chunk(5, 'run_interrupted', {}), frame(6, 'end', {})]),
    () => sse([
      chunk(7, 'run_resumed', {}),
      chunk(8, 'state_patch', { patches: [{ op: 'add', path: '/notes/-', value: 'b' }] }),
      chunk(9, 'run_finished', { status: 'completed' }),
      frame(10, 'end', {}),
    ]),
  ]);
  const mirror = await session.mirror();
  // A resume sent as the interruption arrives, before the stream's `end`: the handle
  // asks the mirror to follow while it still follows the old stream.
  mirror.subscribe((m, e) => e?.type === 'run_interrupted' && mirror.follow());
  await mirror.settled();
  assert.equal(requests.length, 3);
  assert.equal(requests[2].headers['last-event-id'], '6');
  assert.equal(mirror.status, 'completed');
  assert.deepEqual(mirror.state, { notes: ['a', 'b'] });
  mirror.close();
});

test('a mirror follows a stream a request answered with, passing over what its snapshot has', async () => {
  const { session, requests } = mirrorOf([
    // The follow-up's answer: its run's stream after event 2 (the snapshot comes after it).
    () => sse([
      chunk(3, 'run_started', { turn: 2 }),
      chunk(4, 'state_patch', { patches: [{ op: 'add', path: '/notes/-', value: 'a' }] }),
      chunk(5, 'state_patch', { patches: [{ op: 'add', path: '/notes/-', value: 'b' }] }),
      chunk(6, 'run_finished', { status: 'completed' }),
      frame(7, 'end', {}),
    ], { headers: { 'x-helix-after': '2', 'x-helix-run-id': 'r2' } }),
    () => json(200, snapshot()),
  ]);
  const { events } = await session.sendStreaming('more');
  const mirror = await session.mirror({}, events);
  await mirror.settled();
  assert.deepEqual(requests.map((r) => r.method), ['POST', 'GET'], 'no stream opened besides the answer');
  assert.deepEqual(mirror.state, { notes: ['a', 'b'] });
  assert.deepEqual([mirror.status, mirror.sequence, mirror.resyncs], ['completed', 7, 0]);
});
