// Skills kept in a store against the real worker (wrangler dev, its local R2 bucket
// FILES): the reference `librarian` lists `skills/` as each run starts, loads a skill
// when the model asks and reads a file of it by byte range; the skill is edited in the
// bucket between two runs and the second run sees the new description and loads the
// new version; a loaded skill's `allowed-tools` refuses other tools. The same agent
// over the local KV namespace (`librarian-kv`) lists, loads and reads a skill there.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { api, startWithMock, waitFor } from './client.mjs';
import { wrangler } from './harness.mjs';

let worker;
let llm;
before(async () => { ({ worker, llm } = await startWithMock()); });
after(async () => { await worker?.stop(); await llm?.close(); worker?.cleanup(); });

const skillMd = (description, allowed) => `---\nname: release-notes\ndescription: ${description}\n${
  allowed ? `allowed-tools: ${allowed}\n` : ''}---\nGroup the changes; see \`templates/notes.md\`.\n`;

/** Writes `text` at `key` of the local FILES bucket (`objects`) or KV namespace (`kv`)
 *  with wrangler, as an operator edits a skill: the running worker reads it there. */
async function put(key, text, store = 'objects') {
  const file = join(worker.persistDir, 'upload.txt');
  writeFileSync(file, text);
  const local = ['--local', '--persist-to', worker.persistDir, '--config', worker.config];
  const args = store === 'objects'
    ? ['r2', 'object', 'put', `helix-edge-files/${key}`, '--file', file, ...local]
    : ['kv', 'key', 'put', key, '--binding', 'KV', '--path', file, ...local];
  const res = wrangler(args);
  assert.equal(res.status, 0, `${res.stdout}\n${res.stderr}`);
}

/** The tool results the model was sent in its request `n` (from 0). */
const results = (n) => llm.requests[n].body.messages
  .filter((m) => m.role === 'tool')
  .map((m) => JSON.parse(m.content));

test('a skill in the R2 bucket is listed, loaded, read by range, and its edit seen by the next run', async () => {
  const prefix = `skills-${process.pid}`;
  await put('skills/release-notes/SKILL.md', skillMd(`Write release notes (${prefix}).`, 'note'));
  await put('skills/release-notes/templates/notes.md', '## Features\n- é\n');
  const id = `${prefix}-1`;
  const asked = llm.requests.length;
  llm.push({ calls: [{ name: 'load_skill', args: { name: 'release-notes' } }] });
  llm.push({ calls: [
    { name: 'read_skill_file', args: { name: 'release-notes', path: 'templates/notes.md', offset: 15, length: 1 } },
    { name: 'publish', args: {} },
    { name: 'note', args: { text: 'Features' } },
  ] });
  llm.push({ text: 'Notes written.' });
  const created = await api(worker, 'POST', '/v1/sessions', { agent: 'librarian', sessionId: id, input: 'release notes' });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const done = await waitFor(worker, id, (s) => s.status !== 'active', 30_000);
  assert.equal(done.status, 'completed', JSON.stringify(done));

  const first = llm.requests[asked].body.messages[0];
  assert.equal(first.role, 'system');
  assert.match(first.content, new RegExp(`- \`release-notes\`: Write release notes \\(${prefix}\\)\\.`));
  const [loaded] = results(asked + 1);
  assert.equal(loaded.instructions, 'Group the changes; see `templates/notes.md`.');
  assert.deepEqual([loaded.files, loaded.allowedTools], [['templates/notes.md'], ['note']]);
  assert.match(loaded.version, /^sha256:[0-9a-f]{16}$/);
  const [, read, refused, noted] = results(asked + 2);
  assert.deepEqual(read, { name: 'release-notes', path: 'templates/notes.md', offset: 14, length: 2, totalBytes: 17, content: 'é' });
  assert.equal(refused.code, 'tool_not_allowed', JSON.stringify(refused));
  assert.deepEqual(noted, { noted: 'Features' });

  // Edited in the bucket: the next run lists the new description and loads the new version.
  await put('skills/release-notes/SKILL.md', skillMd(`Write short release notes (${prefix}).`));
  const again = llm.requests.length;
  llm.push({ calls: [{ name: 'load_skill', args: { name: 'release-notes' } }] });
  llm.push({ text: 'Shorter.' });
  const sent = await api(worker, 'POST', `/v1/sessions/${id}/messages`, { message: 'again' });
  assert.equal(sent.status, 202, JSON.stringify(sent.body));
  await waitFor(worker, id, (s) => s.status === 'completed' && s.stepCount === 5, 30_000);
  assert.match(llm.requests[again].body.messages[0].content, /Write short release notes/);
  const reloaded = results(again + 1).at(-1);
  assert.match(reloaded.version, /^sha256:[0-9a-f]{16}$/);
  assert.notEqual(reloaded.version, loaded.version, 'the transcript records the version each run loaded');
  assert.equal(reloaded.allowedTools, undefined);
});

test('a skill in the KV namespace is listed, loaded and read by range', async () => {
  const tag = `kv-${process.pid}`;
  await put('skills/release-notes/SKILL.md', skillMd(`Write release notes (${tag}).`, 'note'), 'kv');
  await put('skills/release-notes/templates/notes.md', '## Features\n- é\n', 'kv');
  const asked = llm.requests.length;
  llm.push({ calls: [{ name: 'load_skill', args: { name: 'release-notes' } }] });
  llm.push({ calls: [{ name: 'read_skill_file', args: { name: 'release-notes', path: 'templates/notes.md', offset: 3, length: 8 } }] });
  llm.push({ text: 'Done.' });
  const created = await api(worker, 'POST', '/v1/sessions', { agent: 'librarian-kv', sessionId: tag, input: 'release notes' });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const done = await waitFor(worker, tag, (s) => s.status !== 'active', 30_000);
  assert.equal(done.status, 'completed', JSON.stringify(done));
  assert.match(llm.requests[asked].body.messages[0].content, new RegExp(`Write release notes \\(${tag}\\)`));
  const [loaded] = results(asked + 1);
  assert.deepEqual([loaded.files, loaded.allowedTools], [['templates/notes.md'], ['note']]);
  const [, read] = results(asked + 2);
  assert.deepEqual(read, { name: 'release-notes', path: 'templates/notes.md', offset: 3, length: 8, totalBytes: 17, content: 'Features' });
});
