// End-to-end harness: runs the real worker in `wrangler dev` (local D1 and Durable
// Objects) on a free loopback port, with a persist directory of its own and the D1
// migrations applied, and always stops what it started, by process group.
//
// The reference worker runs as one of two artifacts that scripts/artifacts.sh builds
// (scripts/test.sh builds them once): `production`, the very bundle `wrangler deploy`
// uploads (the suite checks its hash), and `test`, the test flavour — the product plus
// the test-only routes, fault injection and the `ledger` agent — for the tests that
// inject faults or count executions. Either starts with no build step (wrangler is
// given a config whose `main` is the artifact), in seconds.

import { execFile, spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, cpSync, existsSync, mkdtempSync, openSync, readFileSync, readdirSync, renameSync, rmSync, mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
/** Where scripts/artifacts.sh puts the reference worker's two artifacts. */
export const ARTIFACTS = join(ROOT, 'target', 'artifacts');
const WRANGLER = process.env.WRANGLER ?? join(ROOT, 'node_modules', '.bin', 'wrangler');
const E2E_DIR = join(ROOT, '.e2e');
const START_TIMEOUT_MS = 90_000;
const START_ATTEMPTS = 3;

/** Every vars key of SPEC §6, so that a developer's .dev.vars never leaks into a test. */
const DEFAULT_VARS = {
  API_TOKEN: 'e2e-api-token',
  ALLOW_UNAUTHENTICATED: 'false',
  LLM_PROVIDER: 'demo',
  LLM_BASE_URL: '',
  LLM_MODEL: '',
  LLM_API_KEY: '',
  LOG_LEVEL: '',
  LEDGER_URL: '', // test build only: the `ledger` agent reports executions here
  REMOTE_AGENT_URL: '', // the `dispatcher` agent's remote deployment
  REMOTE_AGENT_TOKEN: '',
  DATABASE_SHARDS: '', // the record's D1 databases; `startWorker({ shards })` names them
  RETAIN_DAYS: '', // retention (the cron trigger's): everything kept unless a test sets them
  ERASE_AFTER_DAYS: '',
  RETENTION_BATCH: '',
  D1_REPLICA: '', // `full` unless a test keeps the index only
};

const running = new Set();
process.on('exit', () => {
  for (const child of running) killGroup(child, 'SIGKILL');
});

/** A free TCP port on 127.0.0.1. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function killGroup(child, signal) {
  try {
    process.kill(-child.pid, signal);
  } catch {
    // Already gone.
  }
}

/** Runs a wrangler command to its end (no metrics, CI mode), from ROOT unless `opts.cwd`. */
export function wrangler(args, opts = {}) {
  return spawnSync(WRANGLER, args, {
    cwd: opts.cwd ?? ROOT,
    encoding: 'utf8',
    env: { ...process.env, WRANGLER_SEND_METRICS: 'false', CI: 'true' },
    ...opts,
  });
}

/**
 * Whether wrangler is done starting. Once its file watcher is ready it always runs the
 * [build] step again ("The file src changed, restarting build...") and then starts or
 * reloads the server; a request that meets the reload fails with "Your worker restarted
 * mid-request". So a worker is ready only after that.
 */
function settled(log, built) {
  // With no [build] step (the reference worker's artifacts) there is nothing to rebuild.
  if (!built) return log.includes('Ready on');
  const rebuilt = log.indexOf('changed, restarting build');
  if (rebuilt < 0) return false;
  const after = log.slice(rebuilt);
  return after.includes('Starting local server') ? after.includes('Ready on') : after.includes('Local server updated');
}

/**
 * The shard (of `n`) helix-edge gives a root session `id`: SHA-256 of the id, its first 8
 * bytes big-endian, modulo the count (`store::shards::shard_of`).
 */
export const shardOf = (id, n) => Number(createHash('sha256').update(id).digest().readBigUInt64BE(0) % BigInt(n));

/** The D1 bindings of the reference worker's record over `n` shards: DB, DB_1, … */
export const shardBindings = (n) => Array.from({ length: n }, (_, i) => (i === 0 ? 'DB' : `DB_${i}`));

/** The example worker's directory (its artifact is `example`). */
export const EXAMPLE = join(ROOT, 'examples', 'minimal-worker');

/**
 * A wrangler config for the worker in `dir` (the reference worker at the root, or the
 * example) as artifact `artifact` of target/artifacts (`production`, `test`,
 * `example`), with the reference's record over `shards` local D1 databases when given:
 * its wrangler.toml with `main` at the artifact, no [build] step (nothing is built or
 * watched) and the other D1 bindings added, written beside it (its paths are relative
 * to it) as `.wrangler-e2e-….toml` (ignored by git). One per test process, written once
 * and removed when the process exits: `wrangler dev` watches its config file and
 * reloads the worker when it changes, so a file shared by test files running at once
 * would restart one file's worker mid-step whenever another started its own.
 */
function artifactConfig(dir, artifact, shards) {
  const main = join(ARTIFACTS, artifact, 'worker', 'shim.mjs');
  if (!existsSync(main)) {
    throw new Error(`no ${artifact} artifact at ${main}: build it with scripts/artifacts.sh (scripts/test.sh does)`);
  }
  const name = `.wrangler-e2e-${artifact}${shards ? `-shards-${shards}` : ''}-${process.pid}.toml`;
  const added = shardBindings(shards ?? 1).slice(1).map((binding, i) => [
    '', '[[d1_databases]]', `binding = "${binding}"`, `database_name = "helix-edge-${i + 1}"`,
    `database_id = "00000000-0000-0000-0000-${String(i + 1).padStart(12, '0')}"`,
    'migrations_dir = "migrations"', '',
  ].join('\n'));
  const text = readFileSync(join(dir, 'wrangler.toml'), 'utf8')
    .replace(/^main = .*$/m, `main = ${JSON.stringify(main)}`)
    .replace(/^\[build\]\n[\s\S]*?(?=^\[)/m, '') + added.join('');
  const path = join(dir, name);
  if (!existsSync(path) || readFileSync(path, 'utf8') !== text) {
    writeFileSync(path, text);
    configs.add(path);
  }
  return path;
}

/** The config files this process wrote, removed as it exits. */
const configs = new Set();
process.on('exit', () => {
  for (const path of configs) rmSync(path, { force: true });
});

/**
 * Runs SQL on the local D1 database `binding` of `worker` (its config and persist
 * directory): the rows. Asynchronous: a synchronous child process would stop the event
 * loop, and a kept-alive connection to the worker could then be closed by the server
 * unnoticed and fail the next request.
 */
export function d1Rows(worker, binding, sql) {
  const config = worker.config ? ['--config', worker.config] : [];
  const args = ['d1', 'execute', binding, '--local', '--persist-to', worker.persistDir, ...config, '--json', '--command', sql];
  return new Promise((resolve, reject) => {
    execFile(WRANGLER, args, { cwd: ROOT, env: { ...process.env, WRANGLER_SEND_METRICS: 'false', CI: 'true' }, maxBuffer: 64 << 20 },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`d1 execute ${binding} failed:\n${stdout}\n${stderr}`));
        else resolve(JSON.parse(stdout)[0].results);
      });
  });
}

