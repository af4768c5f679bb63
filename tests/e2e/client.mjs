// HTTP helpers for the end-to-end suite.

import { createServer, request } from 'node:http';
import { d1Rows, startWorker } from './harness.mjs';
import { startMockLlm } from './mock-llm.mjs';

export const API_TOKEN = 'e2e-api-token';

/**
 * `wrangler dev` puts a proxy of its own (its ProxyWorker) in front of the worker, which
 * production does not have. Now and then, mostly under load, a request between that
 * proxy and the worker fails in transit; the proxy then answers a POST with 503 and this
 * text (it re-sends GETs itself), although the worker did not restart and logged no
 * failure. See README, "End-to-end tests".
 */
const PROXY_DROP = 'Your worker restarted mid-request';
const RESENDS = 4;

/**
 * Calls the API; returns { status, body, headers, resent } (body parsed when JSON).
 * A request the proxy dropped (its 503 above) is sent again, as any HTTP client would,
 * up to 4 times, and `resent` counts the re-sends: when it is not 0 the first attempt
 * may have landed, so a 409 can be the worker's answer to the re-send.
 */
export async function api(worker, method, path, body, token = API_TOKEN) {
  const headers = { 'content-type': 'application/json' };
  if (token) headers.authorization = `Bearer ${token}`;
  const init = {
    method,
    headers,
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  };
  for (let resent = 0; ; resent++) {
    const res = await worker.fetch(path, init);
    const text = await res.text();
    if (resent === RESENDS || !(res.status === 503 && text.startsWith(PROXY_DROP))) {
      let parsed = text;
      try { parsed = JSON.parse(text); } catch { /* not JSON */ }
      return { status: res.status, body: parsed, headers: res.headers, resent };
    }
    console.error(`# wrangler dev's proxy dropped ${method} ${path}; sending it again`);
    await new Promise((r) => setTimeout(r, 50 * (resent + 1)));
  }
}

/**
 * A forwarder on loopback for outside HTTP clients (schemathesis) that re-sends what
 * wrangler's proxy dropped, as `api` does: every request goes to the worker unchanged,
 * and an answer that is the proxy's drop 503 (see above) is replaced by a re-send, up to
 * 4 times. Every other answer, streams included, passes through as it came.
 * Returns { url, drops() (the re-sends made), close() }.
 */
export async function resendingForwarder(worker) {
  const target = new URL(worker.baseUrl);
  let drops = 0;
  const send = (req, body) => new Promise((resolve, reject) => {
    const out = request({
      host: target.hostname, port: target.port, method: req.method, path: req.url,
      headers: { ...req.headers, host: target.host },
    }, resolve);
    out.on('error', reject);
    out.end(body);
  });
  const server = createServer(async (req, res) => {
    try {
      const chunks = [];
      for await (const chunk of req) chunks.push(chunk);
      const body = Buffer.concat(chunks);
      for (let resent = 0; ; resent++) {
        const answer = await send(req, body);
        if (answer.statusCode === 503 && resent < RESENDS) {
          const text = Buffer.concat(await answer.toArray());
          if (text.toString().startsWith(PROXY_DROP)) {
            drops++;
            console.error(`# wrangler dev's proxy dropped ${req.method} ${req.url}; sending it again`);
            await new Promise((r) => setTimeout(r, 50 * (resent + 1)));
            continue;
          }
          res.writeHead(answer.statusCode, answer.headers).end(text);
          return;
        }
        res.writeHead(answer.statusCode, answer.headers);
        answer.pipe(res);
        return;
      }
    } catch {
      res.destroy(); // the worker's connection failed: so does the client's
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    drops: () => drops,
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }),
  };
}

/** A mock model and a worker pointed at it (`options`: more for `startWorker`). */
export async function startWithMock(vars = {}, persistDir, options = {}) {
  const llm = await startMockLlm();
  try {
    const worker = await startWorker({
      ...options,
      persistDir,
      vars: {
        API_TOKEN,
        LLM_PROVIDER: 'openai',
        LLM_BASE_URL: llm.url,
        LLM_API_KEY: 'test-key',
        // The mock plays OpenAI's own API: its profile, not the conservative one a
        // server at an explicit LLM_BASE_URL gets.
        LLM_CAPABILITIES: 'strict_tools,strict_output,prompt_cache,images,documents,reasoning',
        LLM_MAX_RETRIES: '2',
        ASK_USER_DEADLINE_MS: '300000',
        LEDGER_URL: llm.ledgerUrl,
        ...vars,
      },
    });
    return { llm, worker };
  } catch (err) {
    await llm.close(); // an open server would keep the test process alive forever
    throw err;
  }
}

