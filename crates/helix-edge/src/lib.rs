//! helix-edge: durable, human-in-the-loop AI agents on Cloudflare Workers.
//!
//! A worker that hosts agents is a few lines: its agents, built from the environment,
//! and one macro that expands to the `fetch` entry and the `SessionObject` Durable
//! Object.
//!
//! ```ignore
//! use helix_edge::{agent::{Agent, Agents}, error::DefinitionError};
//! use worker::Env;
//!
//! fn agents(env: &Env) -> Result<Agents, DefinitionError> {
//!     Agents::new().with(Agent::builder("helper").system_prompt("…").build()?)
//! }
//!
//! helix_edge::worker!(agents);
//! ```
//!
//! # Map of the crate
//! A thin platform shell: it reads bytes, asks the core for a plan and carries it out.
//! - The pure core, re-exported from `helix-edge-core` module by module (agents, tools,
//!   the runner, stores, journals, chunks, providers, the API's shapes and request
//!   plan): everything that compiles and tests natively. Natively this crate is just
//!   that.
//! - [`App`] (`app`): the worker's agents and binding names; `setup`: what one
//!   request's objects are built from.
//! - [`worker!`] / [`session_object!`]: the entry and the Durable Object class, in the
//!   user's crate. [`fetch`] (`entry`) is the entry as a function, for workers that add
//!   routes of their own in front of helix-edge's; it carries out
//!   [`api::plan`](crate::api::plan) and registers what features add to it in two
//!   tables.
//! - [`SessionHost`] (`object`): the Durable Object that owns one session — drives the
//!   runner (`drive`), answers its requests (`ops`, `chat`, `stream`, `delete`,
//!   `time_travel`, `schedules`), orders children (`tree`) and replicates (`replicate`); what
//!   features add to it is one table, `CAPABILITIES` (`object/capability.rs`: a wait
//!   kind, internal routes, API operations).
//! - `storage`: the core's [`sqlite`] over the object's `SqlStorage`. `d1`: D1 access,
//!   the replica's record. `http`: bodies, responses and object-to-object requests.
//!   `llm`: model providers over `fetch`. `worker_host`: clock, ids and logs. `remote`
//!   (feature `remote-subagents`): other deployments' agents over `fetch`. `list`: the
//!   session list from D1. [`request`] (`outgoing`, on every target): an outgoing request for tools that call HTTP
//!   APIs, without `worker::RequestInit`'s bundle cost.
//! - [`objects`] (features `skill-store`, `attachment-store`): R2 buckets and KV
//!   namespaces as the core's object stores.
//! - [`mcp`] (feature `mcp`, on every target): MCP servers reached through `fetch`, for
//!   the core's `mcp` tools.
//! - `identity_keys` (feature `users`): users' tokens' public keys over `fetch` and
//!   WebCrypto, for the core's [`identity`] checks.
//! - `users` (feature `users`): users' tokens on the routes — the request a user's, the
//!   user told to the session's object, the object's door.
//! - `oidc` (feature `users`): a page's sign-in through the identity provider — the
//!   authorization code with PKCE, exchanged by the worker for the ID token.
//! - [`otel`] (feature `otel`): runs' OpenTelemetry spans, kept per session and
//!   exported over OTLP/HTTP after each slice of work.
//! - `decisions` (feature `notify`): the decision links' pages — a GET shows the call,
//!   the POST decides it (the session object's `notify` capability sends the
//!   notifications that carry them).
//! - `retention` (feature `retention`): the worker's cron trigger compacting and
//!   erasing ended sessions in the record.
//! - `zones` (feature `schedules`): time zone rules from the runtime (`Intl`), for
//!   the core's cron arithmetic; no zone database in the bundle.
//! - `allocator` (feature `talc`): the worker's global allocator.
//! - `busy` (features `otel`, `notify`): one piece of background work per session at a
//!   time (the OTLP export, the notifications' delivery).
//! - `console` (feature): the browser console, embedded and served at `/` (the
//!   reference worker serves the same files as static assets).
//! - [`migrations`]: the D1 migrations this version ships, and the check that the
//!   database has them ([`schema`] is the core's JSON Schema validator).
//!
//! Everything that touches `worker::` is wasm-only.

// The pure core, module by module (each is documented in `helix-edge-core`).
#[cfg(feature = "demo")]
pub use helix_edge_core::demo;
#[cfg(feature = "users")]
pub use helix_edge_core::identity;
#[cfg(feature = "notify")]
pub use helix_edge_core::notify;
#[cfg(feature = "schedules")]
pub use helix_edge_core::schedule;
#[cfg(feature = "otel")]
pub use helix_edge_core::telemetry;
#[cfg(feature = "testing")]
pub use helix_edge_core::testing;
pub use helix_edge_core::{
    agent, api, attachment, auth, backoff, chat, chunk, error, host, journal, lifecycle, memory,
    message, model, provider, provider_options, runner, schema, scripted, settings, sqlite, state,
    store, tool, trace,
};
#[cfg(feature = "skills")]
pub use helix_edge_core::{skill, skills_dir};

