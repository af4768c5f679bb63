// The API document is the whole truth: schemathesis (the outside schema fuzzer, from
// PyPI; `scripts/test.sh` installs it) runs against the real worker with every check —
// no 5xx, every status and body as documented, schema-valid requests accepted and
// schema-violating ones refused, 405s with `Allow`, auth honoured, a deleted session
// gone — through its coverage, fuzzing and stateful phases (the stateful phase follows
// the document's links: create → every session operation, a pending call → its
// answer). Any finding fails the test. `SCHEMATHESIS_SEED` replays a run.
//
// schemathesis reaches the worker through `resendingForwarder`: wrangler dev's own proxy
// now and then drops a POST with a 503 of its own (see `client.mjs`), which is not the
// worker's answer; it is sent again, as the suite's own client does, and counted.
//
// The stream (`GET …/stream`) is left to the SSE tests: a suspended session's stream
// stays open by design, which a request/response fuzzer reads as a hang.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { API_TOKEN, resendingForwarder, startWithMock } from './client.mjs';
import { ROOT } from './harness.mjs';

const ST = process.env.SCHEMATHESIS_BIN ?? join(process.env.HELIX_TOOLS_DIR ?? join(homedir(), '.cache', 'helix-edge'), 'schemathesis-4.32.5', 'bin', 'st');
const SEED = process.env.SCHEMATHESIS_SEED ?? '20261124';
const EXAMPLES = process.env.SCHEMATHESIS_EXAMPLES ?? '25';

let worker;
let llm;
let forwarder;
before(async () => {
  // Notifications go to a sink that is not there: the routes answer as configured.
  ({ worker, llm } = await startWithMock({ NOTIFY_WEBHOOK_URL: 'http://127.0.0.1:9/hook' }));
  forwarder = await resendingForwarder(worker);
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
after(async () => { await forwarder?.close(); await worker?.stop(); await llm?.close(); worker?.cleanup(); });

function run(args, env = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(ST, args, {
      cwd: dirname(dirname(ST)), // its cache (`.schemathesis/`) stays out of the repository
      env: {
        ...process.env,
        SCHEMATHESIS_HOOKS: 'hooks',
        PYTHONPATH: join(ROOT, 'tests', 'schemathesis'),
        NO_COLOR: '1',
        ...env,
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
  'run', `${forwarder.url}/v1/openapi.json`,
  '--header', `Authorization: Bearer ${API_TOKEN}`,
  '--checks', 'all',
  '--phases', phases,
  ...['streamSession', ...excluded].flatMap((id) => ['--exclude-operation-id', id]),
  '--max-examples', EXAMPLES,
  '--seed', SEED,
  '--workers', '1',
  '--request-timeout', '30',
];

// What a failed run reports: its FAILURES section (each finding with the request to
// replay it) first, where a shortened log still shows it, then the whole output's end.
function findings(out) {
  const start = out.indexOf('FAILURES');
  const end = out.indexOf('SUMMARY', start);
  const failures = start < 0 ? '' : out.slice(start, end < 0 ? undefined : end);
  return `schemathesis reported findings (seed ${SEED}):\n${failures.slice(0, 8_000)}\n…\n${out.slice(-12_000)}`;
}

test('schemathesis finds nothing: coverage, fuzzing and stateful phases, every check', async () => {
  assert.ok(existsSync(ST), `schemathesis is not installed at ${ST}: run scripts/test.sh, which installs it`);
  const fuzzed = await run(common('examples,coverage,fuzzing'), { HELIX_FIX_SCHEDULES: '1' });
  const summary = fuzzed.out.slice(fuzzed.out.lastIndexOf('SUMMARY'));
  console.log(summary);
  assert.equal(fuzzed.code, 0, findings(fuzzed.out));
  const generated = Number(/(\d+) generated/.exec(summary)?.[1] ?? 0);
  assert.ok(generated >= 1_000, `test cases generated: ${generated}`);

  // The schedule routes are fuzzed above, their times and patterns fixed by the hook. The
  // stateful phase runs without them: there the hook cannot run (with a `map_case` hook
  // schemathesis follows no links), and a generated time no schema can rule out (`until`
  // before 1970) would be refused.
  // Nor the decision links' pages: public, reached by no link, and with them in the
  // stateful phase schemathesis starts no scenario from a create (0 links followed);
  // they are fuzzed above.
  const stateful = await run(common('stateful', 'chat', 'resumeChat', 'listSchedules', 'createSchedule', 'deleteSchedule', 'decisionPage', 'decide'));
  console.log(stateful.out.slice(stateful.out.lastIndexOf('SUMMARY')));
  assert.equal(stateful.code, 0, findings(stateful.out));
  const links = /API Links:\s+(\d+) covered/.exec(stateful.out);
  assert.ok(links && Number(links[1]) >= 5, `the stateful phase followed the document's links: ${links?.[0]}`);
  console.log(`# requests wrangler's proxy dropped and the forwarder sent again: ${forwarder.drops()}`);
});
