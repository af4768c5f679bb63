// One session: every route under `/v1/sessions/{id}`, its event stream and its mirror.

import { EventStream, type EventStreamOptions } from './events.js';
import { StateMirror } from './mirror.js';
import type { Transport } from './transport.js';
import type { Attachment, Checkpoint, CheckpointAt, Created, HistoryMessage, MessagePage, NotificationList, PlanCall, PlanReport, ProviderOptions, QueuedMessage, Run, RunSpans, Schedule, ScheduleRequest, Session, ToolAnswer, WhenBusy, SessionEvent, UserMessages } from './types.js';

type Signal = { signal?: AbortSignal };

/** What the user says at a retried or forked checkpoint: one message (with its metadata and attachments) or several. */
type BranchInput = {
  message?: string;
  metadata?: Record<string, unknown>;
  attachments?: Attachment[];
  messages?: UserMessages;
};

export class SessionHandle {
  private readonly path: string;
  private mirrors = new Set<StateMirror<unknown>>();

  constructor(
    private readonly transport: Transport,
    /** The session id. */
    readonly id: string,
    /** The session token, when this client created the session (scoped to it alone). */
    readonly token?: string,
  ) {
    this.path = `/v1/sessions/${encodeURIComponent(id)}`;
  }

  /** The session: status, state, pending calls, output or error. */
  get({ signal }: Signal = {}): Promise<Session> {
    return this.transport.json('GET', this.path, { signal });
  }

  /** One page of the transcript. */
  messagePage(offset = 0, limit = 50, { signal }: Signal = {}): Promise<MessagePage> {
    return this.transport.json('GET', `${this.path}/messages`, { query: { offset, limit }, signal });
  }

  /** The transcript, page by page (`for await (const page of session.messagePages())`). */
  async *messagePages({ limit = 100, signal }: Signal & { limit?: number } = {}): AsyncGenerator<MessagePage> {
    for (let offset = 0; ; ) {
      const page = await this.messagePage(offset, limit, { signal });
      yield page;
      if (!page.hasMore || page.messages.length === 0) return;
      offset += page.messages.length;
    }
  }

  /** The whole transcript, message by message. */
  async *messages(options: Signal & { limit?: number } = {}): AsyncGenerator<HistoryMessage> {
    for await (const page of this.messagePages(options)) yield* page.messages;
  }

  async runs({ signal }: Signal = {}): Promise<Run[]> {
    return (await this.transport.json<{ runs: Run[] }>('GET', `${this.path}/runs`, { signal })).runs;
  }

  /** A run's OpenTelemetry spans as the session keeps them, and how its export stands (the `otel` feature). */
  async spans(runId: string, { signal }: Signal = {}): Promise<RunSpans> {
    return this.transport.json('GET', `${this.path}/runs/${encodeURIComponent(runId)}/spans`, { signal });
  }

  async checkpoints({ signal }: Signal = {}): Promise<Checkpoint[]> {
    const body = await this.transport.json<{ checkpoints: Checkpoint[] }>('GET', `${this.path}/checkpoints`, { signal });
    return body.checkpoints;
  }

  /** The session as it was at checkpoint `id`: its state and a page of the transcript up to it. */
  checkpoint(id: string, offset = 0, limit = 50, { signal }: Signal = {}): Promise<CheckpointAt> {
    const path = `${this.path}/checkpoints/${encodeURIComponent(id)}`;
    return this.transport.json('GET', path, { query: { offset, limit }, signal });
  }

  /** Checks a plan (the calls a model would make in one step) against this session's agent and state, running nothing: every problem, and the rounds a valid plan would run in. */
  validatePlan(calls: PlanCall[], { signal }: Signal = {}): Promise<PlanReport> {
    return this.transport.json('POST', `${this.path}/plans/validate`, { body: { calls }, signal });
  }

  /** A run the session starts on its own, later (helix-edge's `schedules` feature): 201 with its first fire. */
  schedule(request: ScheduleRequest, { signal }: Signal = {}): Promise<Schedule> {
    return this.transport.json('POST', `${this.path}/schedules`, { body: request, signal });
  }

  /** The session's schedules, soonest first, and the messages waiting in its queue. */
  schedules({ signal }: Signal = {}): Promise<{ schedules: Schedule[]; queue: QueuedMessage[] }> {
    return this.transport.json('GET', `${this.path}/schedules`, { signal });
  }