#[cfg(all(target_arch = "wasm32", feature = "talc"))]
mod allocator;
#[cfg(target_arch = "wasm32")]
mod app;
#[cfg(all(target_arch = "wasm32", any(feature = "otel", feature = "notify")))]
mod busy;
#[cfg(all(target_arch = "wasm32", feature = "console"))]
mod console;
#[cfg(target_arch = "wasm32")]
mod d1;
#[cfg(all(target_arch = "wasm32", feature = "notify"))]
mod decisions;
#[cfg(target_arch = "wasm32")]
mod entry;
#[cfg(target_arch = "wasm32")]
mod http;
#[cfg(all(target_arch = "wasm32", feature = "users"))]
pub mod identity_keys;
#[cfg(target_arch = "wasm32")]
mod list;
#[cfg(target_arch = "wasm32")]
mod llm;
pub mod migrations;
#[cfg(target_arch = "wasm32")]
mod object;
#[cfg(all(target_arch = "wasm32", feature = "users"))]
mod oidc;
// On every target (like `request`): a worker's agents name these in the function that
// builds them, which its native tests compile too.
#[cfg(feature = "mcp")]
pub mod mcp;
#[cfg(feature = "objects")]
pub mod objects;
#[cfg(feature = "otel")]
pub mod otel;
mod outgoing;
#[cfg(all(target_arch = "wasm32", feature = "remote-subagents"))]
mod remote;
#[doc(hidden)]
#[cfg(all(target_arch = "wasm32", feature = "retention"))]
pub mod retention;
#[cfg(target_arch = "wasm32")]
mod setup;
#[cfg(target_arch = "wasm32")]
mod storage;
#[cfg(all(target_arch = "wasm32", feature = "test-routes"))]
mod test_routes;
#[cfg(all(target_arch = "wasm32", feature = "users"))]
mod users;
#[cfg(target_arch = "wasm32")]
mod worker_host;
#[cfg(all(target_arch = "wasm32", feature = "schedules"))]
pub mod zones;

#[cfg(target_arch = "wasm32")]
pub use app::{App, IntoApp};
#[cfg(target_arch = "wasm32")]
pub use entry::fetch;
#[cfg(target_arch = "wasm32")]
pub use object::SessionHost;
pub use outgoing::request;

/// Forgets what this isolate read from its environment (its agents, auth and model
/// configuration), for tests that call [`fetch`] with several environments in one
/// isolate.
#[doc(hidden)]
#[cfg(target_arch = "wasm32")]
pub fn forget_environment() {
    setup::Setup::forget();
}

/// Expands, in a worker crate, to its `fetch` entry and its `SessionObject` Durable
/// Object class, both serving `app`: an [`App`], or the function that builds the
/// agents from the environment (`fn(&Env) -> Result<Agents, DefinitionError>`).
///
/// Natively (`cargo test` on the worker crate) it expands to nothing, so the crate's
/// own tests build as they are; the agents' function counts as used.
///
/// A worker with routes of its own writes its `#[event(fetch)]` itself, calls
/// [`fetch`] for everything else, and uses [`session_object!`] for the class.
#[macro_export]
macro_rules! worker {
    (@wasm $app:expr) => {
        #[cfg(target_arch = "wasm32")]
        $crate::session_object!($app);

        #[cfg(target_arch = "wasm32")]
        #[::worker::event(fetch)]
        async fn fetch(
            req: ::worker::worker_sys::web_sys::Request,
            env: ::worker::Env,
            ctx: ::worker::Context,
        ) -> ::worker::Result<::worker::Response> {
            $crate::fetch(req, env, ctx, __helix_edge_app()).await
        }

        $crate::__scheduled!();
    };
    ($agents:ident) => {
        #[cfg(not(target_arch = "wasm32"))]
        const _: () = {
            let _ = $agents;
        };
        $crate::worker!(@wasm $agents);
    };
    ($app:expr) => {
        $crate::worker!(@wasm $app);
    };
}

/// The worker's `scheduled` entry: retention of the record, run by its cron trigger
/// (feature `retention`).
#[doc(hidden)]
#[cfg(feature = "retention")]
#[macro_export]
macro_rules! __scheduled {
    () => {
        #[cfg(target_arch = "wasm32")]
        #[::worker::event(scheduled)]
        async fn scheduled(
            _event: ::worker::ScheduledEvent,
            env: ::worker::Env,
            _ctx: ::worker::ScheduleContext,
        ) {
            $crate::retention::scheduled(env, __helix_edge_app()).await
        }
    };
}

/// Without the feature `retention`, a worker has no `scheduled` entry.
#[doc(hidden)]
#[cfg(not(feature = "retention"))]
#[macro_export]
macro_rules! __scheduled {
    () => {};
}

/// Expands to the `SessionObject` Durable Object class serving `app` (see
/// [`worker!`]); wrangler binds it by that class name.
#[macro_export]
macro_rules! session_object {
    ($app:expr) => {
        /// The app the worker's entry and its `SessionObject` serve.
        #[doc(hidden)]
        fn __helix_edge_app() -> $crate::App {
            $crate::IntoApp::into_app($app)
        }

        #[doc(hidden)]
        mod __helix_edge_session_object {
            // The class's wasm-bindgen glue names `wasm_bindgen` by a relative path.
            #[allow(unused_imports)]
            use ::worker::wasm_bindgen;

            /// The Durable Object that owns one session: its live state, its stream and
            /// its suspension context.
            #[::worker::durable_object]
            pub struct SessionObject($crate::SessionHost);

            impl ::worker::DurableObject for SessionObject {
                fn new(state: ::worker::State, env: ::worker::Env) -> Self {
                    Self($crate::SessionHost::new(
                        state,
                        env,
                        super::__helix_edge_app(),
                    ))
                }

                async fn fetch(
                    &self,
                    req: ::worker::Request,
                ) -> ::worker::Result<::worker::Response> {
                    self.0.fetch(req).await
                }

                async fn alarm(&self) -> ::worker::Result<::worker::Response> {
                    self.0.alarm().await
                }
            }
        }

        pub use __helix_edge_session_object::SessionObject;
    };
}