/**
 * The worker's log once it matches `pattern` (wrangler writes a line a little after the
 * response that logged it went out); fails after `timeoutMs` with the log's tail.
 */
export async function logged(worker, pattern, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const log = readFileSync(worker.logPath, 'utf8');
    if (pattern.test(log)) return log;
    if (Date.now() > deadline) throw new Error(`no ${pattern} in the log within ${timeoutMs} ms:\n${log.slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Local D1 state with `bindings` migrated (`wrangler d1 migrations apply`) for the
 * worker in `dir` with `configArgs`: made once per worker, config and set of migration
 * files (its key) under .e2e/, and copied into each new persist directory — a start
 * without wrangler's two-second migration run. Made in a directory of its own and
 * renamed into place, as test files running at once may make the same one.
 */
function migratedState(dir, configArgs, bindings) {
  const migrations = join(dir, 'migrations');
  // Keyed by the config's text, not its path (each test process has a file of its own).
  const config = configArgs.length ? readFileSync(configArgs[1], 'utf8') : '';
  const hash = createHash('sha256').update(JSON.stringify([dir, config, bindings]));
  for (const file of readdirSync(migrations).sort()) hash.update(file).update(readFileSync(join(migrations, file)));
  const path = join(E2E_DIR, `migrated-${hash.digest('hex').slice(0, 16)}`);
  if (existsSync(path)) return path;
  const making = mkdtempSync(join(E2E_DIR, 'migrating-'));
  for (const binding of bindings) {
    const migrated = wrangler(['d1', 'migrations', 'apply', binding, '--local', '--persist-to', making, ...configArgs], { cwd: dir });
    if (migrated.status !== 0) {
      rmSync(making, { recursive: true, force: true });
      throw new Error(`d1 migrations apply ${binding} failed:\n${migrated.stdout}\n${migrated.stderr}`);
    }
  }
  try {
    renameSync(making, path);
  } catch {
    rmSync(making, { recursive: true, force: true }); // another file made it first
  }
  return path;
}

/**
 * Starts a worker: the reference worker at the root (as artifact `flavour`: `production`
 * unless a test needs the test flavour), the example (`dir: EXAMPLE`, as its `wrangler
 * deploy` built it), or the worker in another `dir` (a generated one, built by its own
 * [build] step). `persistDir` defaults to a fresh directory; pass the same one to a second
 * `startWorker` (after `stop()`) to prove that state survives a restart.
 * `devtools: false` starts it without wrangler's devtools relay (see `launch`).
 * `shards: n` spreads the reference worker's record over n local D1 databases
 * (`DATABASE_SHARDS`), each migrated; `scheduled: true` lets `GET /__scheduled` run the
 * worker's cron trigger (`--test-scheduled`).
 */
export async function startWorker({ dir = ROOT, flavour = 'production', persistDir, vars = {}, migrate = true, devtools = true, timeoutMs, shards, scheduled } = {}) {
  mkdirSync(E2E_DIR, { recursive: true });
  persistDir ??= mkdtempSync(join(E2E_DIR, 'state-'));
  const artifact = { [ROOT]: flavour, [EXAMPLE]: 'example' }[dir];
  const config = artifact ? artifactConfig(dir, artifact, shards) : undefined;
  const configArgs = config ? ['--config', config] : [];
  if (migrate && !existsSync(join(persistDir, 'v3', 'd1'))) {
    cpSync(migratedState(dir, configArgs, shardBindings(shards ?? 1)), persistDir, { recursive: true });
  }
  const sharded = shards ? { DATABASE_SHARDS: shardBindings(shards).join(',') } : {};
  const allVars = dir === ROOT ? { ...DEFAULT_VARS, ...sharded, ...vars } : vars;
  for (let attempt = 1; ; attempt++) {
    try {
      const devArgs = [...configArgs, ...(scheduled ? ['--test-scheduled'] : [])];
      const worker = await launch(dir, persistDir, allVars, devtools, timeoutMs ?? START_TIMEOUT_MS, devArgs);
      return Object.assign(worker, { config });
    } catch (err) {
      // A free port found here can be taken by another process before workerd binds it;
      // wrangler then exits. That is the machine, not the worker: try other ports.
      if (!(err instanceof PortTaken) || attempt === START_ATTEMPTS) throw err;
      console.error(`# ${err.message}; starting again on other ports`);
    }
  }
}

