// The book's runnable HTTP examples, run as a reader pastes them: every block fenced
// ```sh,runnable in docs/src, against the reference worker as `scripts/dev.sh` serves it
// (.dev.vars.example: no credentials, the demo model). A page's blocks run in order,
// `$B` the worker's URL. Each `curl` must answer below 400 — or the status its comment
// names (`# 400 tool_output_invalid`) — and hold what its comment shows of the answer
// (`# {"ok":true}`, `# "pendingToolCalls":[{"toolCallId":"demo-1-1",…}]`): every
// `"key": value` the comment shows is somewhere in the JSON answer, numbers compared as
// numbers. A stream (`curl -sN`) is read for three seconds.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, startWorker } from './harness.mjs';

const DOCS = join(ROOT, 'docs', 'src');

/** The runnable blocks of each page: `[page, [commands]]`, a command with its hint. */
function runnable() {
  const pages = [];
  for (const name of readdirSync(DOCS).filter((n) => n.endsWith('.md')).sort()) {
    const text = readFileSync(join(DOCS, name), 'utf8');
    const commands = [];
    for (const [, body] of text.matchAll(/^```sh,runnable\n([\s\S]*?)^```$/gm)) {
      let pending = '';
      for (const line of body.split('\n')) {
        const code = pending + line;
        if (code.trimEnd().endsWith('\\')) { pending = `${code.trimEnd().slice(0, -1)} `; continue; }
        // A quoted body that spans lines goes on until its quote closes.
        if ((code.match(/'/g) ?? []).length % 2 === 1) { pending = `${code}\n`; continue; }
        pending = '';
        const trimmed = code.trim();
        // A comment right after a command that shows an answer (`# {…}`, `# 201 …`) is its hint.
        const previous = commands.at(-1);
        if (/^#\s+(\{|"|\d{3}\b)/.test(trimmed) && previous && !previous.hint && previous.last) {
          previous.hint = trimmed.replace(/^#\s+/, '');
        }
        if (previous) previous.last = false;
        if (!trimmed.startsWith('curl')) continue;
        const last = trimmed.lastIndexOf("'");
        const hintAt = trimmed.slice(last + 1).search(/\s#\s/);
        const at = hintAt < 0 ? -1 : last + 1 + hintAt;
        commands.push({
          command: at < 0 ? trimmed : trimmed.slice(0, at).trim(),
          hint: at < 0 ? '' : trimmed.slice(at).replace(/^\s#\s/, '').trim(),
          last: true,
        });
      }
    }
    if (commands.length) pages.push([name, commands]);
  }
  return pages;
}

/** Runs `command` in bash with `$B`: its output and HTTP status. */
function run(command, base) {
  const stream = /\scurl\s+-sN\b|^curl\s+-sN\b/.test(command);
  const line = `${command} -w '\\n%{http_code}' --max-time ${stream ? 3 : 20}`;
  return new Promise((resolve) => {
    execFile('bash', ['-c', line], { env: { ...process.env, B: base }, maxBuffer: 16 << 20 }, (err, stdout) => {
      const at = stdout.lastIndexOf('\n');
      resolve({ body: stdout.slice(0, at), status: Number(stdout.slice(at + 1)), stream, code: err?.code ?? 0 });
    });
  });
}

/** Whether `key` has `value` anywhere in `json`. */
function holds(json, key, value) {
  if (Array.isArray(json)) return json.some((v) => holds(v, key, value));
  if (json && typeof json === 'object') {
    return Object.entries(json).some(([k, v]) => (k === key && v === value) || holds(v, key, value));
  }
  return false;
}

let worker;
before(async () => {
  // As .dev.vars.example has it: no API token, the API open, the demo model.
  worker = await startWorker({ vars: { API_TOKEN: '', ALLOW_UNAUTHENTICATED: 'true', REMOTE_AGENT_URL: 'http://127.0.0.1:{port}' } });
});
after(async () => { await worker?.stop(); worker?.cleanup(); });

test('the book has runnable examples', () => {
  assert.ok(runnable().length >= 3, `pages with runnable examples: ${runnable().map(([p]) => p)}`);
});

for (const [page, commands] of runnable()) {
  test(`${page}: every runnable example answers as the page shows`, async () => {
    for (const { command, hint } of commands) {
      const res = await run(command, worker.baseUrl);
      const where = `${page}: ${command}\n${res.body.slice(0, 600)}`;
      const expected = /^(\d{3})\b/.exec(hint);
      if (expected) assert.equal(res.status, Number(expected[1]), where);
      else assert.ok(res.status >= 200 && res.status < 400, `status ${res.status}: ${where}`);
      if (res.stream) {
        assert.match(res.body, /^event: /m, `a stream of events: ${where}`);
        continue;
      }
      const answer = res.body.trim() ? JSON.parse(res.body) : null;
      const shown = (expected ? hint.slice(3) : hint).trim();
      const pairs = [...shown.matchAll(/"(\w+)":\s*("(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?|true|false|null)/g)];
      for (const [, key, text] of pairs) {
        const value = JSON.parse(text);
        assert.ok(holds(answer, key, value), `shows "${key}": ${text}: ${where}`);
      }
      if (!pairs.length && /^[a-z_]+$/.test(shown)) assert.ok(holds(answer, 'code', shown), `answers ${shown}: ${where}`);
    }
  });
}
