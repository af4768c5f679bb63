// End-to-end benchmark: full human-in-the-loop cycles against the real worker in
// `wrangler dev` (local D1 and Durable Objects) with a zero-latency OpenAI-compatible
// mock model on loopback, next to "the floor": the least a session request can do
// (worker → Durable Object → one D1 write → response).
//
// One cycle: (a) POST /v1/sessions → `tool_approval_request` seen on the session's SSE
// stream; (b) the approval POST → the stream's `end` event. The floor's two-request
// cycle is two floor requests in sequence, the same number of client round trips.
// The crossings floor is the HITL cycle's platform crossings without helix-edge's work
// (`/__test/crossings`, test build only): the same three requests and object hops, one
// SSE stream, a SQLite write, a streamed model call read to its end and a D1 write for
// the create and for the approval — what the cycle cannot cost less than on Workers.
//
// Reports numbers; asserts only that every request succeeded (a benchmark of failures
// would be meaningless). A POST that wrangler dev's own proxy drops under load (503
// "restarted mid-request", the worker never saw a failure) is measured again on a fresh
// session, and the count is reported. Environment: BENCH_SESSIONS (default 200), BENCH_CONCURRENCY
// (default "1,8"), BENCH_JSON (write the results there as JSON), BENCH_LOG_LEVEL (the
// worker's LOG_LEVEL; unset: the default, info), BENCH_DEVTOOLS (`on`: keep wrangler dev's
// devtools relay, which costs wrangler's node process CPU for every subrequest and log
// line and which production does not have; unset: off, see tests/e2e/harness.mjs).
// BENCH_MODE=growth runs the growth benchmark instead (bench/growth.mjs: one session for
// BENCH_TURNS turns, default 500). BENCH_OTEL exports the spans (the `otel` feature keeps
// them either way): `on` to an OTLP receiver on loopback that answers at once, `slow`
// to one that answers after 15 s, `failing` to one that answers 500; unset: no endpoint.

import { writeFileSync } from 'node:fs';
import { cpuByRole, perUnit } from './cpu.mjs';
import { growth } from './growth.mjs';
import { crossingsCycle, floorCycle, hitlCycle, respond, streamedCycle } from './cycles.mjs';
import { api, startWithMock } from '../tests/e2e/client.mjs';
import { startOtlpReceiver } from '../tests/e2e/otlp-receiver.mjs';

const SESSIONS = Number(process.env.BENCH_SESSIONS ?? 200);
const CONCURRENCY = (process.env.BENCH_CONCURRENCY ?? '1,8').split(',').map(Number);
const WARMUP = 10;
const MODE = process.env.BENCH_MODE ?? 'cycles';
const TURNS = Number(process.env.BENCH_TURNS ?? 500);

/** wrangler dev's proxy (not the worker) now and then drops a POST under load. */
class ProxyDrop extends Error {}
let proxyDrops = 0;

/** Throws unless `res` has `status`; a request `api` had to send again is not measured. */
function expect(what, res, status) {
  if (res.resent) throw new ProxyDrop(what);
  if (res.status !== status) throw new Error(`${what}: ${res.status} ${JSON.stringify(res.body)}`);
}

/** Runs `measure(id)`, again with a fresh id when the proxy dropped a request (counted). */
async function measured(measure, id) {
  for (let attempt = 0; ; attempt++) {
    try {
      return await measure(attempt ? `${id}-r${attempt}` : id);
    } catch (e) {
      if (!(e instanceof ProxyDrop) || attempt >= 3) throw e;
      proxyDrops++;
    }
  }
}

const cycle = (worker, id) => hitlCycle(worker, id, expect);
const crossings = (worker, id) => crossingsCycle(worker, id, expect);
const streamed = (worker, id) => streamedCycle(worker, id, expect);

const floor = (worker, id) => floorCycle(worker, id, expect);

/** Runs `task(i)` for i < n with at most `c` in flight; returns results and wall time. */
async function pool(n, c, task) {
  const results = [];
  let next = 0;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: c }, async () => {
    while (next < n) results.push(await task(next++));
  }));
  return { results, wallMs: performance.now() - t0 };
}

function stats(values) {
  const v = [...values].sort((x, y) => x - y);
  const at = (q) => v[Math.min(v.length - 1, Math.floor(q * v.length))];
  const r = (x) => Math.round(x * 100) / 100;
  return { min: r(v[0]), median: r(at(0.5)), p95: r(at(0.95)) };
}

