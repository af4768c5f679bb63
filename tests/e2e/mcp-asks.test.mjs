// MCP servers that ask the user, durably (SPEC §2c's pending kinds), against real servers
// built on the official TypeScript SDK (`mcp-server.mjs`): an elicitation during a call
// — a pending `elicitation` call, answered over `POST …/tool-results` after a SIGKILL of
// `wrangler dev`, the answer reaching the server and its event stream resumed — and a
// server that needs OAuth — its stand-in `connect` tool, a pending `authorization` call
// with the authorize URL, followed as a browser would after a SIGKILL (dynamic
// registration, PKCE, consent at once, the redirect to the worker's callback), the
// server's tools offered once connected and its token in no record, stream or log.
// Bad answers and forged or replayed callbacks change nothing.

import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { HelixClient } from '@helix-edge/client';
import { API_TOKEN, api, startWithMock, waitFor } from './client.mjs';
import { startMcpServer } from './mcp-server.mjs';
import { openStream } from './sse.mjs';

const TOKEN = 'mcp-asks-token';
const cleanup = [];
after(async () => {
  for (const stop of cleanup.reverse()) await stop();
});

let n = 0;
const newId = (name) => `${name}-${process.pid}-${++n}`;

/** A worker for `vars`, stopped after the file (`restart` kills and starts it again). */
async function worker(vars) {
  let started = await startWithMock(vars);
  const handle = {
    get worker() { return started.worker; },
    get llm() { return started.llm; },
    /** SIGKILL, then a new `wrangler dev` over the same state. */
    async restart() {
      const persistDir = started.worker.persistDir;
      await started.worker.kill();
      await started.llm.close();
      started = await startWithMock(vars, persistDir);
    },
  };
  cleanup.push(async () => {
    await started.worker.stop();
    await started.llm.close();
    started.worker.cleanup();
  });
  return handle;
}

const waiting = (w, id) =>
  waitFor(w.worker, id, (s) => s.status !== 'active' || s.pendingToolCalls.length > 0, 30_000);

async function events(w, id) {
  const sse = await openStream(`${w.worker.baseUrl}/v1/sessions/${id}/stream`, {
    headers: { authorization: 'Bearer e2e-api-token' }, lastEventId: '0',
  });
  const seen = await sse.until((e) => e.type === 'end' || e.type === 'run_suspended');
  sse.close?.();
  return seen;
}

async function toolMessages(w, id) {
  const res = await api(w.worker, 'GET', `/v1/sessions/${id}/messages?limit=200`);
  assert.equal(res.status, 200);
  return res.body.messages.filter((m) => m.role === 'tool');
}

