//! helix-edge-core: the pure core of helix-edge, a runtime for durable,
//! human-in-the-loop AI agents on Cloudflare Workers. No IO, no clock, no randomness and
//! no `worker` dependency: time, ids, storage, the stream journal and HTTP are passed
//! in, so everything here builds and tests natively with plain `cargo test`. The
//! `helix-edge` crate runs it on Workers and re-exports it.
//!
//! # Map of the crate
//! Layers, each importing only the ones above it in this list: a newcomer reads them
//! top down.
//! - Values: [`error`] (one error enum per layer), [`host`] (clock, timers, ids, logs),
//!   [`abort`] (the cancellation signal), [`backoff`] (retries said once, ever
//!   later), [`trace`] (a request's `traceparent`, the
//!   trace a run keeps), [`schema`] (the JSON Schema checks tools use),
//!   [`state`] (RFC 6902 patches, diffs and merges), [`attachment`] (files users attach
//!   to messages), [`message`] (the transcript), [`chunk`] (stream chunks).
//! - Definitions: [`model`] (the model interface), [`provider_options`] (a run's model
//!   options, checked against its agent's tools), [`tool`] (typed tools and their
//!   context; a sub-agent tool names its agent), [`memory`] (state as the workflow's
//!   memory: `_outputPath`, state references, plans with conditional and scoped steps,
//!   checked without running them), [`agent`] (agents, their builder
//!   and the registry), `skill` (feature `skills`: skills an agent loads when a task
//!   needs them; `skills_dir!` reads a directory of them at build time, from the
//!   proc-macro crate `helix-edge-macros`); `objects` (features `skill-store`,
//!   `attachment-store`: objects by key in a store outside the session);
//!   `attachment_store` (feature: large tool attachments kept in one, read back for
//!   each model call).
//! - Durability: [`store`] (the persistence contract, an in-memory backend, the D1 row
//!   plan and the conformance suite), [`journal`] (the stream log, step attempts and
//!   suspension context contract, and the session's vault), [`sqlite`] (both over a session object's SQLite,
//!   the SSE fan-out and the replication to D1, for any platform that implements its
//!   [`Db`](sqlite::Db)).
//! - Models: [`provider`] (OpenAI-compatible and Anthropic over a caller's transport,
//!   sans IO; the configured models), `demo` (feature `demo`: the built-in
//!   deterministic model), [`scripted`] (a scripted model for tests).
//! - Configuration: [`settings`] (every variable, secret and binding a deployment reads,
//!   the table the book's reference is written from).
//! - `mcp` (feature `mcp`): tools of remote MCP servers, listed as a drive starts and
//!   called over the Streamable HTTP transport; their OAuth and elicitations as calls
//!   that wait on the user ([`tool::Wait`]).
//! - `notify` (feature `notify`): notifications of calls that wait on a person (signed
//!   webhooks, JSON or Slack) from the session object's durable outbox, and decision
//!   links.
//! - The run loop: [`runner`] — **the step machine** in [`runner::machine`], the driver
//!   that carries it out, a step's pure conclusion, the commit pipeline, tool
//!   execution, the request operations, and [`runner::waits`] (work a run waits on
//!   outside its session: sub-agents, persistent children, remote sub-agents, each a
//!   module). [`lifecycle`]: when work runs (slices, alarms, replication, stalled
//!   sessions). `schedule` (feature `schedules`): runs a session starts on its own (at
//!   a time, every so often, on a cron pattern in a time zone), the durable queue of
//!   messages that wait for a busy run (`whenBusy`), and the tools an agent schedules
//!   itself with.
//! - The outside: [`api`] (routes, **the request plan** a worker carries out, bodies,
//!   views and errors of the HTTP API, the served OpenAPI document), [`chat`] (the AI
//!   SDK's chat protocol: its requests, the UI message stream), [`auth`] (tokens),
//!   `identity` (feature `users`: JWTs of the deployment's identity provider).
//! - `telemetry` (feature `traces`): OpenTelemetry spans of runs (GenAI conventions),
//!   built from what the runner observes, for a platform to export.
//! - `testing` (feature `testing`): a scenario kit for a worker's own native tests —
//!   store, journal, a manual clock and a scripted model, drive helpers and the check
//!   that the record is consistent.
//!
//! Optional capabilities are whole modules behind cargo features, registered once
//! ([`memory::MEMORY`], [`provider::protocol::PROTOCOLS`], a wait kind per feature in
//! the platform's table): no function body changes with a feature.

pub mod abort;
pub mod agent;
pub mod api;
pub mod attachment;
#[cfg(feature = "attachment-store")]
pub mod attachment_store;
pub mod auth;
pub mod backoff;
pub mod chat;
pub mod chunk;
#[cfg(feature = "demo")]
pub mod demo;
pub mod error;
pub mod host;
#[cfg(feature = "users")]
pub mod identity;
pub mod journal;
pub mod lifecycle;
#[cfg(feature = "mcp")]
pub mod mcp;
pub mod memory;
pub mod message;
pub mod model;
#[cfg(feature = "notify")]
pub mod notify;
#[cfg(feature = "objects")]
pub mod objects;
pub mod provider;
pub mod provider_options;
pub mod runner;
#[cfg(feature = "schedules")]
pub mod schedule;
pub mod schema;
pub mod scripted;
pub mod settings;
#[cfg(feature = "skills")]
pub mod skill;
pub mod sqlite;
pub mod state;
pub mod store;
#[cfg(feature = "traces")]
pub mod telemetry;
#[cfg(feature = "testing")]
pub mod testing;
pub mod tool;
pub mod trace;
mod wire;
