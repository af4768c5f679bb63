// The API document is the whole truth: schemathesis (the outside schema fuzzer, from
// PyPI; `scripts/test.sh` installs it) runs against the real worker with every check —
// no 5xx, every status and body as documented, schema-valid requests accepted and
// schema-violating ones refused, 405s with `Allow`, auth honoured, a deleted session
// gone — through its coverage, fuzzing and stateful phases (the stateful phase follows
// the document's links: create → every session operation, a pending call → its
// answer). Any finding fails the test. `SCHEMATHESIS_SEED` replays a run.
//
// The stream (`GET …/stream`) is left to the SSE tests: a suspended session's stream
// stays open by design, which a request/response fuzzer reads as a hang.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { API_TOKEN, startWithMock } from './client.mjs';
import { ROOT } from './harness.mjs';

const ST = process.env.SCHEMATHESIS_BIN ?? join(ROOT, 'target', 'schemathesis', 'bin', 'st');
const SEED = process.env.SCHEMATHESIS_SEED ?? '20261124';
const EXAMPLES = process.env.SCHEMATHESIS_EXAMPLES ?? '25';

let worker;
let llm;
before(async () => {
  ({ worker, llm } = await startWithMock());
  // Every model call answers; a message asking to delete something needs an approval,
  // so that the stateful phase meets pending calls.
  llm.respondWith((body) => {
    const last = body.messages?.at(-1);
    if (last?.role === 'user' && String(last.content).startsWith('delete ')) {
      return { calls: [{ name: 'delete_file', args: { path: String(last.content).slice(7) } }] };
    }
    return { text: 'ok' };
  });
});
after(async () => { await worker?.stop(); await llm?.close(); worker?.cleanup(); });

function run(args) {
  return new Promise((resolve, reject) => {
    const child = spawn(ST, args, {
      cwd: dirname(dirname(ST)), // its cache (`.schemathesis/`) stays out of the repository
      env: {
        ...process.env,
        SCHEMATHESIS_HOOKS: 'hooks',
        PYTHONPATH: join(ROOT, 'tests', 'schemathesis'),
        NO_COLOR: '1',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { out += d; });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, out }));
  });
}

// The chat routes answer with streams the links cannot lead on from, and their inferred
// links crowd out the document's: the stateful phase runs without them, in a run of its
// own.
const common = (phases, ...excluded) => [
  'run', `${worker.baseUrl}/v1/openapi.json`,
  '--header', `Authorization: Bearer ${API_TOKEN}`,
  '--checks', 'all',
  '--phases', phases,
  ...['streamSession', ...excluded].flatMap((id) => ['--exclude-operation-id', id]),
  '--max-examples', EXAMPLES,
  '--seed', SEED,
  '--workers', '1',
  '--request-timeout', '30',
];

test('schemathesis finds nothing: coverage, fuzzing and stateful phases, every check', async () => {
  assert.ok(existsSync(ST), `schemathesis is not installed at ${ST}: run scripts/test.sh, which installs it`);
  const fuzzed = await run(common('examples,coverage,fuzzing'));
  const summary = fuzzed.out.slice(fuzzed.out.lastIndexOf('SUMMARY'));
  console.log(summary);
  assert.equal(fuzzed.code, 0, `schemathesis reported findings (seed ${SEED}):\n${fuzzed.out.slice(-20_000)}`);
  const generated = Number(/(\d+) generated/.exec(summary)?.[1] ?? 0);
  assert.ok(generated >= 1_000, `test cases generated: ${generated}`);

  const stateful = await run(common('stateful', 'chat', 'resumeChat'));
  console.log(stateful.out.slice(stateful.out.lastIndexOf('SUMMARY')));
  assert.equal(stateful.code, 0, `schemathesis reported findings (seed ${SEED}):\n${stateful.out.slice(-20_000)}`);
  const links = /API Links:\s+(\d+) covered/.exec(stateful.out);
  assert.ok(links && Number(links[1]) >= 5, `the stateful phase followed the document's links: ${links?.[0]}`);
});
