//! The `SessionObject` Durable Object: one session (SPEC §1). It drives the core runner
//! against the store, keeps the session's journal (stream, step attempts, suspension
//! context) in its own SQLite and fans the stream out to connected SSE clients. Nothing
//! that matters lives only in memory: work runs after the HTTP answer (`wait_until`) in
//! slices, with an alarm as the durable trigger around each ([`crate::lifecycle`]).
//!
//! - `ops`: the API's session operations, and the internal create.
//! - `stream`: `GET …/stream`, replay then live, with heartbeats.
//! - `drive`: scheduling work, the alarm, and continuing a stalled session on a read.
//! - `tree`: the messages of the session tree (starting and steering children, a
//!   child's relay of its stream and its report when it ends).
//! - `replicate`: sending the commit log to D1 in the background.
//! - `delete`: deleting the session, its children and the object's storage.

#[cfg(feature = "chat")]
mod chat;
mod delete;
mod drive;
mod ops;
mod replicate;
mod stream;
#[cfg(feature = "subagents")]
mod tree;

use crate::api::{ApiError, Operation};
use crate::app::App;
use crate::d1::D1;
use crate::host::Level;
use crate::http::{SESSION_HEADER, error, internal, json_response};
use crate::journal::Journal;
use crate::replica::Replica;
use crate::runner::{Runner, RunnerConfig};
use crate::setup::Setup;
use crate::storage::{ObjectStore, Sql, SqlAttempts, SqlStreamLog, SqlSuspension};
use crate::worker_host::{WorkerHost, log};
use serde_json::json;
use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};
use worker::{Env, Method, Request, Response, Result, State};

/// Internal path: create this object's session (a root's, from the worker's router, or
/// a child's, from its parent); the body is the runner's `CreateSession`.
pub const CREATE_PATH: &str = "/__internal/create";
/// Internal path: a child reports that it ended (`ChildEnded`).
#[cfg(feature = "subagents")]
pub const ENDED_PATH: &str = "/__internal/ended";
/// Internal path: chunks of a child's stream for the parent's (`{from, chunks}`).
#[cfg(feature = "subagents")]
pub const RELAY_PATH: &str = "/__internal/relay";
/// Internal path: the parent is being deleted; delete this child session.
pub const DELETE_PATH: &str = "/__internal/delete";

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
}

/// What the object opens on its first request.
struct Parts {
    sql: Sql,
    stream: Rc<SqlStreamLog>,
    replica: Rc<Replica>,
    runner: Rc<Runner<ObjectStore>>,
}

type Reply = std::result::Result<Response, ApiError>;

/// What a kind of outside work needs of the object to reach the other side (a build
/// that registers no kind reads none of it).
#[allow(dead_code)]
pub(crate) struct Wiring<'a> {
    pub env: &'a Env,
    /// The Durable Object binding of the session objects.
    pub sessions: &'static str,
    /// The session's stream (remote sessions' chunks are relayed into it).
    pub stream: &'a Rc<SqlStreamLog>,
}

