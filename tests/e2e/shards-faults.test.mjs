// A shard whose database fails (the test flavour's TEST_D1_FAULT, on one of four local
// D1 databases): the lists answer 503 naming it, or partial; a session on it runs as
// any other, its rows waiting in its object; once the database is back, replication
// catches up and the replica check finds every row equal.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { eventually, waitFor } from './client.mjs';
import { BINDINGS, SHARDS, shardOf, sharded } from './shards.mjs';

const s = sharded('test');
const { send, get, cycle, listed, rowsOf } = s;

before(async () => {
  await s.start();
  // Two sessions on each shard.
  const ids = [];
  for (let k = 0; ids.length < 2 * SHARDS; k++) {
    const id = `shard-${process.pid}-${k}`;
    if (ids.filter((x) => shardOf(x) === shardOf(id)).length < 2) ids.push(id);
  }
  await Promise.all(ids.map((id) => cycle(id)));
  await listed(ids.length);
});
after(async () => { await s.close(); });

test('a shard whose database fails: the lists say so, runs go on, replication catches up', async () => {
  const down = BINDINGS[2];
  const before = await listed(0);
  await s.stop();
  await s.start({ TEST_D1_FAULT: `down@${down}` });

  const list = await get('/v1/sessions');
  assert.equal(list.status, 503, JSON.stringify(list.body));
  assert.equal(list.body.error.code, 'storage_unavailable');
  assert.match(list.body.error.message, new RegExp(down));
  assert.equal((await get('/v1/inbox')).status, 503);
  const partial = await get('/v1/sessions?partial=true&limit=100');
  assert.equal(partial.status, 200);
  assert.deepEqual(partial.body.missingShards, [down]);
  const reachable = before.filter((id) => BINDINGS[shardOf(id)] !== down);
  assert.deepEqual(partial.body.sessions.map((s) => s.sessionId), reachable);
  assert.equal((await get('/v1/sessions?partial=maybe')).status, 400);

  // A session on the failing shard runs as any other; its rows wait in its object.
  let k = 0;
  while (BINDINGS[shardOf(`down-${process.pid}-${k}`)] !== down) k++;
  const id = `down-${process.pid}-${k}`;
  await cycle(id);
  assert.deepEqual(await rowsOf(down, `SELECT id FROM sessions WHERE id = '${id}'`), []);

  await s.stop();
  await s.start();
  await waitFor(s.worker, id, (s) => s.status === 'completed');
  await eventually(() => rowsOf(down, `SELECT id FROM sessions WHERE id = '${id}'`), (rows) => rows.length === 1);
  const report = await send('POST', `/__test/replica/${id}`);
  assert.equal(report.status, 200, JSON.stringify(report.body));
  assert.ok(report.body.caughtUp && report.body.equal, JSON.stringify(report.body));
  const all = await listed(before.length + 1);
  assert.ok(all.includes(id), 'listed once caught up');
});
