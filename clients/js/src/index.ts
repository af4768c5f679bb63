// @helix-edge/client: a typed client for helix-edge workers.
//
// - client.ts    HelixClient: agents, create a session, a handle on one, list sessions
//                and every session's schedules
// - session.ts   SessionHandle: every session route, events, the callback form, mirrors
// - events.ts    EventStream: the resumable, de-duplicated SSE stream of typed events
// - mirror.ts    StateMirror: the session's state and pending calls, kept live
// - transport.ts fetch, the token, JSON, errors
// - errors.ts    HttpError, ProtocolError
// - types.ts     the API's types (from openapi.ts, generated from api/openapi.json)

export { HelixClient } from './client.js';
export { SessionHandle } from './session.js';
export { EventStream, decode, type ConnectionState, type ConnectionStatus, type EventStreamOptions } from './events.js';
export { StateMirror, type MirrorListener } from './mirror.js';
export { Transport, type ClientOptions, type TokenSource } from './transport.js';
export { HttpError, ProtocolError } from './errors.js';
export * from './types.js';
export type { components, operations, paths } from './openapi.js';
