// The API's shapes, derived from `api/openapi.json` (src/openapi.ts is generated from
// it by `npm run types`; a test fails when the two differ), and the events a session's
// stream yields.

import type { components } from './openapi.js';

type Schemas = components['schemas'];

export type Agent = Schemas['AgentList']['agents'][number];
export type CreateSession = Schemas['CreateSession'];
export type Created = Schemas['Created'];
export type Session = Schemas['Session'];
export type SessionStatus = Schemas['Status'];
export type SessionList = Schemas['SessionList'];
export type SessionSummary = Schemas['SessionSummary'];
export type PendingCall = Schemas['PendingCall'];
export type HistoryMessage = MessagePage["messages"][number];
export type MessagePage = Schemas['MessagePage'];
export type Run = Schemas['RunList']['runs'][number];
export type Checkpoint = Schemas['CheckpointList']['checkpoints'][number];
/** The session as it was at a checkpoint: the checkpoint, its state, a page of the transcript up to it. */
export type CheckpointAt = Schemas['CheckpointAt'];
/** A call of a plan, as `validatePlan` takes it: the tool, its arguments (meta-arguments and state references included) and an id to name it in the report. */
export type PlanCall = Schemas['ValidatePlan']['calls'][number];
/** What is wrong with a plan, and the rounds a valid one would run in. */
export type PlanReport = Schemas['PlanReport'];
/** A schedule, as `POST …/schedules` takes it: one of `at`, `every`, `cron` (+ `timezone`), the message, and `until`, `count`, `whenBusy`. */
export type ScheduleRequest = Schemas['ScheduleRequest'];
/** A schedule as the session keeps it: when it fires next, how often it fired or was skipped. */
export type Schedule = Schemas['Schedule'];
/** A page of every session's schedules (`client.schedules()`). */
export type SchedulePage = Schemas['SchedulePage'];
/** A page of the calls waiting on a person across sessions (`client.inbox()`). */
export type InboxPage = Schemas['InboxPage'];
/** A call waiting on a person: its session and agent, the call, since when it waits. */
export type InboxItem = Schemas['InboxItem'];
/** A run's spans (`session.spans(runId)`) and how the session's export stands. */
export type RunSpans = Schemas['RunSpans'];
/** One OpenTelemetry span as helix-edge keeps and exports it. */
export type Span = Schemas['Span'];
/** Token usage summed per agent, day, session or model (`client.usage()`). */
export type UsageReport = Schemas['UsageReport'];
/** The runs and tokens of one group of a usage report. */
export type UsageGroup = Schemas['UsageGroup'];
/** A message waiting in the session's queue for a busy run. */
export type QueuedMessage = Schemas['QueuedMessage'];
/** What a message does while the session is busy: `reject`, `enqueue`, `interrupt` or `merge`. */
export type WhenBusy = Schemas['WhenBusy'];
/** A message's attachments (images, documents), as a follow-up takes them. */
export type Attachment = Schemas['Attachments'][number];
/** Several user messages, as a follow-up takes them. */
export type UserMessages = Schemas['UserMessages'];
/** The notifications a session's waiting calls sent (`GET …/notifications`). */
export type NotificationList = Schemas['NotificationList'];
export type Notification = Schemas['Notification'];
/** An answer to a pending call (`POST …/tool-results`). */
export type ToolAnswer = Schemas['ToolResult'];
export type ErrorInfo = Schemas['ErrorInfo'];
export type PatchOp = Schemas['PatchOp'];
export type StreamChunk = Schemas['StreamChunk'];
export type ChunkType = StreamChunk['type'];

/** Every chunk `type` this client knows (a test checks it against the document). */
export const CHUNK_TYPES: readonly ChunkType[] = [
  'run_started',
  'text_delta',
  'thinking',
  'tool_start',
  'tool_approval_request',
  'tool_end',
  'state_patch',
  'custom',
  'subagent_start',
  'subagent_end',
  'output',
  'error',
  'step_committed',
  'run_suspended',
  'run_resumed',
  'run_interrupted',
  'run_finished',
  'message_queued',
  'message_merged',
  'stream_resync',
];

/** The event's sequence number in the session's stream (its SSE `id`). */
interface Sequenced {
  seq: number;
}

/** A chunk (`event: chunk`), discriminated by its `type`. */
export type ChunkEvent = StreamChunk & Sequenced;
/** `event: end`: the run completed; the server then closes the connection. */
export type EndEvent = Sequenced & { type: 'end' } & Schemas['StreamEnd'];
/** `event: fail`: the run failed or was aborted; the server then closes the connection. */
export type FailEvent = Sequenced & { type: 'fail' } & Schemas['StreamFail'];
/** `event: truncated`: events up to `fromSequence - 1` are gone; refetch the session. */
export type TruncatedEvent = Sequenced & { type: 'truncated' } & Schemas['StreamTruncated'];
/** An event or chunk type this client does not know (a newer server): passed through. */
export interface UnknownEvent extends Sequenced {
  type: 'unknown';
  /** The SSE event name. */
  event: string;
  /** Its data, parsed. */
  data: unknown;
}

/** One event of a session's stream. */
export type SessionEvent = ChunkEvent | EndEvent | FailEvent | TruncatedEvent | UnknownEvent;

/** A run's model options (`providerOptions`): applied over the agent's settings by every model call of that run. */
export type ProviderOptions = Schemas['ProviderOptions'];

/** The body of a create: the session's agent, its first input, an optional id, the first run's model options. */
export interface CreateSessionInput {
  agent: string;
  input: CreateSession['input'];
  sessionId?: string;
  messages?: CreateSession['messages'];
  providerOptions?: ProviderOptions;
}
