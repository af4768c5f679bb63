// A newcomer's path, as the README shows it: generate a worker with
// `scripts/new-worker.sh`, run its own tests with plain `cargo test`, serve it in
// `wrangler dev` with the demo model its `.dev.vars.example` scripts, and drive one
// human-in-the-loop cycle through the TypeScript client installed from its `npm pack`
// tarball into the new project.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, startWorker } from './harness.mjs';

const BASE = join(ROOT, '.e2e', `starter-${process.pid}`);
const APP = join(BASE, 'todo-worker');
const run = (cmd, args, cwd) => execFileSync(cmd, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

let worker;
before(() => mkdirSync(BASE, { recursive: true }));
after(async () => { await worker?.stop(); worker?.cleanup(); rmSync(BASE, { recursive: true, force: true }); });

test('a generated worker tests natively, serves the dev model, and the packed client drives an approval', async () => {
  run('bash', [join(ROOT, 'scripts', 'new-worker.sh'), 'todo-worker', APP], ROOT);
  const tested = run('cargo', ['test'], APP);
  assert.match(tested, /test result: ok\. 2 passed/);

  // The client, packed as it would be published, installed into the new project.
  run('npm', ['pack', '--pack-destination', BASE], join(ROOT, 'clients', 'js'));
  const tarball = readdirSync(BASE).find((f) => f.endsWith('.tgz'));
  assert.ok(tarball, 'npm pack made a tarball');
  run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', join(BASE, tarball)], APP);

  copyFileSync(join(APP, '.dev.vars.example'), join(APP, '.dev.vars'));
  // Its [build] compiles the wasm-dev profile the first time.
  worker = await startWorker({ dir: APP, timeoutMs: 400_000 });

  writeFileSync(join(APP, 'cycle.mjs'), `
import { HelixClient } from '@helix-edge/client';
const client = new HelixClient({ baseUrl: process.argv[2], token: 'dev-token' });
const session = await client.createSession({ agent: 'assistant', input: 'add buy milk' });
let seq = 0;
for await (const e of session.events()) { seq = e.seq; if (e.type === 'end') break; }
const added = (await session.get()).state;
await session.send('now clear the list');
const seen = [];
for await (const e of session.events({ after: seq })) {
  seen.push(e.type);
  if (e.type === 'tool_approval_request') await session.approve(e.toolCallId);
  if (e.type === 'end') break;
}
const view = await session.get();
const last = (await session.messagePage(0, 50)).messages.at(-1);
console.log(JSON.stringify({ added, seen, status: view.status, state: view.state, reply: last.content }));
`);
  const out = JSON.parse(run('node', ['cycle.mjs', worker.baseUrl], APP));
  assert.deepEqual(out.added, { todos: ['buy milk'] });
  assert.ok(out.seen.includes('tool_approval_request'), `an approval was asked: ${out.seen}`);
  assert.ok(out.seen.indexOf('tool_approval_request') < out.seen.indexOf('tool_end'), 'the tool ran after the approval');
  assert.equal(out.status, 'completed');
  assert.deepEqual(out.state, { todos: [] });
  assert.equal(out.reply, 'The list is clear.');
});
