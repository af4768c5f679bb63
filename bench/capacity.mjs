// The capacity model's inputs, measured: `BENCH_SESSIONS` (default 100) HITL sessions
// through the reference worker (test build) in `wrangler dev`, one at a time, their
// inputs 0–16 KB long, each approved after a person's pause longer than the
// replication's coalescing delay (so a session's create and its approval reach D1 as
// separate batches, as they do when a person approves). Then every batch D1 took for
// them (commits, encoded bytes, ms: the test build's replica report) and the local D1's
// rows (read with `wrangler d1 execute --local`) go to the model
// (crates/helix-edge-capacity), which prints the book's "Scaling" table. Numbers only.
//
// Run with: node bench/capacity.mjs (after bash scripts/artifacts.sh;
// scripts/bench.sh does both).

import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { api, startWithMock } from '../tests/e2e/client.mjs';
import { ROOT, wrangler } from '../tests/e2e/harness.mjs';
import { expectStatus, hitlCycle, respond } from './cycles.mjs';

/** The rows of the local D1 at `persistDir` (`wrangler d1 execute --local`). */
function d1Query(persistDir, sql) {
  const run = wrangler(['d1', 'execute', 'DB', '--local', '--persist-to', persistDir, '--json', '--command', sql],
    { maxBuffer: 1 << 30 });
  if (run.status !== 0) throw new Error(`wrangler d1 execute: ${run.stderr || run.stdout}`);
  return JSON.parse(run.stdout)[0].results;
}

/**
 * The local D1 as a SQL dump of helix-edge's tables and indexes with their rows
 * (`wrangler d1 export` reads only the default local state, not a `--persist-to` one).
 */
function d1Dump(persistDir) {
  const literal = (v) => (v === null ? 'NULL' : typeof v === 'number' ? String(v) : `'${String(v).replaceAll("'", "''")}'`);
  const schema = d1Query(persistDir, "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL "
    + "AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%' AND name <> 'd1_migrations'");
  const lines = schema.map((o) => `${o.sql};`);
  for (const { name } of schema.filter((o) => o.type === 'table')) {
    for (const row of d1Query(persistDir, `SELECT * FROM "${name}"`)) {
      const columns = Object.keys(row).map((c) => `"${c}"`).join(', ');
      lines.push(`INSERT INTO "${name}" (${columns}) VALUES (${Object.values(row).map(literal).join(', ')});`);
    }
  }
  return `${lines.join('\n')}\n`;
}

const SESSIONS = Number(process.env.BENCH_SESSIONS ?? 100);
/** A person's pause before approving: longer than the coalescing delay (250 ms). */
const PAUSE_MS = 400;
/**
 * What each session's user writes beyond the request itself, in turn (bytes): batches
 * of different sizes, so that the model can tell the fixed part of a batch's time from
 * the part that grows with its size.
 */
const INPUT_BYTES = [0, 1_000, 4_000, 16_000];
const OUT = join(ROOT, '.bench');

const { llm, worker } = await startWithMock({ LOG_LEVEL: 'warn' }, undefined, { flavour: 'test', devtools: false });
llm.respondWith(respond);
const tag = Date.now().toString(36);
const sends = [];
let dump;
try {
  for (let i = 0; i < SESSIONS; i++) {
    const id = `capacity-${tag}-${i}`;
    const input = `delete /tmp/bench ${'x'.repeat(INPUT_BYTES[i % INPUT_BYTES.length])}`;
    await hitlCycle(worker, id, expectStatus, PAUSE_MS, input);
    // The object's own replication of the last commits goes first (after its delay).
    await new Promise((r) => setTimeout(r, PAUSE_MS));
    const report = await api(worker, 'POST', `/__test/replica/${id}`, {});
    expectStatus('replica report', report, 200);
    if (!report.body.caughtUp || !report.body.equal) throw new Error(`${id}: ${JSON.stringify(report.body)}`);
    sends.push(...report.body.sends);
  }
  await worker.stop();
  mkdirSync(OUT, { recursive: true });
  dump = join(OUT, 'capacity-d1.sql');
  writeFileSync(dump, d1Dump(worker.persistDir));
} finally {
  await worker.stop();
  worker.cleanup();
  await llm.close();
}

const measured = join(OUT, 'capacity.json');
writeFileSync(measured, JSON.stringify({ sessions: SESSIONS, sends, dump }));
console.log(`${SESSIONS} sessions, ${sends.length} D1 batches: ${measured}\n`);
const model = spawnSync('cargo', ['run', '--quiet', '--release', '--locked', '-p', 'helix-edge-capacity', '--',
  '--measured', measured], { cwd: ROOT, stdio: 'inherit' });
process.exit(model.status ?? 1);
