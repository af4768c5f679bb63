// What runs here is what `wrangler deploy` uploads. The production artifact the suite
// starts (target/artifacts/production) is byte for byte the wasm that `wrangler deploy
// --dry-run` wrote (target/artifacts/deploy, named by its SHA-1), and it serves every
// route of the API: none answers that the worker was built without the feature that
// serves it, and every agent that shows a capability is offered (those that need a
// binding or a var the suite does not give say what to set).

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { api, startWithMock } from './client.mjs';
import { ARTIFACTS, ROOT } from './harness.mjs';

const digest = (algorithm, bytes) => createHash(algorithm).update(bytes).digest('hex');

test('the production artifact is the wasm wrangler deploy uploads', () => {
  const deploy = join(ARTIFACTS, 'deploy');
  const [name, ...more] = readdirSync(deploy).filter((f) => f.endsWith('.wasm'));
  assert.deepEqual(more, [], 'one wasm module in the upload');
  const uploaded = readFileSync(join(deploy, name));
  assert.equal(`${digest('sha1', uploaded)}-index_bg.wasm`, name, 'wrangler names the module by its SHA-1');
  const production = readFileSync(join(ARTIFACTS, 'production', 'index_bg.wasm'));
  assert.equal(digest('sha256', production), digest('sha256', uploaded));
  const test = readFileSync(join(ARTIFACTS, 'test', 'index_bg.wasm'));
  assert.notEqual(digest('sha256', test), digest('sha256', uploaded), 'the test flavour is another build');
});

let worker;
let llm;
before(async () => { ({ worker, llm } = await startWithMock()); });
after(async () => { await worker?.stop(); await llm?.close(); worker?.cleanup(); });

test('every route of the API is served: no capability was left out of the build', async () => {
  const doc = JSON.parse(readFileSync(join(ROOT, 'api', 'openapi.json'), 'utf8'));
  let checked = 0;
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const method of ['get', 'post', 'delete']) {
      if (!item[method] || path === '/v1/sessions/{id}/stream' || path === '/v1/chat/{id}/stream') continue;
      const concrete = path.replaceAll(/\{[^}]+\}/g, 'artifact-probe');
      const res = await api(worker, method.toUpperCase(), concrete, method === 'get' || method === 'delete' ? undefined : {});
      const message = res.body?.error?.message ?? '';
      assert.ok(!/built without/.test(message), `${method.toUpperCase()} ${path}: ${message}`);
      assert.ok(res.status < 500 || res.status === 503, `${method.toUpperCase()} ${path}: ${res.status} ${JSON.stringify(res.body)}`);
      checked++;
    }
  }
  assert.ok(checked >= 30, `${checked} operations`);
});

test('every capability has its agent; those missing a var or binding say what to set', async () => {
  const { agents } = (await api(worker, 'GET', '/v1/agents')).body;
  const names = agents.map((a) => a.name);
  for (const name of ['assistant', 'coordinator', 'researcher', 'orders', 'team', 'dispatcher', 'secretary',
    'treasurer', 'librarian', 'librarian-kv', 'illustrator', 'typed', 'lister', 'thinker', 'painter', 'observed', 'connector']) {
    assert.ok(names.includes(name), `${name} in ${names}`);
  }
  assert.ok(!names.includes('ledger'), 'the test flavour\'s agent is not in the product');
  const needs = Object.fromEntries(agents.filter((a) => a.needs).map((a) => [a.name, a.needs]));
  assert.deepEqual(Object.keys(needs).sort(), ['connector', 'dispatcher'], 'the suite sets neither MCP_SERVER_URL nor REMOTE_AGENT_URL');
  assert.match(needs.connector, /MCP_SERVER_URL/);
  const refused = await api(worker, 'POST', '/v1/sessions', { agent: 'dispatcher', input: 'hi' });
  assert.equal(refused.status, 503, JSON.stringify(refused.body));
  assert.equal(refused.body.error.code, 'agent_not_configured');
  assert.match(refused.body.error.message, /REMOTE_AGENT_URL/);
  assert.equal(llm.requests.length, 0, 'no model was asked');
});