class PortTaken extends Error {}

/**
 * wrangler dev relays the worker's devtools protocol through a worker of its own that
 * turns on the Network domain and posts every message it gets to wrangler's node
 * process: a few milliseconds of CPU per subrequest and per log line, which production
 * does not have. wrangler has no flag to turn the relay off; it leaves it out when it
 * runs in VS Code's JavaScript debug terminal, which it tells by this variable being set
 * (ProxyController.inspectorEnabled in wrangler 4). Logs are printed either way.
 */
const NO_DEVTOOLS_ENV = { VSCODE_INSPECTOR_OPTIONS: '{}' };

async function launch(dir, persistDir, allVars, devtools, timeoutMs, configArgs = []) {
  const port = await freePort();
  const inspectorPort = await freePort();
  const args = [
    'dev', ...configArgs, '--ip', '127.0.0.1', '--port', String(port), '--inspector-port', String(inspectorPort),
    '--persist-to', persistDir, '--show-interactive-dev-session=false',
    // `{port}` in a var is the worker's own port (its public URL, say).
    ...Object.entries(allVars).flatMap(([k, v]) => ['--var', `${k}:${String(v).replaceAll('{port}', port)}`]),
  ];
  const logPath = join(persistDir, `wrangler-${port}.log`);
  const log = openSync(logPath, 'a');
  const child = spawn(WRANGLER, args, {
    cwd: dir,
    detached: true, // its own process group, so stop() reaches workerd too
    stdio: ['ignore', log, log],
    env: {
      ...process.env,
      WRANGLER_SEND_METRICS: 'false',
      ...(devtools ? {} : NO_DEVTOOLS_ENV),
    },
  });
  closeSync(log);
  running.add(child);
  const exited = new Promise((resolve) => child.once('exit', resolve));

  const baseUrl = `http://127.0.0.1:${port}`;
  const worker = {
    baseUrl,
    persistDir,
    built: !configArgs.includes('--config'),
    /** wrangler's process group (it and its workerd processes). */
    pid: child.pid,
    logPath,
    /** fetch relative to the worker. */
    fetch: (path, init) => fetch(baseUrl + path, init),
    /** Kills wrangler and workerd at once (SIGKILL to the group): a crash, nothing flushed. */
    async kill() {
      if (!running.has(child)) return;
      killGroup(child, 'SIGKILL');
      await exited;
      running.delete(child);
    },
    /** Stops wrangler and workerd: SIGTERM, then SIGKILL after 5 s. */
    async stop() {
      if (!running.has(child)) return;
      killGroup(child, 'SIGTERM');
      const timer = setTimeout(() => killGroup(child, 'SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
      killGroup(child, 'SIGKILL'); // workerd children that outlived wrangler
      running.delete(child);
    },
    /** Deletes the persist directory (after stop). */
    cleanup() {
      rmSync(persistDir, { recursive: true, force: true });
    },
  };

  // Only ask once wrangler says it is listening: a connection attempt to a port nobody
  // listens on yet can be given that very port as its own source port by the kernel
  // (a TCP self-connect), which then holds it and makes workerd's bind fail.
  const deadline = Date.now() + timeoutMs;
  let early = false;
  exited.then(() => { early = true; });
  while (Date.now() < deadline && !early) {
    if (settled(readFileSync(logPath, 'utf8'), worker.built)) {
      try {
        const t0 = performance.now();
        const res = await fetch(`${baseUrl}/healthz`);
        if (res.ok) {
          // The isolate's first request (bench/cold.mjs reports it).
          worker.firstHealthzMs = performance.now() - t0;
          return worker;
        }
      } catch {
        // Not answering yet.
      }
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  await worker.stop();
  const tail = readFileSync(logPath, 'utf8').slice(-4000);
  if (early && tail.includes('Address already in use')) throw new PortTaken(`port ${port} or ${inspectorPort} was taken`);
  throw new Error(`wrangler dev did not answer /healthz; log ${logPath}:\n${tail}`);
}
