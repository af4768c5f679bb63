// A small SSE client over fetch, for the end-to-end suite: parses `id`/`event`/`data`
// frames and comments, and waits for events. A POST with `body` (JSON) asks for the
// answer as a stream (`Accept: text/event-stream`).

export async function openStream(url, { lastEventId, headers = {}, method = 'GET', body } = {}) {
  const controller = new AbortController();
  const h = { ...headers };
  if (lastEventId !== undefined) h['last-event-id'] = String(lastEventId);
  if (body !== undefined) Object.assign(h, { accept: 'text/event-stream', 'content-type': 'application/json' });
  const res = await fetch(url, {
    method, headers: h, signal: controller.signal, body: body === undefined ? undefined : JSON.stringify(body),
  });
  const stream = {
    status: res.status,
    contentType: res.headers.get('content-type'),
    headers: res.headers,
    events: [],
    comments: 0,
    ended: false,
    waiters: new Set(),
    close() { controller.abort(); },
    /** Resolves with all events once `pred(event, events)` holds for one (or rejects after timeoutMs). */
    until(pred, timeoutMs = 15_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (stream.events.some((e) => pred(e, stream.events))) {
            cleanup();
            resolve(stream.events);
            return true;
          }
          if (stream.ended) {
            cleanup();
            reject(new Error(`stream ended first; got ${stream.events.map((e) => e.type ?? e.event).join(',')}`));
            return true;
          }
          return false;
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(new Error(`timed out; got ${stream.events.map((e) => e.type ?? e.event).join(',')}`));
        }, timeoutMs);
        const cleanup = () => { clearTimeout(timer); stream.waiters.delete(check); };
        if (!check()) stream.waiters.add(check);
      });
    },
    /** Resolves when the server closes the stream. */
    closed: null,
  };
  if (!res.ok) {
    stream.body = await res.text();
    stream.ended = true;
    stream.closed = Promise.resolve();
    return stream;
  }
  const notify = () => { for (const w of [...stream.waiters]) w(); };
  stream.closed = (async () => {
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const part of res.body) {
        buffer += decoder.decode(part, { stream: true });
        let end;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const frame = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const event = { event: 'message', data: '' };
          let isComment = true;
          for (const line of frame.split('\n')) {
            if (line.startsWith(':')) continue;
            isComment = false;
            const i = line.indexOf(':');
            const [k, v] = i < 0 ? [line, ''] : [line.slice(0, i), line.slice(i + 1).replace(/^ /, '')];
            if (k === 'id') event.id = Number(v);
            else if (k === 'event') event.event = v;
            else if (k === 'data') event.data += v;
          }
          if (isComment) { stream.comments++; continue; }
          event.json = JSON.parse(event.data);
          event.type = event.event === 'chunk' ? event.json.type : event.event;
          stream.events.push(event);
          notify();
        }
      }
    } catch (e) {
      if (e.name !== 'AbortError') stream.error = e;
    }
    stream.ended = true;
    notify();
  })();
  return stream;
}