const logLevel = process.env.BENCH_LOG_LEVEL;
const devtools = process.env.BENCH_DEVTOOLS === 'on';
const vars = logLevel ? { LOG_LEVEL: logLevel } : {};
const otel = process.env.BENCH_OTEL;
const receiver = otel ? await startOtlpReceiver() : undefined;
if (receiver) {
  receiver.mode = { on: 'ok', slow: 'slow', failing: 'fail' }[otel] ?? 'ok';
  vars.OTEL_EXPORTER_OTLP_ENDPOINT = receiver.url;
}
const { llm, worker } = await startWithMock(vars, undefined, { flavour: 'test', devtools });
llm.respondWith(respond);
const out = { sessions: SESSIONS, logLevel: logLevel ?? 'info', devtools, otel: otel ?? 'no endpoint', runs: [], proxyDrops: 0 };
try {
  const tag = Date.now().toString(36);
  await pool(WARMUP, 2, (i) => cycle(worker, `warm-${tag}-${i}`));
  await pool(WARMUP, 2, (i) => floor(worker, `warm-floor-${tag}-${i}`));
  await pool(WARMUP, 2, (i) => crossings(worker, `warm-crossings-${tag}-${i}`));
  await pool(WARMUP, 2, (i) => streamed(worker, `warm-streamed-${tag}-${i}`));
  if (MODE === 'growth') out.growth = await growth(worker, llm, TURNS);
  for (const c of MODE === 'growth' ? [] : CONCURRENCY) {
    const cpu0 = cpuByRole(worker.pid);
    const fl = await pool(SESSIONS, c, (i) => measured((id) => floor(worker, id), `floor-${tag}-c${c}-${i}`));
    const cpu1 = cpuByRole(worker.pid);
    const cx = await pool(SESSIONS, c, (i) => measured((id) => crossings(worker, id), `crossings-${tag}-c${c}-${i}`));
    const cpuX = cpuByRole(worker.pid);
    const cy = await pool(SESSIONS, c, (i) => measured((id) => cycle(worker, id), `bench-${tag}-c${c}-${i}`));
    const cpu2 = cpuByRole(worker.pid);
    const st = await pool(SESSIONS, c, (i) => measured((id) => streamed(worker, id), `streamed-${tag}-c${c}-${i}`));
    const cpu3 = cpuByRole(worker.pid);
    const run = {
      concurrency: c,
      floorRequestMs: stats(fl.results.map((r) => r.one)),
      floorCycleMs: stats(fl.results.map((r) => r.two)),
      createToApprovalMs: stats(cy.results.map((r) => r.a)),
      approvalToEndMs: stats(cy.results.map((r) => r.b)),
      cycleMs: stats(cy.results.map((r) => r.cycle)),
      crossingsToApprovalMs: stats(cx.results.map((r) => r.a)),
      crossingsCycleMs: stats(cx.results.map((r) => r.cycle)),
      crossingsCyclesPerSecond: Math.round((SESSIONS / (cx.wallMs / 1000)) * 10) / 10,
      crossingsCpuMsPerCycle: perUnit(cpu1, cpuX, SESSIONS),
      cyclesPerSecond: Math.round((SESSIONS / (cy.wallMs / 1000)) * 10) / 10,
      floorCyclesPerSecond: Math.round((SESSIONS / (fl.wallMs / 1000)) * 10) / 10,
      floorCpuMsPerCycle: perUnit(cpu0, cpu1, SESSIONS),
      cpuMsPerCycle: perUnit(cpuX, cpu2, SESSIONS),
      streamedToApprovalMs: stats(st.results.map((r) => r.a)),
      streamedCycleMs: stats(st.results.map((r) => r.cycle)),
      streamedCyclesPerSecond: Math.round((SESSIONS / (st.wallMs / 1000)) * 10) / 10,
      streamedCpuMsPerCycle: perUnit(cpu2, cpu3, SESSIONS),
    };
    run.medianRatio = Math.round((run.cycleMs.median / run.floorCycleMs.median) * 100) / 100;
    run.throughputRatio = Math.round((run.cyclesPerSecond / run.floorCyclesPerSecond) * 100) / 100;
    const workerCpu = (cpu) => cpu['worker workerd'];
    run.workerCpuRatio = Math.round((workerCpu(run.cpuMsPerCycle) / workerCpu(run.floorCpuMsPerCycle)) * 100) / 100;
    run.workerCpuOverCrossings = Math.round((workerCpu(run.cpuMsPerCycle) / workerCpu(run.crossingsCpuMsPerCycle)) * 100) / 100;
    run.streamedWorkerCpuOverCrossings = Math.round((workerCpu(run.streamedCpuMsPerCycle) / workerCpu(run.crossingsCpuMsPerCycle)) * 100) / 100;
    out.runs.push(run);
  }
  out.proxyDrops = proxyDrops;
} finally {
  await worker.stop();
  worker.cleanup();
  await llm.close();
  out.spansReceived = receiver?.spans().length;
  await receiver?.close();
}

