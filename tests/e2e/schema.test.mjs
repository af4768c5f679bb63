// A database whose schema is behind the library's: every API request answers a clear
// 503 naming the missing migration (never a raw SQL error), and once the migrations are
// applied the worker serves again.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { API_TOKEN, api } from './client.mjs';
import { ROOT, startWorker } from './harness.mjs';

test('an unmigrated database answers 503 schema_outdated naming the migration, until it is migrated', async () => {
  let worker = await startWorker({ migrate: false, vars: { API_TOKEN } });
  try {
    let last;
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline) {
      last = await api(worker, 'GET', '/v1/agents');
      if (last.status === 503) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.equal(last.status, 503, JSON.stringify(last.body));
    assert.equal(last.body.error.code, 'schema_outdated');
    assert.equal(last.body.error.retryable, true);
    assert.match(last.body.error.message, /0001_init\.sql/);
    assert.doesNotMatch(last.body.error.message, /no such table|SQLITE|D1_ERROR/);
    const health = await worker.fetch('/healthz');
    assert.equal(health.status, 200, 'healthz needs no database');
    const create = await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', input: 'hi' });
    assert.equal(create.status, 503);
    assert.equal(create.body.error.code, 'schema_outdated');

    await worker.stop();
    const wrangler = join(ROOT, 'node_modules', '.bin', 'wrangler');
    const applied = spawnSync(wrangler, ['d1', 'migrations', 'apply', 'DB', '--local', '--persist-to', worker.persistDir], {
      cwd: ROOT, encoding: 'utf8', env: { ...process.env, WRANGLER_SEND_METRICS: 'false', CI: 'true' },
    });
    assert.equal(applied.status, 0, applied.stderr);
    worker = await startWorker({ persistDir: worker.persistDir, migrate: false, vars: { API_TOKEN } });
    const agents = await api(worker, 'GET', '/v1/agents');
    assert.equal(agents.status, 200);
    await new Promise((r) => setTimeout(r, 500));
    assert.equal((await api(worker, 'GET', '/v1/agents')).status, 200, 'still current after the check');
  } finally {
    await worker.stop();
    worker.cleanup();
  }
});