  /**
   * The notifications the session's waiting calls sent to the deployment's sinks, newest
   * first, with how each delivery stands (helix-edge's `notify` feature; 503
   * `notifications_not_configured` without NOTIFY_WEBHOOK_URL).
   */
  notifications({ signal }: Signal = {}): Promise<NotificationList> {
    return this.transport.json('GET', `${this.path}/notifications`, { signal });
  }

  /** Removes a schedule (404 `schedule_not_found` when there is none). */
  async unschedule(scheduleId: string, { signal }: Signal = {}): Promise<void> {
    await this.transport.json('DELETE', `${this.path}/schedules/${encodeURIComponent(scheduleId)}`, { signal });
  }

  /** A follow-up message: a new run, with its model options if given. While a run is busy it follows `whenBusy` (helix-edge's `schedules` feature): `reject` (409 `session_busy`, the default), `enqueue`, `interrupt` or `merge` (202 with `queued`, `queueId`, `position`). */
  send(
    message: string,
    { signal, providerOptions, whenBusy }: Signal & { providerOptions?: ProviderOptions; whenBusy?: WhenBusy } = {},
  ): Promise<{ runId: string; queued?: boolean; queueId?: string; position?: number }> {
    const body = { message, ...(providerOptions ? { providerOptions } : {}), ...(whenBusy ? { whenBusy } : {}) };
    return this.started(this.transport.json('POST', `${this.path}/messages`, { body, signal }));
  }

  /** Asks the run to stop at its next step boundary (status `interrupted`). */
  interrupt(reason?: string, { signal }: Signal = {}): Promise<void> {
    return this.transport.json('POST', `${this.path}/interrupt`, { body: reason ? { reason } : {}, signal });
  }

  /** Continues an interrupted (or stale) session. */
  resume({ signal }: Signal = {}): Promise<{ runId: string }> {
    return this.started(this.transport.json('POST', `${this.path}/resume`, { signal }));
  }

  /** Stops the session for good (status `aborted`). */
  abort(reason?: string, { signal }: Signal = {}): Promise<void> {
    return this.transport.json('POST', `${this.path}/abort`, { body: reason ? { reason } : {}, signal });
  }

  /** Restores a checkpoint (default: the latest) and runs again, answering what the user says there if anything. */
  retry(checkpointId?: string, { signal, ...input }: Signal & BranchInput = {}): Promise<{ runId: string }> {
    const body = checkpointId ? { checkpointId, ...input } : input;
    return this.started(this.transport.json('POST', `${this.path}/retry`, { body, signal }));
  }

  /** A new session from a checkpoint of this one (default: the latest). */
  fork(options: { checkpointId?: string; sessionId?: string } & BranchInput & Signal = {}): Promise<Created> {
    const { signal, ...body } = options;
    return this.transport.json('POST', `${this.path}/fork`, { body, signal });
  }

  /** Removes the session and everything it stored. */
  delete({ signal }: Signal = {}): Promise<void> {
    return this.transport.json('DELETE', this.path, { signal });
  }

  /** Approves a pending call. */
  approve(toolCallId: string, reason?: string, options: Signal = {}): Promise<void> {
    return this.answer({ kind: 'approval-response', toolCallId, approved: true, ...(reason ? { reason } : {}) }, options);
  }

  /** Denies a pending call; the model sees the reason. */
  deny(toolCallId: string, reason?: string, options: Signal = {}): Promise<void> {
    return this.answer({ kind: 'approval-response', toolCallId, approved: false, ...(reason ? { reason } : {}) }, options);
  }

  /** Answers a client tool with its result. */
  submitResult(toolCallId: string, result: unknown, options: Signal = {}): Promise<void> {
    return this.answer({ kind: 'client-tool-result', toolCallId, result }, options);
  }

  /** Answers a client tool with an error the model sees. */
  submitError(toolCallId: string, error: string, options: Signal = {}): Promise<void> {
    return this.answer({ kind: 'client-tool-result', toolCallId, error }, options);
  }

  /**
   * Answers an MCP server's elicitation (a pending `elicitation` call): `accept` with
   * `content` matching its `requestedSchema`, or `decline` / `cancel` without.
   */
  answerElicitation(
    toolCallId: string,
    answer: { action: 'accept'; content: Record<string, unknown> } | { action: 'decline' | 'cancel' },
    options: Signal = {},
  ): Promise<void> {
    return this.answer({ kind: 'elicitation-response', toolCallId, ...answer }, options);
  }