if (out.growth) {
  console.log(`\nOne session, ${out.growth.turns} HITL turns (a follow-up, an approval, done); per turn:\n`);
  console.log('| turns | worker workerd CPU ms | all processes CPU ms | wall ms | model request bytes |\n|---|---|---|---|---|');
  for (const w of out.growth.windows) {
    console.log(`| ${w.turns} | ${w.workerCpuMs} | ${w.allCpuMs} | ${w.wallMs} | ${w.modelRequestBytes} |`);
  }
  console.log(`\nworker CPU per turn, last ten / first ten: ${out.growth.workerRatio}×`);
}
const row = (name, s) => `| ${name} | ${s.min} | ${s.median} | ${s.p95} |`;
console.log(`wrangler dev's devtools relay: ${devtools ? 'on' : 'off'}; worker LOG_LEVEL: ${out.logLevel}; `
  + `span export: ${out.otel}${out.spansReceived === undefined ? '' : ` (${out.spansReceived} spans received)`}`);
for (const run of out.runs) {
  console.log(`\nC=${run.concurrency}, ${SESSIONS} sessions (ms)\n`);
  console.log('| measure | min | median | p95 |\n|---|---|---|---|');
  console.log(row('floor: one request', run.floorRequestMs));
  console.log(row('floor: two-request cycle', run.floorCycleMs));
  console.log(row('(a) create → tool_approval_request', run.createToApprovalMs));
  console.log(row('(b) approval → end', run.approvalToEndMs));
  console.log(row('cycle (a)+(b)', run.cycleMs));
  console.log(row('two requests: create → tool_approval_request, one request', run.streamedToApprovalMs));
  console.log(row('two requests: cycle', run.streamedCycleMs));
  console.log(row('crossings floor: create → first event', run.crossingsToApprovalMs));
  console.log(row('crossings floor: cycle', run.crossingsCycleMs));
  console.log(`\ncycles/s: ${run.cyclesPerSecond} (floor: ${run.floorCyclesPerSecond}, ratio ${run.throughputRatio}×); `
    + `cycle median / floor cycle median: ${run.medianRatio}×; crossings floor: ${run.crossingsCyclesPerSecond} cycles/s`);
  const roles = Object.keys(run.cpuMsPerCycle);
  console.log(`\nCPU ms per cycle (from /proc; relay ${devtools ? 'on' : 'off'})\n`);
  console.log(`| | ${roles.join(' | ')} |\n|---|${roles.map(() => '---').join('|')}|`);
  console.log(`| HITL cycle | ${roles.map((r) => run.cpuMsPerCycle[r]).join(' | ')} |`);
  console.log(`| HITL cycle in two requests | ${roles.map((r) => run.streamedCpuMsPerCycle[r]).join(' | ')} |`);
  console.log(`| floor cycle | ${roles.map((r) => run.floorCpuMsPerCycle[r]).join(' | ')} |`);
  console.log(`| crossings floor cycle | ${roles.map((r) => run.crossingsCpuMsPerCycle[r]).join(' | ')} |`);
  console.log(`\nworker CPU per HITL cycle: ${run.workerCpuRatio}× the floor cycle's, `
    + `${run.workerCpuOverCrossings}× the crossings floor's; in two requests ${run.streamedWorkerCpuOverCrossings}×`);
}
console.log(`\nrequests wrangler dev's proxy dropped (those cycles were measured again): ${out.proxyDrops}`);
if (process.env.BENCH_JSON) writeFileSync(process.env.BENCH_JSON, JSON.stringify(out, null, 2));
