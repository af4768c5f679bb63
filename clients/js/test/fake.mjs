// A scripted `fetch` for the unit tests: each call is answered by the next handler,
// and every request is recorded.

export function frame(seq, event, data) {
  return `id: ${seq}\nevent: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

export function chunk(seq, type, fields = {}, sessionId = 's1') {
  return frame(seq, 'chunk', { type, sessionId, agentType: 'a', runId: 'r1', timestamp: seq, ...fields });
}

/** A `text/event-stream` response writing `parts`, then closing (or erroring, or hanging). */
export function sse(parts, { then = 'close', headers = {} } = {}) {
  const enc = new TextEncoder();
  const body = new ReadableStream({
    async start(c) {
      for (const p of parts) {
        c.enqueue(enc.encode(p));
        await new Promise((r) => setTimeout(r, 1));
      }
      if (then === 'close') c.close();
      if (then === 'error') c.error(new TypeError('network error'));
      // 'hang': never closes
    },
  });
  return new Response(body, { headers: { 'content-type': 'text/event-stream', ...headers } });
}

export function json(status, body) {
  return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
}

export function scripted(handlers) {
  const requests = [];
  const queue = [...handlers];
  const fetch = async (url, init = {}) => {
    const headers = Object.fromEntries(Object.entries(init.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v]));
    const req = { url: String(url), method: init.method ?? 'GET', headers, body: init.body };
    requests.push(req);
    const next = queue.shift();
    if (!next) throw new Error(`unexpected request ${req.method} ${req.url}`);
    return next(req);
  };
  return { fetch, requests, remaining: () => queue.length };
}