/** Polls `read` until `done(value)` holds (or `timeoutMs` pass): the last value. */
export async function eventually(read, done, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value) || Date.now() > deadline) return value;
    await new Promise((r) => setTimeout(r, 250));
  }
}

/**
 * Waits until the record (D1 `binding`) has each session of `ids` at least at the
 * version its object reports: every commit so far replicated. Black-box — the API and
 * `wrangler d1 execute` on the local database — so it holds on the deployed artifact.
 */
export async function replicated(worker, ids, { binding = 'DB', timeoutMs = 30_000 } = {}) {
  ids = [].concat(ids);
  const want = {};
  for (const id of ids) {
    const session = await api(worker, 'GET', `/v1/sessions/${id}`);
    if (session.status !== 200) throw new Error(`session ${id}: ${JSON.stringify(session.body)}`);
    want[id] = session.body.version;
  }
  const list = ids.map((id) => `'${id.replaceAll("'", "''")}'`).join(',');
  const caughtUp = (rows) => ids.every((id) => (rows.find((r) => r.id === id)?.version ?? -1) >= want[id]);
  const rows = await eventually(() => d1Rows(worker, binding, `SELECT id, version FROM sessions WHERE id IN (${list})`),
    caughtUp, timeoutMs);
  if (!caughtUp(rows)) throw new Error(`not replicated to ${binding}: ${JSON.stringify(rows)} (want ${JSON.stringify(want)})`);
}

/**
 * A mock model's script for the reference agents, by role: a researcher finishes with a
 * summary of its topic; a coordinator delegates its input as a topic; the assistant adds
 * a note for an input starting with "note", else deletes the file its input names (an
 * approval); after a tool's result, "Done.".
 */
export function byRole(body) {
  const system = body?.messages?.[0]?.content ?? '';
  const last = body?.messages?.at(-1) ?? {};
  if (system.startsWith('You are a researcher')) {
    return { calls: [{ name: '__finish__', args: { summary: `summary of ${JSON.parse(last.content).topic}` } }] };
  }
  if (last.role === 'tool') return { text: 'Done.' };
  if (system.includes('coordinat')) return { calls: [{ name: 'research', args: { topic: String(last.content) } }] };
  if (String(last.content).startsWith('note')) return { calls: [{ name: 'add_note', args: { text: 'kept' } }] };
  return { calls: [{ name: 'delete_file', args: { path: String(last.content) } }] };
}

/** Polls GET /v1/sessions/{id} (with `token`) until `pred(session)` holds. */
export async function waitFor(worker, id, pred, timeoutMs = 15_000, token = API_TOKEN) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    last = await api(worker, 'GET', `/v1/sessions/${id}`, undefined, token);
    if (last.status === 200 && pred(last.body)) return last.body;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`session ${id} did not reach the expected state: ${JSON.stringify(last?.body)}`);
}

/** The session a stream is of: its first chunk's (relayed sub-agent chunks name theirs). */
const ownSession = (events) => events.find((e) => e.json?.sessionId)?.json.sessionId;

/**
 * `events` without those a `stream_resync` of the stream's own session disowned (from
 * its `fromSequence` to itself; a relayed sub-agent's resync counts in its own stream).
 */
export function withoutTorn(events) {
  const own = ownSession(events);
  const torn = new Set();
  for (const e of events) {
    if (e.type !== 'stream_resync' || e.json.sessionId !== own) continue;
    for (let seq = e.json.fromSequence; seq <= e.id; seq++) torn.add(seq);
  }
  return events.filter((e) => !torn.has(e.id));
}

/**
 * Applies every state_patch of the stream's own session in `events` (RFC 6902
 * add/remove/replace) that no `stream_resync` disowned to `initial`: the README's rule
 * for following the state.
 */
export function replayPatches(initial, events) {
  const state = structuredClone(initial);
  const unescape = (s) => s.replace(/~1/g, '/').replace(/~0/g, '~');
  const own = ownSession(events);
  for (const e of withoutTorn(events)) {
    if (e.type !== 'state_patch' || e.json.sessionId !== own) continue;
    for (const op of e.json.patches) {
      const parts = op.path.split('/').slice(1).map(unescape);
      const last = parts.pop();
      let target = state;
      for (const p of parts) target = target[p];
      if (Array.isArray(target)) {
        if (op.op === 'add') last === '-' ? target.push(op.value) : target.splice(Number(last), 0, op.value);
        else if (op.op === 'remove') target.splice(Number(last), 1);
        else target[Number(last)] = op.value;
      } else if (op.op === 'remove') delete target[last];
      else target[last] = op.value;
    }
  }
  return state;
}

/** Checks that the SSE ids seen are consecutive from `from`. */
export function gapFree(events, from = 1) {
  return events.every((e, i) => e.id === from + i);
}
