//! The `SessionObject` Durable Object: one session (SPEC §1). It drives the core runner
//! against the session's store, journal and replica in the object's own SQLite
//! ([`crate::sqlite`]), and fans the stream out to connected SSE clients. Nothing that
//! matters lives only in memory: work runs after the HTTP answer (`wait_until`) in
//! slices, with an alarm as the durable trigger around each ([`crate::lifecycle`]).
//!
//! - `capability`: what optional capabilities add (one table, one line per feature).
//! - `ops`: the API's session operations, and the internal create.
//! - `stream`: `GET …/stream`, replay then live, with heartbeats.
//! - `drive`: scheduling work, the alarm, and continuing a stalled session on a read.
//! - `replicate`: sending the commit log to D1 in the background.
//! - `delete`: deleting the session, its children and the object's storage.
//! - `shard`: which D1 database of the record the session's rows go to.
//! - `tree` (feature `subagents`): the session tree's messages — starting and steering
//!   children, a child's relay of its stream and its report when it ends.
//! - `chat` (feature `chat`): the AI SDK's chat routes.
//! - `time_travel` (feature `time-travel`): runs, checkpoints, retries and forks.
//! - `plans` (feature `plans`): plans checked without running them.
//! - `retention` (feature `retention`): erasure for retention, if the session still
//!   ended before the cutoff.
//! - `schedules` (feature `schedules`): schedules, the queue of waiting messages (and
//!   follow-ups' `whenBusy`), the fires claimed after each slice.
//! - `testing` (feature `test-routes`): the test build's routes.
//! - `users` (feature `users`): the door a user's request passes (their sessions only).
//! - `mcp` (feature `mcp`): an MCP server's authorization callback, answering the
//!   calls that waited on it.
//! - `notify` (feature `notify`): the notifications the session's waiting calls owe,
//!   from its outbox, delivered after each slice.

mod capability;
#[cfg(feature = "chat")]
mod chat;
mod delete;
mod drive;
#[cfg(feature = "mcp")]
mod mcp;
#[cfg(feature = "notify")]
pub(crate) mod notify;
mod ops;
#[cfg(feature = "otel")]
mod otel;
#[cfg(feature = "plans")]
mod plans;
mod replicate;
#[cfg(feature = "retention")]
mod retention;
#[cfg(feature = "schedules")]
mod schedules;
mod shard;
mod stream;
#[cfg(feature = "test-routes")]
mod testing;
#[cfg(feature = "time-travel")]
mod time_travel;
#[cfg(feature = "subagents")]
mod tree;
#[cfg(feature = "users")]
mod users;

use crate::api::{ApiError, Operation};
use crate::app::App;
use crate::auth::Principal;
use crate::d1::D1;
use crate::host::Level;
use crate::http::{SESSION_HEADER, SESSION_TOKEN_HEADER, error, internal, json_response};
use crate::journal::Journal;
use crate::runner::waits::{CREATE_PATH, DELETE_PATH};
use crate::runner::{Runner, RunnerConfig};
use crate::setup::Setup;
use crate::sqlite::{self, SqliteAttempts, SqliteStreamLog, SqliteSuspension};
use crate::storage::{ObjectReplica, ObjectStore, Sql};
use crate::worker_host::{WorkerHost, log};
use capability::{Call, Capability};
use serde_json::json;
use shard::SHARD_MARK;
use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};
use worker::{Env, Method, Request, Response, Result, State};

/// What the `SessionObject` Durable Object of a worker does (the class itself is
/// declared in the worker's crate by [`session_object!`](crate::session_object)): one
/// agent session, its live state, stream buffer and suspension context.
pub struct SessionHost {
    inner: Rc<Inner>,
}

struct Inner {
    /// This object, for work that outlives a request.
    me: Weak<Inner>,
    state: State,
    env: Env,
    app: App,
    /// Identifies this instance's claims on approved calls.
    instance: String,
    /// The session this object serves, once a request named it.
    id: RefCell<Option<String>>,
    parts: RefCell<Option<Rc<Parts>>>,
    pinging: Cell<bool>,
    /// A replication is scheduled (commits landing meanwhile go with it).
    replication_scheduled: Cell<bool>,
    /// When the alarm a slice set only to retry replication fires (ms), if it did.
    replication_fallback: Cell<Option<u64>>,
    /// When a schedule's fire or the queue falls due (ms), as the last slice found.
    #[allow(
        dead_code,
        reason = "kept by the schedules capability, when a build has it"
    )]
    due: Cell<Option<u64>>,
    #[allow(
        dead_code,
        reason = "kept by the schedules capability, when a build has it"
    )]
    /// Due fires that could not be claimed, in a row (the schedules capability's).
    claims: Cell<crate::backoff::Backoff>,
}

