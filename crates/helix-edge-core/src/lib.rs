//! helix-edge-core: the pure core of helix-edge, a runtime for durable,
//! human-in-the-loop AI agents on Cloudflare Workers. No IO, no clock, no randomness and
//! no `worker` dependency: time, ids, storage, the stream journal and HTTP are passed
//! in, so everything here builds and tests natively with plain `cargo test`. The
//! `helix-edge` crate runs it on Workers and re-exports it.
//!
//! # Map of the crate
//! - Definitions: [`agent`] (agents and the registry), [`tool`] (typed tools and their
//!   context), [`model`] (the model interface), [`error`] (one error enum per layer).
//! - The run loop: [`runner`] (create, answer, drive, resume, retry, fork, delete;
//!   sub-agents), [`store`] (the persistence contract, an in-memory backend, the D1 row
//!   plan, the plan run in memory and the conformance suite), [`journal`] (the stream log and suspension context contract),
//!   [`state`] (RFC 6902 patches, diffs and merges), [`host`] (clock, timers, ids, logs),
//!   [`lifecycle`] (when work runs: slices, alarms, stalled sessions), [`memory`] (state
//!   as the workflow's memory: `_outputPath`, state references, plans), `skill`
//!   (feature `skills`: skills an agent loads when a task needs them; `skills_dir!`
//!   reads a directory of them at build time, from the proc-macro crate
//!   `helix-edge-macros`).
//! - The outside: [`chunk`] (stream chunks), [`message`] (the transcript) and
//!   [`attachment`] (files users attach to messages), [`api`]
//!   (routes, bodies, views and errors of the HTTP API, the served OpenAPI document),
//!   [`chat`] (the AI SDK's chat protocol: its requests, the UI message stream),
//!   [`auth`] (tokens).
//! - Models: [`provider`] (OpenAI-compatible and Anthropic over a caller's transport,
//!   sans IO), `demo` (feature `demo`: the built-in deterministic model), [`scripted`]
//!   (a scripted model for tests), [`schema`] (the JSON Schema checks tools use).

pub mod abort;
pub mod agent;
pub mod api;
pub mod attachment;
pub mod auth;
pub mod chat;
pub mod chunk;
#[cfg(feature = "demo")]
pub mod demo;
pub mod error;
pub mod host;
pub mod journal;
pub mod lifecycle;
pub mod memory;
pub mod message;
pub mod model;
pub mod provider;
pub mod runner;
pub mod schema;
pub mod scripted;
#[cfg(feature = "skills")]
pub mod skill;
pub mod sqlite;
pub mod state;
pub mod store;
#[cfg(feature = "testing")]
pub mod testing;
pub mod tool;
mod wire;
