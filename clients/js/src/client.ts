// The entry point: one deployment, its agents, and its sessions.

import type { EventStream, EventStreamOptions } from './events.js';
import { SessionHandle } from './session.js';
import { Transport, type ClientOptions, type TokenSource } from './transport.js';
import type { Agent, Created, CreateSessionInput, InboxPage, SchedulePage, SessionList, SessionStatus, UsageReport } from './types.js';

type Signal = { signal?: AbortSignal };

export class HelixClient {
  readonly transport: Transport;

  constructor(options: ClientOptions) {
    this.transport = new Transport(options);
  }

  /** The agents the worker hosts, with their tools. */
  async agents({ signal }: Signal = {}): Promise<Agent[]> {
    return (await this.transport.json<{ agents: Agent[] }>('GET', '/v1/agents', { signal })).agents;
  }

  /**
   * Creates a session (its first run starts at once) and returns its handle, which
   * uses the session's own token when the server issued one.
   */
  async createSession(input: CreateSessionInput, { signal }: Signal = {}): Promise<SessionHandle & { created: Created }> {
    const created = await this.transport.json<Created>('POST', '/v1/sessions', { body: input, signal });
    const token = created.sessionToken ?? undefined;
    const transport = token && !(await this.transport.currentToken()) ? this.transport.withToken(token) : this.transport;
    return Object.assign(new SessionHandle(transport, created.sessionId, token), { created });
  }

  /**
   * Creates a session and follows its first run in the same request (one request fewer
   * than `createSession` and then `events`): the answer is the run's stream, resumed
   * with `Last-Event-ID` if the connection breaks.
   */
  async start(
    input: CreateSessionInput,
    options: EventStreamOptions = {},
  ): Promise<{ session: SessionHandle; created: Created; events: EventStream }> {
    const res = await this.transport.send('POST', '/v1/sessions', {
      body: input,
      headers: { accept: 'text/event-stream' },
      signal: options.signal,
    });
    const field = (name: string) => res.headers.get(`x-helix-${name}`) ?? undefined;
    const created = {
      sessionId: field('session-id') ?? input.sessionId ?? '',
      runId: field('run-id') ?? '',
      status: (field('status') ?? 'active') as SessionStatus,
      streamUrl: field('stream-url') ?? '',
      sessionToken: field('session-token') ?? null,
    } satisfies Created;
    const token = created.sessionToken ?? undefined;
    const transport = token && !(await this.transport.currentToken()) ? this.transport.withToken(token) : this.transport;
    const session = new SessionHandle(transport, created.sessionId, token);
    const events = session.events({ ...options, after: Number(field('after') ?? 0) }, res);
    return { session, created, events };
  }

  /** A handle on an existing session (`token`: a session token to use instead of the client's). */
  session(id: string, { token }: { token?: TokenSource } = {}): SessionHandle {
    const transport = token ? this.transport.withToken(token) : this.transport;
    return new SessionHandle(transport, id, typeof token === 'string' ? token : undefined);
  }

  /**
   * Sessions from D1, newest first (the API token lists all, a user what they reach);
   * follow `nextCursor` for more. Over a record on several databases, one that cannot be
   * read fails the list (`storage_unavailable`) unless `partial: true`, which lists the
   * others and names it in `missingShards` (as for `inbox`, `usage` and `schedules`).
   */
  sessions(
    query: { agent?: string; status?: SessionStatus; updatedSince?: number; owner?: string; cursor?: string; limit?: number; partial?: boolean } & Signal = {},
  ): Promise<SessionList> {
    const { signal, ...q } = query;
    return this.transport.json('GET', '/v1/sessions', { query: q, signal });
  }

  /**
   * Every session's schedules from D1, soonest fire first (API token only; the
   * `schedules` feature): `dueBefore` an RFC 3339 time or `'now'`; follow `nextCursor`.
   */
  schedules(
    query: { dueBefore?: string; agent?: string; cursor?: string; limit?: number; partial?: boolean } & Signal = {},
  ): Promise<SchedulePage> {
    const { signal, ...q } = query;
    return this.transport.json('GET', '/v1/schedules', { query: q, signal });
  }

  /**
   * The calls waiting on a person across sessions from D1, newest first (API token
   * only; the `inbox` feature): approvals and client tools, each answered with its
   * session's `submitToolResult`; follow `nextCursor`.
   */
  inbox(
    query: { agent?: string; tool?: string; kind?: 'approval' | 'client'; cursor?: string; limit?: number; partial?: boolean } & Signal = {},
  ): Promise<InboxPage> {
    const { signal, ...q } = query;
    return this.transport.json('GET', '/v1/inbox', { query: q, signal });
  }

  /**
   * The tokens of the runs that started in a window (`from`/`to`, ms), summed per agent,
   * UTC day, session or model, with a total, from D1 (the `usage` feature; a user's
   * token sees the sessions it reaches).
   */
  usage(
    query: { agent?: string; from?: number; to?: number; groupBy?: 'agent' | 'day' | 'session' | 'model'; partial?: boolean } & Signal = {},
  ): Promise<UsageReport> {
    const { signal, ...q } = query;
    return this.transport.json('GET', '/v1/usage', { query: q, signal });
  }
}