/// Adds a kind of outside work to a session's runner.
type Register = fn(Runner<ObjectStore>, &Wiring<'_>) -> Runner<ObjectStore>;

/// The kinds of work this build's sessions wait on outside them, each with its feature.
const WAITS: &[Register] = &[
    #[cfg(feature = "subagents")]
    tree::register,
    #[cfg(feature = "persistent-children")]
    |runner, _| runner.with_waits([crate::runner::WaitKind::persistent_children()]),
    #[cfg(feature = "remote-subagents")]
    crate::remote::register,
];

impl SessionHost {
    /// The object for `state`, serving `app`.
    pub fn new(state: State, env: Env, app: App) -> Self {
        console_error_panic_hook::set_once();
        crate::worker_host::init_log_level(&env);
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
        let sql = Sql::open(&self.state).map_err(|e| internal("storage", e))?;
        let stream = Rc::new(SqlStreamLog::open(sql.clone()).map_err(|e| internal("stream", e))?);
        let d1 = D1::new(&self.env, self.app.database()).ok();
        let replica = Rc::new(Replica::new(sql.clone(), d1));
        let setup = Setup::get(&self.env, &self.app)?;
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
            attempts: Rc::new(SqlAttempts(sql.clone())),
            suspension: Rc::new(SqlSuspension::new(sql.clone())),
        };
        let runner = Runner::new(
            store,
            setup.agents.clone(),
            setup.models.clone(),
            journal,
            Rc::new(WorkerHost),
            RunnerConfig::new(self.instance.clone()),
        );
        let wiring = Wiring {
            env: &self.env,
            sessions: self.app.sessions(),
            stream: &stream,
        };
        let runner = WAITS
            .iter()
            .fold(runner, |runner, register| register(runner, &wiring));
        let parts = Rc::new(Parts {
            sql,
            stream,
            replica,
            runner: Rc::new(runner),
        });
        *self.parts.borrow_mut() = Some(parts.clone());
        Ok(parts)
    }

    /// The session this object serves (remembered from the first request).
    fn session_id(&self) -> Option<String> {
        if let Some(id) = self.id.borrow().clone() {
            return Some(id);
        }
        let id = self.parts().ok()?.sql.mark("session_id")?;
        *self.id.borrow_mut() = Some(id.clone());
        Some(id)
    }

    fn remember(&self, id: &str) -> std::result::Result<(), ApiError> {
        // An object serves one session id: the one it was reached by.
        match self.parts()?.sql.set_mark("session_id", Some(id)) {
            true => Ok(()),
            false => Err(internal("remember", "not stored")),
        }
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
        // The floor is the least a request can do: it opens nothing of the session.
        #[cfg(feature = "test-routes")]
        if path == crate::test_routes::FLOOR_PATH {
            return crate::test_routes::floor(&self.env, &self.app).await;
        }
        let parts = self.parts()?;
        if self.id.borrow().is_none() {
            *self.id.borrow_mut() = Some(id.clone());
            // Commits a previous process left for D1 go first.
            if parts.replica.backlog().0 > 0 {
                self.replicate_soon();
            }
        }
        match path.as_str() {
            CREATE_PATH => return self.create(&parts, &id, &body).await,
            #[cfg(feature = "subagents")]
            ENDED_PATH => return self.child_ended(&parts, &id, &body).await,
            #[cfg(feature = "subagents")]
            RELAY_PATH => return self.take_relay(&parts, &id, &body).await,
            #[cfg(feature = "subagents")]
            tree::MESSAGE_PATH => return self.parent_message(&parts, &id, &body).await,
            DELETE_PATH => return self.delete(&parts, &id, true).await,
            #[cfg(feature = "test-routes")]
            crate::test_routes::CONFORMANCE_PATH => {
                return crate::test_routes::object_conformance(&parts.sql).await;
            }
            #[cfg(feature = "test-routes")]
            crate::test_routes::REPLICA_PATH => return self.replica_report(&parts, &id).await,
            #[cfg(feature = "test-routes")]
            crate::test_routes::FORGET_PATH => return self.forget().await,
            _ => {}
        }
        let route = crate::api::route(method.as_ref(), &path)?;
        let runner = &parts.runner;
        match route.operation {
            Operation::GetSession => self.get(runner, &id).await,
            Operation::DeleteSession => self.delete(&parts, &id, false).await,
            Operation::ListMessages => self.messages(runner, &id, &req).await,
            Operation::Stream => self.stream(&parts, &id, &req).await,
            Operation::SubmitToolResult => self.submit(runner, &id, body).await,
            Operation::SendMessage => self.send_message(runner, &id, &body).await,
            Operation::Interrupt => self.interrupt(runner, &id, &body).await,
            Operation::Resume => self.resume(runner, &id, &body).await,
            Operation::Abort => self.abort(runner, &id, &body).await,
            Operation::Retry => self.retry(runner, &id, &body).await,
            Operation::Fork => self.fork(runner, &id, &body).await,
            Operation::ListRuns => self.runs(runner, &id).await,
            Operation::ListCheckpoints => self.checkpoints(runner, &id).await,
            #[cfg(feature = "chat")]
            Operation::Chat => self.chat(&parts, &id, &body).await,
            #[cfg(feature = "chat")]
            Operation::ChatStream => self.chat_stream(&parts, &id).await,
            // The worker answers the rest itself.
            other => Err(internal("object route", format!("{other:?}"))),
        }
    }
}

/// `202 {"accepted": true}`.
fn accepted() -> Reply {
    json_response(202, &json!({ "accepted": true }))
}
