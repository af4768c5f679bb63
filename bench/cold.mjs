// Cold start: each worker started afresh in `wrangler dev` (a new workerd, a new
// isolate) `BENCH_STARTS` times (default 3): the worker process's CPU once it is ready
// (workerd's start, compiling and instantiating the wasm, the script's top level), then
// the isolate's first requests against the same requests warm — `GET /healthz` (the
// worker alone) and a session create (a new session object: its tables, the agents) —
// for the reference worker as deployed (every capability) and the minimal example.
// Reports numbers only; `--json` prints one JSON line of medians (scripts/costs.sh).
//
// Run with: node bench/cold.mjs (the artifacts must be built: scripts/artifacts.sh).

import { cpuByRole } from './cpu.mjs';
import { API_TOKEN, api } from '../tests/e2e/client.mjs';
import { EXAMPLE, ROOT, startWorker } from '../tests/e2e/harness.mjs';
import { startMockLlm } from '../tests/e2e/mock-llm.mjs';

const STARTS = Number(process.env.BENCH_STARTS ?? 3);
const WARM = 5;
const r = (x) => Math.round(x * 10) / 10;
const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];

async function timed(worker, method, path, body, status) {
  const t0 = performance.now();
  const res = await api(worker, method, path, body);
  if (res.status !== status) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(res.body)}`);
  return performance.now() - t0;
}

const TARGETS = [
  { name: 'the full reference', dir: ROOT, agent: 'assistant', floor: false },
  { name: 'the minimal example', dir: EXAMPLE, agent: 'support', floor: false },
];
const json = process.argv.includes('--json');

const llm = await startMockLlm();
llm.respondWith(() => ({ text: 'Hello.' }));
const rows = [];
try {
  for (const target of TARGETS) {
    const runs = [];
    for (let start = 0; start < STARTS; start++) {
      const worker = await startWorker({
        dir: target.dir,
        devtools: false,
        timeoutMs: 300_000,
        vars: { API_TOKEN, LLM_PROVIDER: 'openai', LLM_BASE_URL: llm.url, LLM_API_KEY: 'k' },
      });
      try {
        const ready = cpuByRole(worker.pid)['worker workerd'];
        const tag = `${Date.now().toString(36)}-${start}`;
        const create = (i) => timed(worker, 'POST', '/v1/sessions',
          { agent: target.agent, sessionId: `cold-${tag}-${i}`, input: 'hi' }, 201);
        const floor = (i) => timed(worker, 'POST', `/__test/floor/cold-${tag}-${i}`, undefined, 200);
        const run = { readyCpuMs: ready, healthz: worker.firstHealthzMs };
        run.create = await create('first');
        if (target.floor) run.floor = await floor('first');
        const warm = { healthz: [], create: [], floor: [] };
        for (let i = 0; i < WARM; i++) {
          warm.healthz.push(await timed(worker, 'GET', '/healthz', undefined, 200));
          warm.create.push(await create(i));
          if (target.floor) warm.floor.push(await floor(i));
        }
        run.warm = { healthz: median(warm.healthz), create: median(warm.create), floor: target.floor ? median(warm.floor) : null };
        runs.push(run);
      } finally {
        await worker.stop();
        worker.cleanup();
      }
    }
    rows.push({ target: target.name, runs });
  }
} finally {
  await llm.close();
}

if (json) {
  const med = (runs, f) => r(median(runs.map(f)));
  console.log(JSON.stringify({
    starts: STARTS,
    rows: rows.map(({ target, runs }) => ({
      target, readyCpuMs: med(runs, (x) => x.readyCpuMs), healthz: med(runs, (x) => x.healthz), create: med(runs, (x) => x.create),
    })),
  }));
  process.exit(0);
}

const range = (runs, f) => {
  const v = runs.map(f).filter((x) => x != null);
  return v.length ? `${r(Math.min(...v))}–${r(Math.max(...v))}` : '—';
};
console.log(`\nCold start (${STARTS} starts each, ms; warm: median of ${WARM})\n`);
console.log('| worker | worker process CPU at ready | first /healthz (warm) | first floor (warm) | first create (warm) |');
console.log('|---|---|---|---|---|');
for (const { target, runs } of rows) {
  const pair = (k) => (runs[0][k] == null ? '—' : `${range(runs, (x) => x[k])} (${range(runs, (x) => x.warm[k])})`);
  console.log(`| ${target} | ${range(runs, (x) => x.readyCpuMs)} | ${pair('healthz')} | ${pair('floor')} | ${pair('create')} |`);
}
