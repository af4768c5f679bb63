// The store and journal conformance suites against a session object's own SQLite, on
// the platform (the test flavour's `/__test/conformance`): the same suites every store
// backend passes natively.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { api, startWithMock } from './client.mjs';

let worker;
let llm;
before(async () => { ({ worker, llm } = await startWithMock({}, undefined, { flavour: 'test' })); });
after(async () => { await worker?.stop(); await llm?.close(); worker?.cleanup(); });

test('the session object\'s SQLite passes the store and journal conformance suites', async () => {
  const res = await api(worker, 'POST', '/__test/conformance', {});
  assert.equal(res.status, 200);
  const failed = res.body.results.filter((r) => !r.ok);
  assert.deepEqual(failed, []);
  const modes = res.body.results.map((r) => r.name.split(':')[0]);
  const count = (mode) => modes.filter((m) => m === mode).length;
  const parts = ['store', 'journal stream log', 'journal step attempts', 'journal suspension'];
  assert.deepEqual(parts.map(count), [12, 6, 1, 5]);
});
