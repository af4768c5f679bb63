//! helix-edge: a runtime for durable, human-in-the-loop AI agents on Cloudflare Workers.
//!
//! # Map of the crate
//! - [`api`]: the outside of the HTTP API that does not need the Workers runtime: the
//!   JSON error body every route answers with, and the `/healthz` body.
//! - `platform` (wasm only): the worker entry point, the router and the `SessionObject`
//!   Durable Object. It is the only module that touches `worker::`; the `worker` crate is
//!   a wasm-only dependency, so a stray `use worker::` breaks the native build.
//!
//! Everything outside `platform` is a pure core: no IO, no clock, no randomness. Time
//! and ids are passed in, so the core is tested natively with plain `cargo test`.

pub mod agent;
pub mod agents;
pub mod api;
pub mod auth;
pub mod chunk;
pub mod demo;
pub mod error;
pub mod host;
pub mod journal;
pub mod message;
pub mod model;
pub mod provider;
pub mod runner;
pub mod schema;
pub mod scripted;
pub mod state;
pub mod store;
pub mod tool;
mod wire;

#[cfg(target_arch = "wasm32")]
mod platform;
