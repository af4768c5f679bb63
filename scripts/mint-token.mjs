#!/usr/bin/env node
// Mints a user's token for a local try of helix-edge's `users` feature: an HS256 JWT
// signed with JWT_SECRET, for the issuer and audience the worker checks, printed on
// stdout (docs/src/users.md).
//
//   node scripts/mint-token.mjs SUBJECT [--tenant TENANT] [--roles a,b] [--ttl SECONDS]
//
// It reads JWT_SECRET, JWT_ISSUER, JWT_AUDIENCE, JWT_TENANT_CLAIM (default `tenant`) and
// JWT_ROLES_CLAIM (default `roles`) from the environment, else from .dev.vars (the
// current directory's, or this checkout's; --vars FILE names another). The worker
// reads a tenant and roles only from the claims its own JWT_TENANT_CLAIM and
// JWT_ROLES_CLAIM name. Plain Node (20 or later), no dependencies.

import { createHmac } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const USAGE = 'usage: node scripts/mint-token.mjs SUBJECT [--tenant TENANT] [--roles a,b] [--ttl SECONDS] [--vars FILE]';
/** The shortest secret the worker accepts for HS256 (bytes). */
const MIN_SECRET_BYTES = 32;

function fail(message) {
  console.error(`mint-token: ${message}`);
  process.exit(2);
}

/** SUBJECT and the options. */
function parseArgs(argv) {
  const args = { subject: undefined, tenant: undefined, roles: undefined, ttl: 3600, vars: undefined };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      const v = argv[++i];
      if (v === undefined || v.startsWith('--')) fail(`${arg} needs a value\n${USAGE}`);
      return v;
    };
    if (arg === '--help' || arg === '-h') {
      console.log(USAGE);
      process.exit(0);
    } else if (arg === '--tenant') args.tenant = value();
    else if (arg === '--roles') args.roles = value().split(',').map((r) => r.trim()).filter(Boolean);
    else if (arg === '--ttl') {
      const ttl = Number(value());
      if (!Number.isInteger(ttl) || ttl <= 0) fail('--ttl is a whole number of seconds, more than 0');
      args.ttl = ttl;
    } else if (arg === '--vars') args.vars = value();
    else if (arg.startsWith('--')) fail(`unknown option ${arg}\n${USAGE}`);
    else if (args.subject === undefined) args.subject = arg;
    else fail(`one SUBJECT only\n${USAGE}`);
  }
  if (!args.subject) fail(USAGE);
  return args;
}

/** The KEY=VALUE lines of a .dev.vars file (comments and blank lines skipped, quotes taken off). */
function readVars(file) {
  const vars = {};
  for (const raw of readFileSync(file, 'utf8').split(/\r?\n/)) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const m = /^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$/.exec(line);
    if (!m) continue;
    let value = m[2];
    const quoted = /^(["'])(.*)\1$/.exec(value);
    // As wrangler's dotenv reads it: a quoted value as written, else up to a `#`, trimmed.
    if (quoted) value = quoted[2];
    else value = value.replace(/#.*$/, '').trim();
    vars[m[1]] = value;
  }
  return vars;
}

/** The .dev.vars to read: --vars, else the current directory's, else this checkout's. */
function varsFile(named) {
  if (named) {
    if (!existsSync(named)) fail(`${named} does not exist`);
    return resolve(named);
  }
  const here = resolve('.dev.vars');
  if (existsSync(here)) return here;
  const checkout = join(dirname(fileURLToPath(import.meta.url)), '..', '.dev.vars');
  return existsSync(checkout) ? checkout : undefined;
}

const base64url = (data) => Buffer.from(data).toString('base64url');

const args = parseArgs(process.argv.slice(2));
const file = varsFile(args.vars);
const fromFile = file ? readVars(file) : {};
/** A setting from the environment, else from the file; empty counts as unset. */
const setting = (name) => {
  const value = process.env[name] ?? fromFile[name];
  return value === undefined || value.trim() === '' ? undefined : value;
};

const where = file ? `the environment or ${file}` : 'the environment (no .dev.vars found)';
const secret = setting('JWT_SECRET');
const issuer = setting('JWT_ISSUER');
const audience = setting('JWT_AUDIENCE');
const missing = [['JWT_SECRET', secret], ['JWT_ISSUER', issuer], ['JWT_AUDIENCE', audience]]
  .filter(([, v]) => v === undefined)
  .map(([n]) => n);
if (missing.length) fail(`set ${missing.join(', ')} in ${where}`);
if (Buffer.byteLength(secret, 'utf8') < MIN_SECRET_BYTES) {
  fail(`JWT_SECRET must be at least ${MIN_SECRET_BYTES} bytes (the worker refuses a shorter one)`);
}
const algorithms = setting('JWT_ALGORITHMS');
if (algorithms && !algorithms.split(',').map((a) => a.trim()).includes('HS256')) {
  console.error(`mint-token: note: JWT_ALGORITHMS is ${algorithms}; the worker accepts this HS256 token only if it lists HS256`);
}
const tenantClaim = setting('JWT_TENANT_CLAIM') ?? 'tenant';
const rolesClaim = setting('JWT_ROLES_CLAIM') ?? 'roles';
if (args.tenant !== undefined && !setting('JWT_TENANT_CLAIM')) {
  console.error(`mint-token: note: JWT_TENANT_CLAIM is not set, so the worker ignores the tenant (written as "${tenantClaim}")`);
}
if (args.roles !== undefined && !setting('JWT_ROLES_CLAIM')) {
  console.error(`mint-token: note: JWT_ROLES_CLAIM is not set, so the worker ignores the roles (written as "${rolesClaim}")`);
}

const now = Math.floor(Date.now() / 1000);
const claims = { iss: issuer, aud: audience, sub: args.subject, iat: now, nbf: now, exp: now + args.ttl };
if (args.tenant !== undefined) claims[tenantClaim] = args.tenant;
if (args.roles !== undefined) claims[rolesClaim] = args.roles;

const signingInput = `${base64url(JSON.stringify({ alg: 'HS256', typ: 'JWT' }))}.${base64url(JSON.stringify(claims))}`;
const signature = createHmac('sha256', Buffer.from(secret, 'utf8')).update(signingInput).digest('base64url');
console.log(`${signingInput}.${signature}`);
