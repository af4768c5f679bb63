// The record over four local D1 databases (`DATABASE_SHARDS`): a worker (and its mock
// model) started over them, and the requests the shards' tests make of it. Shared by
// shards.test.mjs (the deployed artifact) and shards-faults.test.mjs (the test flavour,
// which fails a shard's database on purpose).

import assert from 'node:assert/strict';
import { API_TOKEN, api, byRole, eventually, startWithMock, waitFor } from './client.mjs';
import { d1Rows, shardBindings, shardOf as shardOfN } from './harness.mjs';
import { openStream } from './sse.mjs';

export const SHARDS = 4;
export const BINDINGS = shardBindings(SHARDS);

/** The shard (of four) helix-edge gives a root session. */
export const shardOf = (id) => shardOfN(id, SHARDS);

/** A sharded worker: `start(vars)` (again, over the same databases, after `stop()`),
 *  and the calls the tests make of it. */
export function sharded(flavour = 'production') {
  const s = { worker: undefined, llm: undefined, persistDir: undefined };
  s.start = async (vars = {}) => {
    ({ worker: s.worker, llm: s.llm } = await startWithMock({ SSE_PING_MS: '1000', ...vars }, s.persistDir, { shards: SHARDS, flavour }));
    s.persistDir = s.worker.persistDir;
    s.llm.respondWith(byRole);
  };
  s.stop = async () => { await s.worker?.stop(); await s.llm?.close(); };
  s.close = async () => { await s.stop(); if (!process.env.KEEP_E2E_STATE) s.worker?.cleanup(); };
  s.rowsOf = (binding, sql) => d1Rows(s.worker, binding, sql);
  s.idsOn = async (binding) => (await s.rowsOf(binding, 'SELECT id FROM sessions ORDER BY id')).map((r) => r.id);

  /**
   * A request sent again when the connection drops: a kept-alive connection to wrangler's
   * proxy is now and then closed under a request that follows a pause (the seconds a
   * `d1 execute` takes; load.test.mjs counts the same drops). A GET is safe to send twice;
   * a POST sent again that meets 409 had landed the first time.
   */
  s.send = async (method, path, body) => {
    for (let attempt = 1; ; attempt++) {
      try {
        const res = await api(s.worker, method, path, body);
        const landed = attempt > 1 && (res.status === 409 || (method === 'DELETE' && res.status === 404));
        if (!landed) return res;
        return { status: { POST: path === '/v1/sessions' ? 201 : 202, DELETE: 204 }[method], body: {} };
      } catch (e) {
        if (attempt === 3) throw e;
      }
    }
  };
  s.get = (path) => s.send('GET', path);

  /** One approval cycle of session `id`: create, the approval on its stream, approve, completed. */
  s.cycle = async (id) => {
    const created = await s.send('POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input: `/tmp/${id}` });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const streamUrl = created.body.streamUrl ?? `/v1/sessions/${id}/stream?after=0`;
    const stream = await openStream(`${s.worker.baseUrl}${streamUrl}`, { headers: { authorization: `Bearer ${API_TOKEN}` } });
    const events = await stream.until((e) => e.type === 'tool_approval_request', 30_000);
    stream.close();
    const asked = events.find((e) => e.type === 'tool_approval_request');
    const answered = await s.send('POST', `/v1/sessions/${id}/tool-results`,
      { kind: 'approval-response', toolCallId: asked.json.toolCallId, approved: true });
    assert.equal(answered.status, 202, JSON.stringify(answered.body));
    await waitFor(s.worker, id, (session) => session.status === 'completed', 30_000);
  };

  /** Every page of GET `path` (`limit` at a time): the items `pick` takes from each. */
  s.pages = async (path, limit, pick) => {
    const seen = [];
    let cursor;
    for (;;) {
      const sep = path.includes('?') ? '&' : '?';
      const res = await s.get(`${path}${sep}limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      seen.push(...pick(res.body));
      if (!res.body.nextCursor) return seen;
      cursor = res.body.nextCursor;
    }
  };

  /** Waits until the session list holds `n` sessions (replication is in the background). */
  s.listed = (n) => eventually(() => s.pages('/v1/sessions', 100, (b) => b.sessions.map((x) => x.sessionId)), (ids) => ids.length >= n);
  return s;
}
