import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { startWorker } from './harness.mjs';

let worker;
before(async () => { worker = await startWorker(); });
after(async () => { await worker?.stop(); worker?.cleanup(); });

test('GET /healthz answers 200 {"ok":true} without credentials', async () => {
  const res = await worker.fetch('/healthz');
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type'), /application\/json/);
  assert.deepEqual(await res.json(), { ok: true });
});

test('an unknown route answers a JSON 404 (after authentication, which every other route needs)', async () => {
  const anonymous = await worker.fetch('/no-such-route');
  assert.equal(anonymous.status, 401, 'fail closed: credentials come first');
  const res = await worker.fetch('/no-such-route', { headers: { authorization: 'Bearer e2e-api-token' } });
  assert.equal(res.status, 404);
  const body = await res.json();
  assert.equal(body.error.code, 'not_found');
  assert.equal(typeof body.error.message, 'string');
  assert.equal(body.error.retryable, false);
});