/// What the object opens on its first request.
struct Parts {
    sql: Rc<Sql>,
    /// The D1 binding of the session's shard of the record.
    database: String,
    stream: Rc<SqliteStreamLog>,
    replica: Rc<ObjectReplica>,
    runner: Rc<Runner<ObjectStore>>,
}

type Reply = std::result::Result<Response, ApiError>;

/// The capabilities of this build.
const CAPABILITIES: &[&Capability] = &[
    #[cfg(feature = "chat")]
    &chat::CHAT,
    #[cfg(feature = "subagents")]
    &tree::SUBAGENTS,
    #[cfg(feature = "persistent-children")]
    &Capability {
        equip: Some(|runner, _| {
            runner.with_waits([crate::runner::WaitKind::persistent_children()])
        }),
        ..capability::NOTHING
    },
    #[cfg(feature = "remote-subagents")]
    &Capability {
        equip: Some(|runner, w| crate::remote::register(runner, w.env, w.stream)),
        ..capability::NOTHING
    },
    #[cfg(feature = "time-travel")]
    &time_travel::TIME_TRAVEL,
    #[cfg(feature = "plans")]
    &plans::PLANS,
    #[cfg(feature = "otel")]
    &otel::OTEL,
    #[cfg(feature = "retention")]
    &retention::RETENTION,
    #[cfg(feature = "schedules")]
    &schedules::SCHEDULES,
    #[cfg(feature = "test-routes")]
    &testing::TESTING,
    #[cfg(feature = "users")]
    &users::USERS,
    #[cfg(feature = "mcp")]
    &mcp::MCP,
    #[cfg(feature = "notify")]
    &notify::NOTIFY,
];

/// The capability that adds to the session view, if one does (known when compiled).
const VIEW: Option<capability::AddToView> = {
    let (mut i, mut found) = (0, None);
    while i < CAPABILITIES.len() {
        if let Some(add) = CAPABILITIES[i].view {
            found = Some(add);
        }
        i += 1;
    }
    found
};

/// The capability that checks who reaches the session, if one does (known when
/// compiled).
const DOOR: Option<capability::Door> = {
    let (mut i, mut found) = (0, None);
    while i < CAPABILITIES.len() {
        if let Some(door) = CAPABILITIES[i].door {
            found = Some(door);
        }
        i += 1;
    }
    found
};

impl SessionHost {
    /// The object for `state`, serving `app`.
    pub fn new(state: State, env: Env, app: App) -> Self {
        crate::worker_host::start(&env);
        let instance = crate::worker_host::random_hex(8);
        Self {
            inner: Rc::new_cyclic(|me| Inner {
                me: me.clone(),
                state,
                env,
                app,
                instance,
                id: RefCell::new(None),
                parts: RefCell::new(None),
                pinging: Cell::new(false),
                replication_scheduled: Cell::new(false),
                replication_fallback: Cell::new(None),
                due: Cell::new(None),
                claims: Cell::new(Default::default()),
            }),
        }
    }

    /// Serves one request the worker forwarded (or another session's object sent).
    pub async fn fetch(&self, req: Request) -> Result<Response> {
        match self.inner.clone().handle(req).await {
            Ok(resp) => Ok(resp),
            Err(err) => {
                if err.status >= 500 {
                    let fields = json!({ "code": err.code, "message": err.message });
                    log(Level::Error, "request_failed", fields);
                }
                error(&err)
            }
        }
    }

    /// The alarm: carries the session's pending work on, and its replication to D1.
    pub async fn alarm(&self) -> Result<Response> {
        let inner = self.inner.clone();
        if let Some(id) = inner.session_id() {
            inner.replicate_now(&id).await;
            inner.drive(id).await;
        }
        Response::ok("")
    }
}

