//! What an optional capability adds to the session object, registered once (the
//! object's `CAPABILITIES`, one line per cargo feature): the kind of outside work its runner
//! waits on, internal routes, API operations it serves, what it does after each
//! slice of work and when it needs the alarm, how a chat message follows up, and what
//! it adds to the session view. The object consults the table (the last two resolved
//! when compiled, so a build without them has no code for them); no feature is named
//! anywhere else in it.

use super::{Inner, Reply};
use crate::api::Operation;
use crate::runner::Runner;
use crate::sqlite::SqliteStreamLog;
use crate::storage::{ObjectStore, Sql};
use futures::future::LocalBoxFuture;
use std::rc::Rc;
use worker::{Env, Request};

/// A request of the object, as a handler sees it.
#[allow(dead_code, reason = "read by the handlers a build registers")]
pub(super) struct Call<'a> {
    /// The session it is for.
    pub id: &'a str,
    /// Its body (empty but for a POST).
    pub body: &'a [u8],
    /// The item of the session its route names (`{checkpointId}`), if any.
    pub item: Option<&'a str>,
    /// The request itself (its query).
    pub req: &'a Request,
    /// Who asks (internal routes: the API token); a user owns what they create.
    pub by: crate::auth::Principal,
}

/// Serves a request of the object.
pub(super) type Handler = for<'a> fn(&'a Rc<Inner>, &'a Call<'a>) -> LocalBoxFuture<'a, Reply>;

/// After a slice of work on session `id`: whether what it owes others went through.
pub(super) type AfterSlice = for<'a> fn(&'a Inner, &'a str) -> LocalBoxFuture<'a, bool>;

/// Starts or queues a follow-up of session `id` (`/v1/chat`'s new message: its
/// messages and model options), by what its request's body says.
pub(super) type FollowUp = for<'a> fn(
    &'a Rc<Inner>,
    &'a str,
    &'a [u8],
    Vec<crate::message::Message>,
    (
        Option<serde_json::Value>,
        Option<crate::trace::TraceContext>,
    ),
)
    -> LocalBoxFuture<'a, Result<Followed, crate::api::ApiError>>;

/// A follow-up, started or waiting.
#[allow(dead_code, reason = "made by the follow-ups a build registers")]
pub(super) struct Followed {
    /// The run's id (the one it will have, when it waits).
    pub run_id: String,
    /// Its entry in the queue and its place (1 first), when it waits.
    pub queued: Option<(String, usize)>,
}

/// Lets a request through to session `id`, or refuses it; what it creates is the
/// returned owner's.
pub(super) type Door =
    for<'a> fn(
        &'a super::Parts,
        &'a str,
        &'a Request,
        Operation,
    )
        -> LocalBoxFuture<'a, Result<Option<crate::auth::Caller>, crate::api::ApiError>>;

/// Adds fields to a session's view (`GET /v1/sessions/{id}`), given the object's parts.
pub(super) type AddToView = fn(&super::Parts, &mut serde_json::Map<String, serde_json::Value>);

/// When work a capability keeps falls due next (ms), as its last after-slice hook found.
pub(super) type NextDue = fn(&Inner) -> Option<u64>;

/// Told, after a replication of session `id`, each commit's lag (ms) and each batch D1
/// took (as [`crate::sqlite::sends`] reads them).
pub(super) type OnReplicated = fn(&Inner, &str, &[u64], &[u64]);

/// What a kind of outside work needs of the object to reach the other side.
#[allow(
    dead_code,
    reason = "read by the kinds of outside work a build registers"
)]
pub(super) struct Wiring<'a> {
    pub env: &'a Env,
    /// The Durable Object binding of the session objects.
    pub sessions: &'static str,
    /// The session's stream (remote sessions' chunks are relayed into it).
    pub stream: &'a Rc<SqliteStreamLog>,
    /// The D1 binding of the session's shard of the record (its children's too).
    pub database: &'a str,
    /// The object's SQLite.
    pub sql: &'a Rc<Sql>,
}

/// Equips a session's runner: a kind of outside work it waits on, or what observes it.
pub(super) type Equip = fn(Runner<ObjectStore>, &Wiring<'_>) -> Runner<ObjectStore>;

/// What a capability adds to the object.
pub(super) struct Capability {
    /// What it equips the runner with (the kind of outside work its sessions wait on).
    pub equip: Option<Equip>,
    /// Internal paths it answers (before the API's routes).
    pub routes: &'static [(&'static str, Handler)],
    /// API operations it serves.
    pub operations: &'static [(Operation, Handler)],
    /// What it does after each slice of work.
    pub after_slice: Option<AfterSlice>,
    /// When the alarm must fire for it next, after each slice.
    pub next_due: Option<NextDue>,
    /// Told the session the object serves, once it knows (with the object's parts).
    pub identified: Option<fn(&super::Parts, &str)>,
    /// How a chat message follows up when the session may be busy (else the run starts
    /// or the session is busy: 409). One capability at most has one.
    #[allow(dead_code, reason = "read by the chat routes (feature `chat`)")]
    pub follow_up: Option<FollowUp>,
    /// What it adds to the session view (`GET /v1/sessions/{id}`). One capability at
    /// most adds to it.
    pub view: Option<AddToView>,
    /// Test builds: what D1 does wrong on purpose (`TEST_D1_FAULT`).
    pub d1_fault: Option<fn(&Env) -> Option<String>>,
    /// After a replication: the lags of the commits D1 took, and its batches.
    pub on_replicated: Option<OnReplicated>,
    /// Checks who may reach the session, before any API operation. One capability at
    /// most has one.
    pub door: Option<Door>,
}

/// A capability that adds nothing (the base of each).
#[allow(
    dead_code,
    reason = "the base of the capabilities a build registers, if any"
)]
pub(super) const NOTHING: Capability = Capability {
    equip: None,
    routes: &[],
    operations: &[],
    after_slice: None,
    next_due: None,
    identified: None,
    follow_up: None,
    view: None,
    d1_fault: None,
    on_replicated: None,
    door: None,
};
