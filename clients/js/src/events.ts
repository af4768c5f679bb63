// A session's stream as an async iterable of typed events that survives the network:
// it reconnects with `Last-Event-ID` after any break (exponential backoff with full
// jitter), treats a silent connection as broken (the server sends `: ping` at least
// every 15 s), and drops any event it has already delivered, so a consumer sees every
// event exactly once, in order.

import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { HttpError, ProtocolError } from './errors.js';
import type { Transport } from './transport.js';
import { CHUNK_TYPES, type SessionEvent } from './types.js';

export type ConnectionStatus = 'connecting' | 'open' | 'reconnecting' | 'closed';

/** What the connection is doing, for a "reconnecting…" indicator. */
export interface ConnectionState {
  status: ConnectionStatus;
  /** Consecutive failed attempts so far (0 once events flow again). */
  attempt: number;
  /** While `reconnecting`: the wait before the next attempt. */
  delayMs?: number;
  /** What broke the last connection, if something did. */
  error?: unknown;
}

export interface EventStreamOptions {
  /** Deliver the events after this sequence (default 0: the whole retained stream). */
  after?: number;
  signal?: AbortSignal;
  /** A connection silent this long is broken (default 45 s: three missed pings). */
  idleTimeoutMs?: number;
  /** First backoff delay (default 250 ms), doubled per failed attempt up to `maxDelayMs`. */
  initialDelayMs?: number;
  /** Longest backoff delay (default 10 s). */
  maxDelayMs?: number;
  /** Consecutive failed attempts before giving up with the last error (default: never). */
  maxRetries?: number;
  /** Called whenever the connection's state changes. */
  onConnection?: (state: ConnectionState) => void;
}

const TERMINAL = new Set(['completed', 'failed', 'aborted']);
const KNOWN_CHUNKS = new Set<string>(CHUNK_TYPES);

/**
 * The events of one session's stream. Iterate it once; it ends after the run's `end` or
 * `fail` (the server closes the stream there), when the session has already ended, or
 * when `signal` aborts or [`close`](#close) is called.
 */
export class EventStream implements AsyncIterable<SessionEvent> {
  /** The sequence of the newest event delivered (resume a later stream after it). */
  lastSequence: number;
  private readonly controller = new AbortController();

  /**
   * `opening`: an answer that already is this stream's first connection (a create, a
   * follow-up or an answer sent with `Accept: text/event-stream`); later connections
   * resume from it with `Last-Event-ID`.
   */
  constructor(
    private readonly transport: Transport,
    private readonly sessionId: string,
    private readonly options: EventStreamOptions = {},
    private opening?: Response,
  ) {
    this.lastSequence = options.after ?? 0;
    options.signal?.addEventListener('abort', () => this.close(), { once: true });
    if (options.signal?.aborted) this.close();
  }

  /** Stops the stream: the iteration ends, the connection is closed. */
  close(): void {
    this.controller.abort();
    this.opening?.body?.cancel().catch(() => {});
    this.opening = undefined;
  }

  async *[Symbol.asyncIterator](): AsyncIterator<SessionEvent> {
    const { maxRetries = Infinity, onConnection } = this.options;
    let attempt = 0;
    let lastType: string | undefined;
    let error: unknown;
    onConnection?.({ status: 'connecting', attempt });
    try {
      while (!this.controller.signal.aborted) {
        let delivered = 0;
        let clean = false;
        try {
          for await (const event of this.connect(() => onConnection?.({ status: 'open', attempt }))) {
            // Redelivered after a reconnect: already seen. A `truncated` notice always
            // passes (it may restart the numbering after a lost stream).
            if (event.type !== 'truncated' && event.seq <= this.lastSequence) continue;
            this.lastSequence = event.seq;
            lastType = event.type;
            delivered++;
            attempt = 0;
            yield event;
          }
          clean = true;
        } catch (e) {
          if (this.controller.signal.aborted) return;
          if (e instanceof ProtocolError || (e instanceof HttpError && !e.retryable)) throw e;
          error = e;
        }
        // The server closes the stream after a run's end: the iteration is complete.
        if (clean && (lastType === 'end' || lastType === 'fail')) return;
        // Closed with nothing new: the session may have ended before we came.
        if (clean && delivered === 0 && (await this.sessionEnded())) return;
        if (delivered === 0) attempt++;
        if (attempt > maxRetries) throw error ?? new ProtocolError('the stream keeps closing with no events');
        const delayMs = this.backoff(attempt);
        onConnection?.({ status: 'reconnecting', attempt, delayMs, error });
        await sleep(delayMs, this.controller.signal);
      }
    } finally {
      this.controller.abort();
      onConnection?.({ status: 'closed', attempt });
    }
  }

