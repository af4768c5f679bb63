// What each capability of the reference worker weighs: builds the reference as
// `wrangler deploy --dry-run` does with every capability (its `full` feature), then once
// without each capability in turn (and without the capabilities that need it), and
// prints each one's cost in the upload's gzip size, the full and minimal totals against
// their budgets, and (unless BENCH_COLD=off) the cold start of both (bench/cold.mjs's
// way). With --write it also puts the table into README.md and docs/src/performance.md
// between `<!-- costs -->` and `<!-- /costs -->`: the figures there come from here.
//
// Run with: scripts/costs.sh [--write] (about three minutes per build on two cores).

import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../tests/e2e/harness.mjs';

const WRANGLER = process.env.WRANGLER ?? join(ROOT, 'node_modules', '.bin', 'wrangler');
const BUDGET = { full: 500, minimal: 300 };
const write = process.argv.includes('--write');
const only = process.env.COSTS_ONLY?.split(',').filter(Boolean);

/** The root package's features, from cargo. */
function features() {
  const meta = JSON.parse(execFileSync('cargo', ['metadata', '--no-deps', '--format-version', '1'], { cwd: ROOT, maxBuffer: 64 << 20 }));
  const root = meta.packages.find((p) => p.manifest_path === join(ROOT, 'Cargo.toml'));
  return root.features;
}

/** Every feature of `all` that needs `cap` (directly or through another), and `cap`. */
function closure(all, cap) {
  const out = new Set([cap]);
  for (let grew = true; grew;) {
    grew = false;
    for (const [name, needs] of Object.entries(all)) {
      if (!out.has(name) && needs.some((n) => out.has(n))) {
        out.add(name);
        grew = true;
      }
    }
  }
  return out;
}

/** `wrangler deploy --dry-run` of `dir` with `env`: the upload's raw and gzip KiB. */
function upload(dir, env = {}) {
  const res = spawnSync(WRANGLER, ['deploy', '--dry-run', '--outdir', join(ROOT, 'target', 'costs-bundle')], {
    cwd: dir,
    encoding: 'utf8',
    env: { ...process.env, WRANGLER_SEND_METRICS: 'false', CI: 'true', ...env },
    maxBuffer: 64 << 20,
  });
  const m = /Total Upload: ([\d.]+) KiB \/ gzip: ([\d.]+) KiB/.exec(res.stdout + res.stderr);
  if (res.status !== 0 || !m) throw new Error(`wrangler deploy --dry-run failed in ${dir}:\n${res.stdout}\n${res.stderr}`);
  return { raw: Number(m[1]), gzip: Number(m[2]) };
}

const build = (list) => upload(ROOT, { HELIX_BUILD_NO_DEFAULT: '1', HELIX_BUILD_FEATURES: [...list].join(',') });

const all = features();
const full = all.full;
const t0 = Date.now();
console.error(`[costs] the full reference (${full.length} capabilities)`);
const whole = build(full);
const rows = [];
for (const cap of full.filter((c) => !only || only.includes(c))) {
  const out = closure(Object.fromEntries(full.map((f) => [f, all[f]])), cap);
  console.error(`[costs] without ${[...out].join(', ')}`);
  const without = build(full.filter((f) => !out.has(f)));
  rows.push({ cap, also: [...out].filter((c) => c !== cap), gzip: whole.gzip - without.gzip, raw: whole.raw - without.raw });
}
console.error('[costs] the minimal example');
const minimal = upload(join(ROOT, 'examples', 'minimal-worker'));

let cold = null;
if (process.env.BENCH_COLD !== 'off') {
  // The artifacts as deployed (the last build above was without a capability).
  const built = spawnSync('bash', [join(ROOT, 'scripts', 'artifacts.sh')], { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 << 20 });
  if (built.status !== 0) throw new Error(`scripts/artifacts.sh failed:\n${built.stdout}\n${built.stderr}`);
  const res = spawnSync('node', [join(ROOT, 'bench', 'cold.mjs'), '--json'], { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 << 20 });
  if (res.status !== 0) throw new Error(`bench/cold.mjs failed:\n${res.stdout}\n${res.stderr}`);
  cold = JSON.parse(res.stdout.trim().split('\n').pop());
}

const kib = (x) => x.toFixed(1);
const lines = [
  `| capability (feature) | gzip KiB | raw KiB |`,
  `|---|---:|---:|`,
  ...rows.sort((a, b) => b.gzip - a.gzip).map((r) =>
    `| \`${r.cap}\`${r.also.length ? ` (with ${r.also.map((c) => `\`${c}\``).join(', ')})` : ''} | ${kib(r.gzip)} | ${kib(r.raw)} |`),
  `| **the full reference** (every capability) | **${kib(whole.gzip)}** (budget ${BUDGET.full}) | ${kib(whole.raw)} |`,
  `| **the minimal example** (\`examples/minimal-worker\`) | **${kib(minimal.gzip)}** (budget ${BUDGET.minimal}) | ${kib(minimal.raw)} |`,
];
if (cold) {
  lines.push('', '| cold start (`wrangler dev`, a fresh isolate; median of ' + cold.starts + ' starts) | worker CPU at ready | first request | first create |', '|---|---:|---:|---:|');
  for (const c of cold.rows) lines.push(`| ${c.target} | ${c.readyCpuMs} ms | ${c.healthz} ms | ${c.create} ms |`);
}
const table = lines.join('\n');
console.log(table);
console.error(`[costs] ${Math.round((Date.now() - t0) / 1000)} s`);

if (write) {
  const stamp = `<!-- costs: written by scripts/costs.sh; do not edit by hand -->`;
  for (const file of [join(ROOT, 'README.md'), join(ROOT, 'docs', 'src', 'performance.md')]) {
    if (!existsSync(file)) continue;
    const text = readFileSync(file, 'utf8');
    const re = /<!-- costs[^>]*-->[\s\S]*?<!-- \/costs -->/;
    if (!re.test(text)) continue;
    writeFileSync(file, text.replace(re, `${stamp}\n${table}\n<!-- /costs -->`));
    console.error(`[costs] wrote ${file}`);
  }
}
