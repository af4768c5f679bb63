// A CPU profile of the worker's isolate over HITL cycles: starts the worker in
// `wrangler dev` (devtools relay off), attaches to its workerd's inspector (Chrome
// DevTools Protocol), samples while `BENCH_SESSIONS` (default 100) cycles run one at a
// time, and prints self time per function, heaviest first. For names in the profile,
// build the worker without stripping them (scripts/profile.sh does). BENCH_MODE=growth
// profiles the last BENCH_SESSIONS of BENCH_TURNS turns of one session instead (see
// bench/growth.mjs), and says what the model request's share was; BENCH_MODE=crossings
// and BENCH_MODE=floor profile the crossings floor's and the floor's cycles
// (bench/cycles.mjs) for comparison: the isolate's CPU is what production bills.
//
// Run with: node --experimental-websocket bench/profile.mjs

import { execSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { crossingsCycle, floorCycle, hitlCycle, respond } from './cycles.mjs';
import { startWithMock } from '../tests/e2e/client.mjs';
import { turn } from './growth.mjs';

const SESSIONS = Number(process.env.BENCH_SESSIONS ?? 100);
const cycle = { crossings: crossingsCycle, floor: floorCycle }[process.env.BENCH_MODE] ?? hitlCycle;

/** The inspector targets of the worker's own workerd (the one serving `entry=…:0`). */
async function inspectorTargets(pgid) {
  const pids = execSync(`ps -o pid=,args= -g ${pgid}`).toString().split('\n')
    .filter((l) => l.includes('workerd serve') && l.includes('entry=127.0.0.1:0'))
    .map((l) => l.trim().split(/\s+/)[0]);
  const listening = execSync('ss -ltnp').toString().split('\n');
  for (const pid of pids) {
    // It listens on several ports; the inspector is the one that lists targets.
    for (const line of listening.filter((l) => l.includes(`pid=${pid},`))) {
      const port = line.match(/(?:127\.0\.0\.1|\[::1\]|localhost):(\d+)/)?.[1];
      if (!port) continue;
      const answer = await fetch(`http://127.0.0.1:${port}/json`).then((r) => r.json()).catch(() => null);
      if (Array.isArray(answer)) return answer;
    }
  }
  throw new Error('no inspector found');
}

function cdp(url) {
  const ws = new WebSocket(url);
  let next = 1;
  const waiting = new Map();
  ws.onmessage = (m) => {
    const msg = JSON.parse(m.data);
    if (msg.id && waiting.has(msg.id)) {
      waiting.get(msg.id)(msg);
      waiting.delete(msg.id);
    }
  };
  const opened = new Promise((r) => { ws.onopen = r; });
  return {
    opened,
    send(method, params = {}) {
      const id = next++;
      ws.send(JSON.stringify({ id, method, params }));
      return new Promise((r) => waiting.set(id, r));
    },
    close: () => ws.close(),
  };
}

const { worker, llm } = await startWithMock({}, undefined, { flavour: 'test', devtools: false });
llm.respondWith(respond);
try {
  const tag = Date.now().toString(36);
  for (let i = 0; i < 10; i++) await cycle(worker, `warm-${tag}-${i}`);
  // BENCH_MODE=growth: one session driven for BENCH_TURNS turns (bench/growth.mjs), the
  // last BENCH_SESSIONS of them profiled.
  const growth = process.env.BENCH_MODE === 'growth';
  const turns = Number(process.env.BENCH_TURNS ?? 500);
  let after = 0;
  let turned = 0;
  const next = async () => {
    after = await turn(worker, `growth-${tag}`, after, turned++ === 0);
    llm.requests.length = 0;
  };
  if (growth) while (turned < turns - SESSIONS) await next();
  const targets = await inspectorTargets(worker.pid);
  const target = targets.find((t) => t.title.includes('core:user:')) ?? targets.find((t) => t.webSocketDebuggerUrl);
  const session = cdp(target.webSocketDebuggerUrl);
  await session.opened;
  await session.send('Profiler.enable');
  await session.send('Profiler.setSamplingInterval', { interval: 100 });
  await session.send('Profiler.start');
  const t0 = performance.now();
  for (let i = 0; i < SESSIONS; i++) {
    if (growth) await next();
    else await cycle(worker, `prof-${tag}-${i}`);
  }
  const wall = performance.now() - t0;
  const { result } = await session.send('Profiler.stop');
  session.close();
  if (process.env.PROFILE_JSON) writeFileSync(process.env.PROFILE_JSON, JSON.stringify(result.profile));
  const { nodes, samples, timeDeltas } = result.profile;
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const self = new Map();
  for (let i = 0; i < samples.length; i++) {
    const n = byId.get(samples[i]);
    const f = n.callFrame;
    const key = `${f.functionName || '(anonymous)'} ${f.url ? f.url.split('/').pop() : ''}`.trim();
    self.set(key, (self.get(key) ?? 0) + (timeDeltas[i] ?? 0) / 1000);
  }
  const total = [...self.entries()].filter(([k]) => k !== '(idle)').reduce((a, [, v]) => a + v, 0);
  console.log(`${SESSIONS} cycles in ${wall.toFixed(0)} ms; busy ${(total / SESSIONS).toFixed(2)} ms per cycle in the isolate`);
  console.log('| function | ms per cycle |\n|---|---|');
  for (const [k, v] of [...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, 40)) {
    console.log(`| ${k} | ${(v / SESSIONS).toFixed(3)} |`);
  }
  // Self time by cause: what the isolate spends its CPU on, per cycle.
  const cause = (f) => {
    const name = f.functionName;
    if (name === '(idle)') return null;
    if (/^(exec|transactionSync|raw|toArray|one|columnNames)$/.test(name) || /SqlStorage|sql/.test(f.url)) return 'SQL (exec, transactions, cursors)';
    if (/d1-api|^toJson$/.test(f.url + name)) return 'D1 (replication)';
    if (name === 'fetch' || name === 'Request' || name === 'Response' || name === 'arrayBuffer' || name === 'text') return 'fetch: stub, model, D1 (native)';
    if (/^(info|log|debug|warn|error)$/.test(name) && !f.url) return 'console (log lines)';
    if (name === '(garbage collector)') return 'garbage collector';
    if (/^(wasm-to-js|js-to-wasm)/.test(name)) return 'JS↔wasm transitions';
    if (f.url.endsWith('shim.js')) return 'JS glue (wasm-bindgen, worker-build shim)';
    if (f.url.includes('.wasm')) {
      return /wasm_bindgen|js_sys|web_sys|worker_sys|__wbg|externref|^worker::|talc|^alloc::|^core::|memcpy|memcmp|memset/.test(name)
        ? 'wasm: runtime (bindings, allocator, core)' : 'wasm: helix-edge and its libraries';
    }
    return 'workerd and V8 (timers, microtasks, streams, other)';
  };
  const causes = new Map();
  for (let i = 0; i < samples.length; i++) {
    const c = cause(byId.get(samples[i]).callFrame);
    if (c) causes.set(c, (causes.get(c) ?? 0) + (timeDeltas[i] ?? 0) / 1000);
  }
  console.log('\nby cause\n| cause | ms per cycle |\n|---|---|');
  for (const [k, v] of [...causes.entries()].sort((a, b) => b[1] - a[1])) {
    console.log(`| ${k} | ${(v / SESSIONS).toFixed(2)} |`);
  }
  // Inclusive time of helix-edge's functions (each counted once per sample).
  const parent = new Map();
  for (const n of nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const inclusive = new Map();
  for (let i = 0; i < samples.length; i++) {
    const seen = new Set();
    for (let n = byId.get(samples[i]); n; n = byId.get(parent.get(n.id))) {
      const name = n.callFrame.functionName.replace(/::h[0-9a-f]{16}$/, '');
      if (!/^<?helix_edge/.test(name) || seen.has(name)) continue;
      seen.add(name);
      inclusive.set(name, (inclusive.get(name) ?? 0) + (timeDeltas[i] ?? 0) / 1000);
    }
  }
  // What the model request costs (building it, sending it, reading the answer): the
  // growth benchmark reports the runtime's CPU with and without it.
  const model = Math.max(0, ...[...inclusive.entries()]
    .filter(([k]) => /HttpModel<T> as .*Model>::generate/.test(k)).map(([, v]) => v));
  console.log(`busy without the model request (HttpModel::generate, inclusive): ${((total - model) / SESSIONS).toFixed(2)} ms per cycle`);
  console.log('\nhelix-edge functions, inclusive\n| function | ms per cycle |\n|---|---|');
  for (const [k, v] of [...inclusive.entries()].sort((a, b) => b[1] - a[1]).slice(0, Number(process.env.PROFILE_INCLUSIVE ?? 40))) {
    console.log(`| ${k.slice(0, 150)} | ${(v / SESSIONS).toFixed(3)} |`);
  }
  // Who calls the heaviest native functions: self time by the nearest caller in our wasm.
  const ours = (n) => n.callFrame.url.includes('.wasm')
    && !/wasm_bindgen|js_sys|web_sys|worker_sys|worker::|catch wrapper|__wbg|^js-to-wasm|^wasm-to-js/.test(n.callFrame.functionName);
  for (const name of (process.env.PROFILE_CALLERS ?? 'exec,fetch').split(',')) {
    const callers = new Map();
    for (let i = 0; i < samples.length; i++) {
      let n = byId.get(samples[i]);
      if (n.callFrame.functionName !== name) continue;
      while (n && !ours(n)) n = byId.get(parent.get(n.id));
      const key = n ? n.callFrame.functionName.replace(/::h[0-9a-f]{16}$/, '') : '(unknown)';
      callers.set(key, (callers.get(key) ?? 0) + (timeDeltas[i] ?? 0) / 1000);
    }
    console.log(`\n${name}, by caller\n| caller | ms per cycle |\n|---|---|`);
    for (const [k, v] of [...callers.entries()].sort((a, b) => b[1] - a[1]).slice(0, 15)) {
      console.log(`| ${k.slice(0, 150)} | ${(v / SESSIONS).toFixed(3)} |`);
    }
  }
} finally {
  await worker.stop();
  worker.cleanup();
  await llm.close();
}