test('an elicitation waits durably: answered after a SIGKILL, it reaches the server and the call goes on once', async () => {
  const mcp = await startMcpServer({ token: TOKEN });
  cleanup.push(() => mcp.close());
  const w = await worker({ MCP_SERVER_URL: mcp.url, MCP_SERVER_NAME: 'files', MCP_SERVER_TOKEN: TOKEN });
  const id = newId('ask');
  w.llm.push({ calls: [{ name: 'files__ask', args: {} }] });
  const created = await api(w.worker, 'POST', '/v1/sessions', { agent: 'connector', sessionId: id, input: 'ask me' });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const session = await waiting(w, id);
  const [pending] = session.pendingToolCalls;
  assert.equal(pending.kind, 'elicitation', JSON.stringify(session));
  assert.equal(pending.message, 'What is your name?');
  assert.equal(pending.server, 'files');
  assert.deepEqual(pending.requestedSchema.required, ['name']);
  const asked = (await events(w, id)).find((e) => e.type === 'custom' && e.json.eventName === 'input_request');
  assert.equal(asked.json.data.kind, 'elicitation');
  assert.equal(asked.json.data.toolCallId, pending.toolCallId);
  // The inbox reads the record (D1): as fresh as replication.
  let inbox;
  for (const deadline = Date.now() + 15_000; Date.now() < deadline;) {
    inbox = await api(w.worker, 'GET', '/v1/inbox?kind=elicitation');
    assert.equal(inbox.status, 200);
    if (inbox.body.items.some((i) => i.sessionId === id)) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  const item = inbox.body.items.find((i) => i.sessionId === id);
  assert.equal(item?.message, 'What is your name?', JSON.stringify(inbox.body));
  assert.equal(item.kind, 'elicitation');

  const answer = (body) => api(w.worker, 'POST', `/v1/sessions/${id}/tool-results`, { toolCallId: pending.toolCallId, ...body });
  for (const bad of [
    { kind: 'elicitation-response', action: 'accept', content: { name: 7 } },
    { kind: 'elicitation-response', action: 'accept' },
    { kind: 'elicitation-response', action: 'perhaps' },
    { kind: 'elicitation-response', action: 'decline', content: {} },
    { kind: 'approval-response', approved: true },
    { kind: 'authorization-response', action: 'cancel' },
  ]) {
    const res = await answer(bad);
    assert.ok([400, 409].includes(res.status), `${JSON.stringify(bad)}: ${res.status} ${JSON.stringify(res.body)}`);
  }
  assert.equal((await api(w.worker, 'GET', `/v1/sessions/${id}`)).body.pendingToolCalls.length, 1, 'nothing changed');

  await w.restart();
  w.llm.push({ text: 'Nice to meet you, Ann.' });
  // Through the TypeScript client, as an app would.
  const client = new HelixClient({ baseUrl: w.worker.baseUrl, token: API_TOKEN });
  await client.session(id).answerElicitation(pending.toolCallId, { action: 'accept', content: { name: 'Ann' } });
  const again = await answer({ kind: 'elicitation-response', action: 'cancel' });
  assert.ok([404, 409].includes(again.status), `a second answer: ${again.status}`);
  const done = await waitFor(w.worker, id, (s) => s.status !== 'active', 30_000);
  assert.equal(done.status, 'completed', JSON.stringify(done));
  assert.deepEqual(mcp.record.elicited, [{ action: 'accept', content: { name: 'Ann' } }]);
  assert.equal(mcp.ran('ask').length, 1, 'the tool ran once');
  const [result] = await toolMessages(w, id);
  assert.deepEqual(result.content, { text: 'hello Ann' });
  const starts = (await events(w, id)).filter((e) => e.type === 'tool_start');
  assert.equal(starts.length, 1, 'one tool_start for the call');
});

test('a server that needs OAuth: the user connects after a SIGKILL, its tools follow, and its token stays in the vault', async () => {
  const mcp = await startMcpServer({ oauth: true });
  cleanup.push(() => mcp.close());
  const vars = {
    MCP_SERVER_URL: mcp.url, MCP_SERVER_NAME: 'files', MCP_SERVER_OAUTH: 'true', PUBLIC_URL: 'http://127.0.0.1:{port}',
  };
  const w = await worker(vars);
  const id = newId('oauth');
  w.llm.push({ calls: [{ name: 'files__connect', args: {} }] });
  const created = await api(w.worker, 'POST', '/v1/sessions', { agent: 'connector', sessionId: id, input: 'echo hi' });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const session = await waiting(w, id);
  const offered = w.llm.requests[0].body.tools.map((t) => t.function.name);
  assert.deepEqual(offered, ['files__connect'], 'before connecting: the stand-in only');
  const [pending] = session.pendingToolCalls;
  assert.equal(pending.kind, 'authorization', JSON.stringify(session));
  assert.equal(pending.signInUrl, undefined, 'where the start leads is for the worker to hand out');
  const link = new URL(pending.authorizeUrl);
  assert.equal(link.pathname, `/v1/sessions/${id}/authorize`, 'the start link is the worker\u2019s');
  const state = link.searchParams.get('state');
  assert.ok(state.startsWith(`${id}.`), state);

  // Only whoever may answer the call starts it: no credentials, 401; another
  // session's token, refused; nothing changes.
  assert.equal((await fetch(pending.authorizeUrl, { redirect: 'manual' })).status, 401);
  const other = await api(w.worker, 'POST', '/v1/sessions', { agent: 'assistant', input: 'hi' });
  const foreign = await fetch(`${pending.authorizeUrl}&token=${other.body.sessionToken}`, { redirect: 'manual' });
  assert.ok([403, 404].includes(foreign.status), `another session's token: ${foreign.status}`);
  const started = await start(pending.authorizeUrl);
  const authorize = new URL(started.signIn);
  assert.equal(authorize.searchParams.get('code_challenge_method'), 'S256');
  assert.equal(authorize.searchParams.get('resource'), mcp.url);
  assert.equal(authorize.searchParams.get('state'), state);

  // A forged state is not pending, none is malformed: nothing changes.
  const callback = (query, cookie) =>
    fetch(`${w.worker.baseUrl}/v1/mcp/callback?${query}`, { headers: cookie ? { cookie } : {} });
  const forged = await callback(`code=abc&state=${encodeURIComponent(`${id}.forged`)}`);
  assert.equal(forged.status, 404);
  assert.match(forged.headers.get('content-type'), /text\/html/);
  assert.equal((await callback('code=abc')).status, 400);
  assert.equal((await api(w.worker, 'GET', `/v1/sessions/${id}`)).body.pendingToolCalls.length, 1, 'nothing changed');

  await w.restart();
  w.llm.push({ calls: [{ name: 'files__echo', args: { text: 'hi' } }] }, { text: 'It said hi.' });
  // The browser: the authorization server consents at once and redirects to the
  // worker's callback (registered with the port before the restart: the same path).
  const consent = await fetch(started.signIn, { redirect: 'manual' });
  assert.equal(consent.status, 302, await consent.text());
  const back = new URL(consent.headers.get('location'));
  assert.equal(back.pathname, '/v1/mcp/callback');
  // Someone else's browser (the link passed on): no cookie of this flow, or another
  // flow's, finishes nothing.
  for (const cookie of [undefined, `${started.cookie.split('=')[0]}=forged`]) {
    const elsewhere = await callback(back.search.slice(1), cookie);
    assert.equal(elsewhere.status, 403, await elsewhere.clone().text());
    assert.match(await elsewhere.text(), /started in another browser/);
  }
  assert.equal((await api(w.worker, 'GET', `/v1/sessions/${id}`)).body.pendingToolCalls.length, 1, 'still waiting');
  const landed = await callback(back.search.slice(1), started.cookie);
  assert.equal(landed.status, 200, await landed.clone().text());
  assert.match(await landed.text(), /Connected/);
  const done = await waitFor(w.worker, id, (s) => s.status !== 'active', 30_000);
  assert.equal(done.status, 'completed', JSON.stringify(done));
  const replayed = await callback(back.search.slice(1), started.cookie);
  assert.equal(replayed.status, 404, 'a used state is no longer pending');

  const after = w.llm.requests.at(-2).body.tools.map((t) => t.function.name);
  assert.ok(after.includes('files__echo'), `once connected, its tools: ${after}`);
  const results = await toolMessages(w, id);
  assert.deepEqual(results.map((m) => m.toolName), ['files__connect', 'files__echo']);
  assert.deepEqual(results[1].content, { text: 'echo: hi' });
  assert.equal(mcp.ran('echo').length, 1);

  // After another SIGKILL the session still holds its tokens and its MCP session: the
  // next message uses the server's tools at once, with no new authorization and no new
  // initialisation.
  const sessionsBefore = mcp.record.sessions;
  await w.restart();
  w.llm.push({ calls: [{ name: 'files__echo', args: { text: 'again' } }] }, { text: 'Again.' });
  const more = await api(w.worker, 'POST', `/v1/sessions/${id}/messages`, { message: 'echo again' });
  assert.equal(more.status, 202, JSON.stringify(more.body));
  const again = await waitFor(w.worker, id, (s) => s.status !== 'active' || s.pendingToolCalls.length > 0, 30_000);
  assert.equal(again.status, 'completed', JSON.stringify(again));
  assert.equal(mcp.ran('echo').length, 2);
  assert.equal(mcp.record.issued.length, 1, 'no new authorization');
  assert.equal(mcp.record.sessions, sessionsBefore, 'the same MCP session');

  // The server revokes the token: the next call waits on a new authorization (the
  // server's tools still offered, from the list the session kept), and goes on once
  // the user connected again.
  mcp.record.provider.tokens.clear();
  w.llm.push({ calls: [{ name: 'files__echo', args: { text: 'revoked' } }] }, { text: 'Back.' });
  const third = await api(w.worker, 'POST', `/v1/sessions/${id}/messages`, { message: 'echo once more' });
  assert.equal(third.status, 202, JSON.stringify(third.body));
  const asking = await waiting(w, id);
  const offeredAgain = w.llm.requests.at(-1).body.tools.map((t) => t.function.name);
  assert.ok(offeredAgain.includes('files__echo'), `the kept tools: ${offeredAgain}`);
  const [reconnect] = asking.pendingToolCalls;
  assert.equal(reconnect?.kind, 'authorization', JSON.stringify([asking, (await toolMessages(w, id)).slice(-2)]));
  assert.equal(reconnect.toolName, 'files__echo');
  const restarted = await start(reconnect.authorizeUrl);
  const consented = await fetch(restarted.signIn, { redirect: 'manual' });
  const returned = new URL(consented.headers.get('location'));
  assert.equal((await callback(returned.search.slice(1), restarted.cookie)).status, 200);
  const fine = await waitFor(w.worker, id, (s) => s.status !== 'active', 30_000);
  assert.equal(fine.status, 'completed', JSON.stringify(fine));
  assert.equal(mcp.ran('echo').length, 3, 'the call ran once, after connecting again');
  assert.equal(mcp.record.issued.length, 2);

  // The tokens are the session's (its object's vault): never in the record, the
  // stream, the model's requests or the logs.
  const leaks = (text) => mcp.record.issued.some((token) => text.includes(token));
  const view = JSON.stringify(await api(w.worker, 'GET', `/v1/sessions/${id}`));
  const messages = JSON.stringify(await api(w.worker, 'GET', `/v1/sessions/${id}/messages?limit=200`));
  const stream = JSON.stringify(await events(w, id));
  for (const [where, text] of [['view', view], ['messages', messages], ['stream', stream], ['model', JSON.stringify(w.llm.requests)]]) {
    assert.ok(!leaks(text), `no token in the ${where}`);
  }
  const stored = files(w.worker.persistDir);
  const logs = stored.filter((f) => /wrangler-\d+\.log$/.test(f));
  assert.equal(logs.length, 3, 'the three processes logged');
  for (const file of logs) {
    assert.ok(!leaks(readFileSync(file, 'utf8')), `no token in ${file}`);
  }
  const d1 = stored.filter((f) => /[\\/]d1[\\/]/.test(f) && f.endsWith('.sqlite'));
  assert.ok(d1.length > 0, 'the local D1 database is there');
  for (const file of d1) {
    assert.ok(!leaks(readFileSync(file, 'latin1')), `no token in ${file}`);
  }
});

test('a user who will not connect declines: the call fails, saying so, and the run goes on', async () => {
  const mcp = await startMcpServer({ oauth: true });
  cleanup.push(() => mcp.close());
  const w = await worker({ MCP_SERVER_URL: mcp.url, MCP_SERVER_NAME: 'files', MCP_SERVER_OAUTH: 'true', PUBLIC_URL: 'http://127.0.0.1:{port}' });
  const id = newId('decline');
  w.llm.push({ calls: [{ name: 'files__connect', args: {} }] }, { text: 'Without access, then.' });
  await api(w.worker, 'POST', '/v1/sessions', { agent: 'connector', sessionId: id, input: 'echo hi' });
  const [pending] = (await waiting(w, id)).pendingToolCalls;
  assert.equal(pending.kind, 'authorization');
  const client = new HelixClient({ baseUrl: w.worker.baseUrl, token: API_TOKEN });
  await client.session(id).declineAuthorization(pending.toolCallId);
  const done = await waitFor(w.worker, id, (s) => s.status !== 'active', 30_000);
  assert.equal(done.status, 'completed', JSON.stringify(done));
  const [result] = await toolMessages(w, id);
  assert.equal(result.isError, true);
  assert.match(result.content.error, /could not be authorized: the user did not connect \(decline\)/);
  assert.equal(mcp.record.issued.length, 0, 'no token was issued');
});

/**
 * A browser starting an authorization with the API token (a tab would send `?token=`):
 * where it is sent to sign in, and the flow's cookie (`name=value`).
 */
async function start(authorizeUrl) {
  const res = await fetch(authorizeUrl, { redirect: 'manual', headers: { authorization: `Bearer ${API_TOKEN}` } });
  assert.equal(res.status, 302, await res.text());
  const setCookie = res.headers.get('set-cookie');
  assert.match(setCookie, /^helix_mcp_[0-9a-f]{16}=[\w-]+; Path=\/v1\/mcp\/callback; Max-Age=600; HttpOnly; SameSite=Lax$/);
  assert.equal(res.headers.get('referrer-policy'), 'no-referrer');
  return { signIn: res.headers.get('location'), cookie: setCookie.split(';')[0] };
}

/** Every file under `dir`. */
function files(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : [path];
  });
}