impl Inner {
    fn parts(&self) -> std::result::Result<Rc<Parts>, ApiError> {
        if let Some(parts) = self.parts.borrow().as_ref() {
            return Ok(parts.clone());
        }
        let sql = Rc::new(Sql::open(&self.state).map_err(|e| internal("storage", e))?);
        let host: Rc<dyn crate::host::Host> = Rc::new(WorkerHost);
        let stream = SqliteStreamLog::open(sql.clone(), host.clone());
        let stream = Rc::new(stream.map_err(|e| internal("stream", e))?);
        let setup = Setup::get(&self.env, &self.app)?;
        let database = sqlite::mark(&*sql, SHARD_MARK);
        let database = database.unwrap_or_else(|| setup.first_shard().to_string());
        let d1 = D1::new(&self.env, &database, d1_fault(&self.env)).ok();
        let replica = ObjectReplica::new(sql.clone(), d1, host.clone());
        let replica = Rc::new(replica.index_only(setup.index_only));
        let store = ObjectStore::new(sql.clone(), replica.clone(), setup.backlog_commits);
        store.with_stream(stream.clone());
        let me = self.me.clone();
        store.on_commit(Rc::new(move || {
            if let Some(inner) = me.upgrade() {
                inner.replicate_soon();
            }
        }));
        let journal = Journal {
            stream: stream.clone(),
            attempts: Rc::new(SqliteAttempts::new(sql.clone(), host.clone())),
            suspension: Rc::new(SqliteSuspension::new(sql.clone())),
        };
        let runner = Runner::new(
            store,
            setup.agents.clone(),
            setup.models.clone(),
            journal,
            host,
            RunnerConfig::new(self.instance.clone()),
        );
        let wiring = capability::Wiring {
            env: &self.env,
            sessions: self.app.sessions(),
            stream: &stream,
            database: &database,
            sql: &sql,
        };
        let equip = CAPABILITIES.iter().filter_map(|c| c.equip);
        let runner = equip.fold(runner, |runner, add| add(runner, &wiring));
        let parts = Rc::new(Parts {
            sql,
            database,
            stream,
            replica,
            runner: Rc::new(runner),
        });
        *self.parts.borrow_mut() = Some(parts.clone());
        Ok(parts)
    }

    /// The object's parts, for a request about session `id`: on the first, commits a
    /// previous process left for D1 go first.
    fn attach(&self, id: &str) -> std::result::Result<Rc<Parts>, ApiError> {
        let parts = self.parts()?;
        if self.id.borrow().is_none() {
            self.identified(&parts, id);
            if parts.replica.backlog().0 > 0 {
                self.replicate_soon();
            }
        }
        Ok(parts)
    }

    /// The object learns the session it serves: capabilities are told.
    fn identified(&self, parts: &Parts, id: &str) {
        *self.id.borrow_mut() = Some(id.to_string());
        for told in CAPABILITIES.iter().filter_map(|c| c.identified) {
            told(parts, id);
        }
    }

    /// The session this object serves (remembered from the first request).
    fn session_id(&self) -> Option<String> {
        if let Some(id) = self.id.borrow().clone() {
            return Some(id);
        }
        let parts = self.parts().ok()?;
        let id = sqlite::mark(&*parts.sql, "session_id")?;
        self.identified(&parts, &id);
        Some(id)
    }

    fn remember(&self, id: &str) -> std::result::Result<(), ApiError> {
        // An object serves one session id: the one it was reached by.
        sqlite::set_mark(&*self.parts()?.sql, "session_id", Some(id))
            .map_err(|e| internal("remember", e))
    }

