// The client cannot drift from the server: its generated types are those of
// api/openapi.json, and it knows every chunk type the document lists.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CHUNK_TYPES } from '../dist/index.js';

const PKG = join(dirname(fileURLToPath(import.meta.url)), '..');
const DOC = JSON.parse(readFileSync(join(PKG, '..', '..', 'api', 'openapi.json'), 'utf8'));

test('src/openapi.ts is generated from the current api/openapi.json', () => {
  const dir = mkdtempSync(join(tmpdir(), 'helix-client-'));
  try {
    const out = join(dir, 'openapi.ts');
    const bin = join(PKG, '..', '..', 'node_modules', '.bin', 'openapi-typescript');
    execFileSync(bin, [join(PKG, '..', '..', 'api', 'openapi.json'), '--empty-objects-unknown', '--output', out], { stdio: 'pipe' });
    assert.equal(readFileSync(join(PKG, 'src', 'openapi.ts'), 'utf8'), readFileSync(out, 'utf8'),
      'run `npm run types` in clients/js');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the client knows exactly the chunk types the document lists', () => {
  const documented = Object.keys(DOC.components.schemas.StreamChunk.discriminator.mapping).sort();
  assert.deepEqual([...CHUNK_TYPES].sort(), documented);
});

test('npm pack ships the built module, its types and the README', () => {
  const out = execFileSync('npm', ['pack', '--dry-run', '--json'], { cwd: PKG, stdio: ['ignore', 'pipe', 'ignore'] });
  const files = JSON.parse(out.toString())[0].files.map((f) => f.path);
  for (const f of ['dist/index.js', 'dist/index.d.ts', 'dist/events.js', 'README.md', 'package.json']) {
    assert.ok(files.includes(f), `${f} is packed (got ${files.join(', ')})`);
  }
  const pkg = JSON.parse(readFileSync(join(PKG, 'package.json'), 'utf8'));
  assert.equal(pkg.exports['.'].import, './dist/index.js');
  assert.equal(pkg.exports['.'].types, './dist/index.d.ts');
});