  /** One connection's events, from after `lastSequence`, until it closes or goes idle. */
  private async *connect(opened: () => void): AsyncGenerator<SessionEvent> {
    const { idleTimeoutMs = 45_000 } = this.options;
    const connection = new AbortController();
    const abort = () => connection.abort();
    this.controller.signal.addEventListener('abort', abort, { once: true });
    try {
      const opening = this.opening;
      this.opening = undefined;
      const res =
        opening ??
        (await this.transport.send('GET', `/v1/sessions/${encodeURIComponent(this.sessionId)}/stream`, {
          headers: { accept: 'text/event-stream', 'last-event-id': String(this.lastSequence) },
          signal: connection.signal,
        }));
      if (!res.headers.get('content-type')?.startsWith('text/event-stream') || !res.body) {
        throw new ProtocolError(`the stream answered ${res.headers.get('content-type') ?? 'no content type'}`);
      }
      opened();
      const events: SessionEvent[] = [];
      let broken: ProtocolError | undefined;
      const parser = createParser({
        onEvent: (message) => {
          try {
            events.push(decode(message));
          } catch (e) {
            broken ??= e as ProtocolError;
          }
        },
      });
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      // A request's answer (the opening) was not made with this connection's signal:
      // closing the stream cancels its body here.
      const cancel = () => void reader.cancel().catch(() => {});
      connection.signal.addEventListener('abort', cancel, { once: true });
      try {
        for (;;) {
          const { value, done } = await readWithin(reader, idleTimeoutMs);
          if (done) return;
          parser.feed(value);
          if (broken) throw broken;
          while (events.length > 0) yield events.shift() as SessionEvent;
        }
      } finally {
        reader.cancel().catch(() => {});
      }
    } finally {
      this.controller.signal.removeEventListener('abort', abort);
      connection.abort();
    }
  }

  private async sessionEnded(): Promise<boolean> {
    const session = await this.transport
      .json<{ status: string }>('GET', `/v1/sessions/${encodeURIComponent(this.sessionId)}`, {
        signal: this.controller.signal,
      })
      .catch((e: unknown) => {
        if (e instanceof HttpError && e.status === 404) throw e;
        return undefined;
      });
    return session !== undefined && TERMINAL.has(session.status);
  }

  private backoff(attempt: number): number {
    const { initialDelayMs = 250, maxDelayMs = 10_000 } = this.options;
    const ceiling = Math.min(maxDelayMs, initialDelayMs * 2 ** Math.max(0, attempt - 1));
    return Math.round(ceiling / 2 + (Math.random() * ceiling) / 2);
  }
}

/** One SSE message as a typed event. */
export function decode(message: EventSourceMessage): SessionEvent {
  const seq = Number(message.id);
  if (!Number.isSafeInteger(seq) || seq < 0) throw new ProtocolError(`bad event id ${JSON.stringify(message.id)}`);
  let data: unknown;
  try {
    data = JSON.parse(message.data);
  } catch {
    throw new ProtocolError(`event ${seq}: data is not JSON`);
  }
  if (typeof data !== 'object' || data === null || Array.isArray(data)) {
    throw new ProtocolError(`event ${seq}: data is not a JSON object`);
  }
  const event = message.event ?? 'message';
  const fields = data as Record<string, unknown>;
  switch (event) {
    case 'chunk':
      if (typeof fields.type === 'string' && KNOWN_CHUNKS.has(fields.type)) {
        return { ...fields, seq } as SessionEvent;
      }
      return { type: 'unknown', seq, event, data };
    case 'end':
    case 'fail':
    case 'truncated':
      return { ...fields, type: event, seq } as SessionEvent;
    default:
      return { type: 'unknown', seq, event, data };
  }
}

/** The reader's next chunk, or an error if nothing (not even a ping) arrives in time. */
async function readWithin(reader: ReadableStreamDefaultReader<string>, ms: number) {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const idle = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no data for ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([reader.read(), idle]);
  } finally {
    clearTimeout(timer);
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
  });
}