  /**
   * Gives up a pending `authorization` call (the user will not connect); the call fails.
   * To connect, the user opens its `authorizeUrl` (see {@link authorizeLink}) instead:
   * the worker's callback answers it.
   */
  declineAuthorization(toolCallId: string, options: Signal = {}): Promise<void> {
    return this.answer({ kind: 'authorization-response', toolCallId, action: 'decline' }, options);
  }

  /**
   * The session's events (see [`EventStream`]): `for await (const e of session.events())`.
   * `opening`: an answer that is already the stream (see `sendStreaming`).
   */
  events(options: EventStreamOptions = {}, opening?: Response): EventStream {
    return new EventStream(this.transport, this.id, options, opening);
  }

  /**
   * A follow-up message whose answer is its run's stream (one request fewer than `send`
   * and then `events`); `runId` is the run it starts (or will start, when queued). The
   * stream is the caller's: this handle's mirrors are not woken (hand it to one with
   * `mirror.follow(events)`).
   */
  async sendStreaming(
    message: string,
    options: EventStreamOptions & { providerOptions?: ProviderOptions; whenBusy?: WhenBusy } = {},
  ): Promise<{ runId: string; queued: boolean; events: EventStream }> {
    const { providerOptions, whenBusy, ...follow } = options;
    const body = { message, ...(providerOptions ? { providerOptions } : {}), ...(whenBusy ? { whenBusy } : {}) };
    const res = await this.streamed(`${this.path}/messages`, body, follow);
    const runId = res.headers.get('x-helix-run-id') ?? '';
    return { runId, queued: res.headers.get('x-helix-queued') === 'true', events: this.opened(res, follow) };
  }

  /**
   * Answers a pending call (an approval, a client tool's result, an elicitation…) and
   * follows the run it continues in the same request (mirrors as for `sendStreaming`).
   */
  async answerStreaming(answer: ToolAnswer, options: EventStreamOptions = {}): Promise<EventStream> {
    return this.opened(await this.streamed(`${this.path}/tool-results`, answer, options), options);
  }

  private streamed(path: string, body: object, { signal }: Signal): Promise<Response> {
    return this.transport.send('POST', path, { body, headers: { accept: 'text/event-stream' }, signal });
  }

  private opened(res: Response, options: EventStreamOptions): EventStream {
    return this.events({ ...options, after: Number(res.headers.get('x-helix-after') ?? 0) }, res);
  }

  /** The callback form of [`events`]; returns a function that stops it. */
  subscribe(
    onEvent: (event: SessionEvent) => void,
    options: EventStreamOptions & { onError?: (error: unknown) => void; onEnd?: () => void } = {},
  ): () => void {
    const stream = this.events(options);
    (async () => {
      for await (const event of stream) onEvent(event);
      options.onEnd?.();
    })().catch((e: unknown) => (options.onError ?? console.error)(e));
    return () => stream.close();
  }

  /**
   * A live mirror of the session (state, pending calls, status), started; `opening`: a
   * stream a request already answered with (`client.start`), followed after the snapshot.
   */
  async mirror<S = Record<string, unknown>>(
    options: Omit<EventStreamOptions, 'after' | 'signal'> = {},
    opening?: EventStream,
  ): Promise<StateMirror<S>> {
    const mirror = new StateMirror<S>(this, options);
    this.mirrors.add(mirror as StateMirror<unknown>);
    return mirror.start(opening);
  }

  /**
   * The link that starts a pending `authorization` call's sign-in in a browser tab: its
   * `authorizeUrl` with this client's credential as `token` (a tab cannot send a
   * header). Open it in the browser that will sign in: the callback finishes the
   * authorization only in the browser that started it.
   */
  async authorizeLink(authorizeUrl: string): Promise<string> {
    const token = this.token ?? (await this.transport.currentToken());
    if (!token) return authorizeUrl;
    const url = new URL(authorizeUrl);
    url.searchParams.set('token', token);
    return url.toString();
  }

  /** The stream's URL for `EventSource` users (the session token in `?token=`). */
  streamUrl(after?: number): string {
    return this.transport.url(`${this.path}/stream`, { token: this.token, after });
  }

  private async answer(body: object, { signal }: Signal): Promise<void> {
    await this.transport.json('POST', `${this.path}/tool-results`, { body, signal });
    this.wake();
  }

  private async started<T>(request: Promise<T>): Promise<T> {
    const answer = await request;
    this.wake();
    return answer;
  }

  /** A run goes on: mirrors whose stream had ended follow again. */
  private wake(): void {
    for (const mirror of this.mirrors) {
      if (mirror.closed) this.mirrors.delete(mirror);
      else mirror.follow();
    }
  }
}
