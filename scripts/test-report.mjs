// The test command's report (scripts/test.sh prints it at the end of every run, a
// failed one too): each phase's time, the test counts and the ten slowest end-to-end
// tests, from the logs in DIR (target/test-report). With --write FILE the phase table
// and the counts go between the `test-phases` markers of FILE (the book's
// contributing page), as measured: never typed by hand.
//
//   node scripts/test-report.mjs DIR [TOTAL_SECONDS] [--write FILE]
import { readFileSync, writeFileSync } from 'node:fs';

const args = process.argv.slice(2);
const writeAt = args.indexOf('--write');
const target = writeAt >= 0 ? args.splice(writeAt, 2)[1] : undefined;
const [dir, totalArg] = args;
const read = (f) => { try { return readFileSync(`${dir}/${f}`, 'utf8'); } catch { return ''; } };
const sum = (text, re) => [...text.matchAll(re)].reduce((n, m) => n + Number(m[1]), 0);
const fmt = (s) => `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, '0')} s`;
const phases = read('phases').trim().split('\n').filter(Boolean).map((l) => l.split('\t'));
const total = totalArg ? Number(totalArg) : phases.reduce((n, [, s]) => n + Number(s), 0);
const table = ['| phase | time |', '|---|---|', ...phases.map(([name, secs]) => `| ${name} | ${fmt(Number(secs))} |`),
  `| **total** | **${fmt(total)}** |`].join('\n');
const rust = sum(read('native.log'), /test result: ok\. (\d+) passed/g);
const wasm = sum(read('wasm.log'), /test result: ok\. (\d+) passed/g);
const client = sum(read('client.log'), /^# pass (\d+)/gm);
// The end-to-end runs' own summaries (Node's spec reporter: `ℹ pass N`; TAP: `# pass N`)
// and each top-level test's time (`✔ name (12.3ms)`; TAP: `ok 1 - name` then its
// `duration_ms`).
const e2eLog = read('e2e.log');
const e2e = sum(e2eLog, /^(?:ℹ|#) pass (\d+)/gm);
const failed = sum(e2eLog, /^(?:ℹ|#) fail (\d+)/gm);
const counts = `tests: ${rust} Rust (native), ${wasm} wasm, ${client} client, ${e2e} end-to-end${failed ? ` (${failed} end-to-end failed)` : ''}`;
console.log(`\n==> report\n${table}\n\n${counts}`);
const times = new Map();
for (const [, name, ms] of e2eLog.matchAll(/^[✔✖] (.*) \(([\d.]+)ms\)$/gm)) times.set(name, Number(ms));
for (const [, name, ms] of e2eLog.matchAll(/^(?:not )?ok \d+ - (.*)\n  ---\n  duration_ms: ([\d.]+)/gm)) times.set(name, Number(ms));
const tests = [...times].map(([name, ms]) => [ms, name]);
const slowest = tests.sort((a, b) => b[0] - a[0]).slice(0, 10);
console.log('\nthe ten slowest end-to-end tests (or files):');
for (const [ms, n] of slowest) console.log(`  ${(ms / 1000).toFixed(1).padStart(6)} s  ${n}`);
if (target) {
  const page = readFileSync(target, 'utf8');
  const [open, close] = ['<!-- test-phases -->\n', '<!-- /test-phases -->'];
  const from = page.indexOf(open);
  const to = page.indexOf(close);
  if (from < 0 || to < from) throw new Error(`${target} has no test-phases markers`);
  const slow = slowest.map(([ms, n]) => `| ${n} | ${(ms / 1000).toFixed(1)} s |`).join('\n');
  const body = `${table}\n\n${counts}.\n\n| slowest end-to-end tests | time |\n|---|---|\n${slow}\n`;
  writeFileSync(target, page.slice(0, from + open.length) + body + page.slice(to));
}