    async fn handle(self: Rc<Self>, mut req: Request) -> Reply {
        let id = req
            .headers()
            .get(SESSION_HEADER)
            .ok()
            .flatten()
            .ok_or_else(|| ApiError::validation("Missing session id."))?;
        let path = req.path();
        let method = req.method();
        let body = match method {
            Method::Post => req.bytes().await.map_err(|e| internal("body", e))?,
            _ => Vec::new(),
        };
        // Every session's own internal routes: its creation, its deletion by its parent.
        match path.as_str() {
            CREATE_PATH => {
                let created = self.create(&id, &req, &body).await?;
                return match wants_stream(&req) {
                    true => self.answer_with_stream(&id, 0, created).await,
                    false => Ok(created),
                };
            }
            DELETE_PATH => return self.delete(&*self.attach(&id)?, &id, true).await,
            _ => {}
        }
        let call = Call {
            id: &id,
            body: &body,
            item: None,
            req: &req,
            by: Principal::Admin,
        };
        if let Some(handler) = internal_route(&path) {
            return handler(&self, &call).await;
        }
        let parts = self.attach(&id)?;
        let route = crate::api::route(method.as_ref(), &path)?;
        let caller = match DOOR {
            Some(door) => door(&parts, &id, &req, route.operation).await?,
            None => None,
        };
        let by = match caller {
            Some(caller) => Principal::User(caller),
            None if req.headers().has(SESSION_TOKEN_HEADER).unwrap_or(false) => {
                Principal::Session(id.clone())
            }
            None => Principal::Admin,
        };
        let call = Call {
            item: route.item,
            by,
            ..call
        };
        if !(route.operation.may_stream() && wants_stream(&req)) {
            return self.serve(&parts, route.operation, &call).await;
        }
        // The run's events are those after the stream's newest now.
        let from = parts.stream.last_seq();
        let answer = self.serve(&parts, route.operation, &call).await?;
        self.answer_with_stream(&id, from, answer).await
    }

    /// Serves API operation `operation` of the session.
    async fn serve(self: &Rc<Self>, parts: &Parts, operation: Operation, call: &Call<'_>) -> Reply {
        // A capability's handler comes first: it may take over a base operation (the
        // schedules' follow-up, with its `whenBusy`).
        if let Some(handler) = served_operation(operation) {
            return handler(self, call).await;
        }
        let (id, req, body, by) = (call.id, call.req, call.body, &call.by);
        let runner = &parts.runner;
        match operation {
            Operation::GetSession => self.get(runner, id).await,
            Operation::DeleteSession => self.delete(parts, id, false).await,
            Operation::ListMessages => self.messages(runner, id, req).await,
            Operation::Stream => self.stream(parts, id, req).await,
            Operation::SubmitToolResult => self.submit(runner, id, body.to_vec(), by).await,
            Operation::SendMessage => {
                let trace = trace_of(req);
                self.send_message(runner, id, body, trace).await
            }
            Operation::Interrupt => self.interrupt(runner, id, body).await,
            Operation::Resume => self.resume(runner, id, body).await,
            Operation::Abort => self.abort(runner, id, body).await,
            // The worker answers the rest itself.
            _ => Err(internal("object route", req.path())),
        }
    }
}

/// Whether the request asks for the run's stream as its answer.
fn wants_stream(req: &Request) -> bool {
    let accept = req.headers().get("accept").ok().flatten();
    crate::api::wants_stream(accept.as_deref())
}

/// A test build's `TEST_D1_FAULT`, if a capability reads one.
pub(crate) fn d1_fault(env: &Env) -> Option<String> {
    let fault = CAPABILITIES.iter().find_map(|c| c.d1_fault);
    fault.and_then(|read| read(env))
}

/// The handler of internal path `path`, if a capability answers it.
fn internal_route(path: &str) -> Option<capability::Handler> {
    let routes = CAPABILITIES.iter().flat_map(|c| c.routes);
    routes.copied().find(|(p, _)| *p == path).map(|(_, h)| h)
}

/// The handler of API operation `operation`, if a capability serves it.
fn served_operation(operation: Operation) -> Option<capability::Handler> {
    let operations = CAPABILITIES.iter().flat_map(|c| c.operations);
    operations
        .copied()
        .find(|(o, _)| *o == operation)
        .map(|(_, h)| h)
}

/// Whether this build's session object serves API operation `operation` (an optional
/// one only with the feature that registers it).
pub(crate) fn serves(operation: Operation) -> bool {
    !operation.is_optional() || served_operation(operation).is_some()
}

/// `202 {"accepted": true}`.
fn accepted() -> Reply {
    json_response(202, &json!({ "accepted": true }))
}

/// The caller's span, from the request's `traceparent` (the worker passes it on).
pub(super) fn trace_of(req: &Request) -> Option<crate::trace::TraceContext> {
    let header = req.headers().get(crate::http::TRACEPARENT).ok().flatten()?;
    crate::trace::TraceContext::parse(&header)
}
