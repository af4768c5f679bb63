// A live copy of a session: its snapshot from `GET`, then every event of its stream
// after the snapshot's `streamSequence` (the newest committed one), applied in order —
// state patches (RFC 6902: a running tool's live writes, then what its step's commit
// corrects), pending calls, status, the queue as the snapshot had it (a queued run
// leaves it as it starts; `message_queued` and `message_merged` are passed on, and
// `session.schedules()` lists what they queued). Whenever it cannot be sure it still
// matches the server (a `stream_resync` — which disowns a torn step's live patches —, a
// `truncated` notice, a gap in the sequence, a patch that does not apply) it refetches
// the snapshot instead of drifting.

import { applyPatch, type Operation } from 'rfc6902';
import type { EventStream, EventStreamOptions } from './events.js';
import type { PendingCall, Session, SessionEvent, SessionStatus } from './types.js';

/** What the mirror needs of a session handle. */
export interface MirrorSource {
  readonly id: string;
  get(options?: { signal?: AbortSignal }): Promise<Session>;
  events(options?: EventStreamOptions): EventStream;
}

export type MirrorListener = (mirror: StateMirror, event?: SessionEvent) => void;

export class StateMirror<S = Record<string, unknown>> {
  /** The latest snapshot, with state, status and pending calls kept current. */
  session!: Session;
  /** Resynchronisations so far (refetches after a gap, resync or truncation). */
  resyncs = 0;
  /** Why following stopped, if it failed (a 401 or 404, say); listeners are told. */
  error: unknown = undefined;
  private listeners = new Set<MirrorListener>();
  private stream: EventStream | undefined;
  private following: Promise<void> | undefined;
  /** Whether `follow` was called while a stream was being followed. */
  private again = false;
  #closed = false;

  constructor(
    private readonly source: MirrorSource,
    private readonly options: Omit<EventStreamOptions, 'after' | 'signal'> = {},
  ) {}

  /** The session's state. */
  get state(): S {
    return this.session.state as S;
  }

  /** The calls waiting for an approval or a client result (children's included). */
  get pendingToolCalls(): PendingCall[] {
    return this.session.pendingToolCalls;
  }

  get status(): SessionStatus {
    return this.session.status;
  }

  /** The sequence of the newest event the mirror reflects. */
  get sequence(): number {
    return this.session.streamSequence;
  }

  /**
   * Fetches the snapshot and follows the stream (`opening`, if a request already answered
   * with it); resolves once the snapshot is in.
   */
  async start(opening?: EventStream): Promise<this> {
    try {
      this.session = await this.source.get();
    } catch (e) {
      opening?.close();
      throw e;
    }
    this.emit();
    this.follow(opening);
    return this;
  }

  /** Calls `listener` after every change (with the event that made it, if any). */
  subscribe(listener: MirrorListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Follows the stream again if it had ended (after a run's end: call it when a new run
   * starts — the session handle does so for its own sends). `opening`: a stream a
   * request already answered with (`sendStreaming`, `answerStreaming`), followed instead
   * of opening one (when the mirror is already following, the one it has carries the
   * same events, and `opening` is closed).
   */
  follow(opening?: EventStream): void {
    if (this.#closed) {
      opening?.close();
      return;
    }
    if (this.following) {
      // The stream being followed may be about to end with the run that just ended
      // (a resume sent while its `end` is on the way): follow again once it has.
      opening?.close();
      this.again = true;
      return;
    }
    this.error = undefined;
    this.following = this.run(opening)
      .catch((e: unknown) => {
        this.error = e;
        this.emit();
      })
      .finally(() => {
        this.following = undefined;
        if (this.again) {
          this.again = false;
          this.follow();
        }
      });
  }

  /** Resolves when the stream being followed ends (a run's end) and none follows it. */
  async settled(): Promise<void> {
    while (this.following) await this.following;
  }

  /** Whether [`close`](#close) was called. */
  get closed(): boolean {
    return this.#closed;
  }

  close(): void {
    this.#closed = true;
    this.stream?.close();
  }

  private async run(opening?: EventStream): Promise<void> {
    while (!this.#closed) {
      this.stream = opening ?? this.source.events({ ...this.options, after: this.sequence });
      // What the snapshot already has is passed over; a gap (it started later) refetches.
      this.stream.lastSequence = Math.max(this.stream.lastSequence, this.sequence);
      opening = undefined;
      let stale = false;
      for await (const event of this.stream) {
        if (!this.apply(event)) {
          stale = true;
          break;
        }
        this.emit(event);
      }
      if (!stale || this.#closed) return;
      this.resyncs++;
      this.session = await this.source.get();
      this.emit();
    }
  }

  /** Applies one event; false when the mirror must refetch instead. */
  private apply(event: SessionEvent): boolean {
    const s = this.session;
    if (event.type === 'truncated' || event.seq !== s.streamSequence + 1) return false;
    s.streamSequence = event.seq;
    const own = 'sessionId' in event && event.sessionId === s.sessionId;
    switch (event.type) {
      case 'state_patch':
        // Children's patches are relayed too; they change the child's state, not ours.
        if (!own) return true;
        {
          // Applied to a copy, so that a patch that fails halfway changes nothing.
          const next = structuredClone(s.state);
          if (applyPatch(next, event.patches as Operation[]).some((error) => error !== null)) return false;
          s.state = next;
        }
        return true;
      case 'stream_resync':
        return false;
      case 'tool_approval_request':
        s.pendingToolCalls = [
          ...s.pendingToolCalls.filter((p) => p.toolCallId !== event.toolCallId),
          { toolCallId: event.toolCallId, toolName: event.toolName, arguments: event.arguments, kind: 'approval' },
        ];
        return true;
      case 'tool_start':
        if (event.executor === 'client') {
          const call: PendingCall = {
            toolCallId: event.toolCallId,
            toolName: event.toolName,
            arguments: event.arguments,
            kind: 'client',
          };
          if (event.deadline !== undefined) call.deadline = event.deadline;
          s.pendingToolCalls = [...s.pendingToolCalls.filter((p) => p.toolCallId !== event.toolCallId), call];
        }
        return true;
      case 'tool_end':
        s.pendingToolCalls = s.pendingToolCalls.filter((p) => p.toolCallId !== event.toolCallId);
        return true;
      case 'run_started':
        // A queued message's run leaves the queue as it starts.
        if (own && s.queue) {
          s.queue = s.queue.filter((q) => q.runId !== event.runId);
          if (s.queue.length === 0) delete s.queue;
        }
        if (own) s.status = 'active';
        return true;
      case 'run_resumed':
        if (own) s.status = 'active';
        return true;
      case 'message_queued':
      case 'message_merged':
        // The chunk names the entry, not its message: `session.schedules()` lists it.
        return true;
      case 'run_interrupted':
        if (own) s.status = 'interrupted';
        return true;
      case 'run_finished':
        if (own && event.status !== 'running') s.status = event.status;
        if (own) s.pendingToolCalls = [];
        return true;
      case 'output':
        if (own) s.output = event.output;
        return true;
      case 'fail':
        s.error = event.error;
        return true;
      default:
        return true;
    }
  }

  private emit(event?: SessionEvent): void {
    for (const listener of this.listeners) listener(this as StateMirror, event);
  }
}
