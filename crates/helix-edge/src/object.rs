//! `SessionObject`: the Durable Object that owns one session (SPEC §1). It drives the
//! core runner against D1, keeps the stream journal in its own storage and fans events
//! out to connected SSE clients. Nothing that matters lives only in memory: work starts
//! after the HTTP answer (`wait_until`), an alarm armed before every drive is the
//! durable trigger that carries on after an eviction or crash, and runs proceed in
//! bounded slices of steps, re-armed until done.

use crate::api::{
    ApiError, CheckpointView, CreateSessionBody, MessageBody, ReasonBody, RetryBody, RunView,
    SessionView, ToolResultBody, page, parse_body,
};
use crate::app::App;
use crate::children::{DoChildren, RELAY_PATH, START_PATH, WAKE_PATH, post};
use crate::d1::D1Store;
use crate::do_journal::{CLIENT_QUEUE, DoJournal};
use crate::entry::internal;
use crate::host::Level;
use crate::journal::Journal;
use crate::llm::PlatformModels;
use crate::outbox::Outbox;
use crate::runner::{
    CreateSession, Progress, Routed, RunError, Runner, RunnerConfig, child_outcome,
};
use crate::store::{ParentRef, PendingKind, SessionStatus, Store, StoreError};
use crate::worker_host::{WorkerHost, config_value, log};
use futures::StreamExt;
use futures::channel::mpsc;
use serde_json::json;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;
use worker::{Date, Delay, Env, Method, Request, Response, Result, State};

/// Header carrying the session id from the router.
pub const SESSION_HEADER: &str = "x-helix-session-id";
/// Model steps per drive before re-arming (keeps each invocation short).
const STEPS_PER_SLICE: u32 = 4;
/// The alarm armed before each drive fires this long after, if the drive never ends.
const GUARD_MS: u64 = 15_000;
/// Retry delay after a drive failed on an infrastructure error.
const RETRY_MS: u64 = 5_000;
/// Chunks per relay request from a child to its parent.
const RELAY_BATCH: u64 = 500;
/// Most SSE frames sent to a client in one chunk.
const FRAMES_PER_CHUNK: usize = 64;
/// Heartbeat interval of SSE streams (SPEC: at least every 15 s); `SSE_PING_MS` overrides.
const PING_EVERY_MS: u64 = 15_000;

/// What the `SessionObject` Durable Object of a worker does (the class itself is
/// declared in the worker's crate by [`session_object!`](crate::session_object)): one
/// agent session, its live state, stream buffer and suspension context.
pub struct SessionHost {
    inner: Rc<Inner>,
}

struct Inner {
    state: State,
    env: Env,
    app: App,
    /// Identifies this instance's claims on approved calls.
    instance: String,
    runner: RefCell<Option<Rc<Runner<D1Store>>>>,
    journal: RefCell<Option<Rc<DoJournal>>>,
    pinging: Cell<bool>,
}

impl SessionHost {
    /// The object for `state`, serving `app`.
    pub fn new(state: State, env: Env, app: App) -> Self {
        console_error_panic_hook::set_once();
        crate::worker_host::init_log_level(&env);
        let instance = crate::worker_host::random_hex(8);
        Self {
            inner: Rc::new(Inner {
                state,
                env,
                app,
                instance,
                runner: RefCell::new(None),
                journal: RefCell::new(None),
                pinging: Cell::new(false),
            }),
        }
    }

    /// Serves one request the worker forwarded (or another session's object sent).
    pub async fn fetch(&self, req: Request) -> Result<Response> {
        match self.inner.clone().handle(req).await {
            Ok(resp) => Ok(resp),
            Err(err) => {
                if err.status >= 500 {
                    log(
                        Level::Error,
                        "request_failed",
                        json!({ "code": err.code, "message": err.message }),
                    );
                }
                crate::entry::error(&err)
            }
        }
    }

    /// The alarm: carries the session's pending work on.
    pub async fn alarm(&self) -> Result<Response> {
        let inner = self.inner.clone();
        if let Some(id) = inner.session_id() {
            inner.drive(id).await;
        }
        Response::ok("")
    }
}

fn json_response(
    status: u16,
    body: &impl serde::Serialize,
) -> std::result::Result<Response, ApiError> {
    let text = serde_json::to_string(body).map_err(|e| internal("serialize", e))?;
    crate::entry::json(status, &text).map_err(|e| internal("response", e))
}

impl Inner {
    fn journal(&self) -> std::result::Result<Rc<DoJournal>, ApiError> {
        if let Some(j) = self.journal.borrow().as_ref() {
            return Ok(j.clone());
        }
        let journal = Rc::new(
            DoJournal::open(self.state.storage().sql()).map_err(|e| internal("journal", e))?,
        );
        *self.journal.borrow_mut() = Some(journal.clone());
        Ok(journal)
    }

    fn runner(&self) -> std::result::Result<Rc<Runner<D1Store>>, ApiError> {
        if let Some(r) = self.runner.borrow().as_ref() {
            return Ok(r.clone());
        }
        let db = self
            .env
            .d1(self.app.database())
            .map_err(|e| internal("d1 binding", e))?;
        // Opening the journal creates the outbox's table too.
        let journal = self.journal()?;
        let outbox = Outbox::new(self.state.storage().sql());
        let agents = crate::entry::hosted_agents(&self.env, &self.app)?;
        let runner = Rc::new(
            Runner::new(
                D1Store::new(db).deferring_creates(outbox),
                agents,
                Rc::new(PlatformModels::from_env(&self.env)),
                journal,
                Rc::new(WorkerHost),
                RunnerConfig::new(self.instance.clone()),
            )
            .with_children(Rc::new(DoChildren::new(
                self.env.clone(),
                self.app.sessions(),
            ))),
        );
        *self.runner.borrow_mut() = Some(runner.clone());
        Ok(runner)
    }

    /// The session this object serves (remembered from the first request).
    fn session_id(&self) -> Option<String> {
        self.journal().ok()?.flag("session_id")
    }

    fn remember(&self, id: &str) -> std::result::Result<(), ApiError> {
        // An object serves one session id: the one it was reached by.
        match self.journal()?.set_flag("session_id", id) {
            true => Ok(()),
            false => Err(internal("remember", "not stored")),
        }
    }

    async fn handle(self: Rc<Self>, mut req: Request) -> std::result::Result<Response, ApiError> {
        let id = req
            .headers()
            .get(SESSION_HEADER)
            .ok()
            .flatten()
            .ok_or_else(|| ApiError::client(400, "validation_error", "Missing session id."))?;
        let path = req.path();
        #[cfg(feature = "test-routes")]
        if path == "/__test/floor" {
            return self.floor().await;
        }
        #[cfg(feature = "test-routes")]
        if path == "/__test/conformance" {
            return self.conformance().await;
        }
        let op = path
            .trim_start_matches("/v1/sessions")
            .trim_start_matches('/');
        let op = op.split_once('/').map_or("", |(_, rest)| rest);
        let runner = self.runner()?;
        let body = match req.method() {
            Method::Post => req.bytes().await.map_err(|e| internal("body", e))?,
            _ => Vec::new(),
        };
        match path.as_str() {
            START_PATH => return self.start_child(&runner, &id, &body).await,
            WAKE_PATH => {
                self.schedule(&id);
                return json_response(202, &json!({ "accepted": true }));
            }
            RELAY_PATH => return self.take_relay(&runner, &id, &body).await,
            _ => {}
        }
        let empty_or = |body: &[u8]| {
            if body.is_empty() {
                b"{}".to_vec()
            } else {
                body.to_vec()
            }
        };
        match (req.method(), op) {
            (Method::Post, "") if path == "/v1/sessions" => {
                let parsed: CreateSessionBody = parse_body(&body)?;
                let agent = parsed.agent.clone();
                let (message, state) = parsed.into_parts()?;
                self.remember(&id)?;
                let created = runner
                    .create(CreateSession {
                        session_id: id.clone(),
                        agent: agent.clone(),
                        message,
                        state,
                        parent: None,
                    })
                    .await?;
                self.schedule(&id);
                json_response(
                    201,
                    &json!({ "sessionId": id, "runId": created.run_id, "status": created.status }),
                )
            }
            (Method::Get, "") => {
                let loaded = runner.store().load(&id).await.map_err(RunError::from)?;
                let loaded =
                    loaded.ok_or_else(|| RunError::Store(StoreError::NotFound(id.clone())))?;
                self.touch(&runner, &id, &loaded);
                let below = runner.descendant_calls(&loaded.head).await?;
                json_response(200, &SessionView::from(loaded).with_descendant_calls(below))
            }
            (Method::Get, "messages") => {
                let (offset, limit) = page(&query(&req))?;
                let head = self.head(&runner, &id).await?;
                let messages = runner
                    .store()
                    .messages(&id, offset, limit)
                    .await
                    .map_err(RunError::from)?;
                let total = head.message_count;
                let has_more = offset.saturating_add(messages.len() as u64) < total;
                json_response(
                    200,
                    &json!({ "messages": messages, "total": total, "offset": offset, "limit": limit, "hasMore": has_more }),
                )
            }
            (Method::Get, "stream") => self.stream(&runner, &id, &req).await,
            (Method::Post, "tool-results") => {
                let submission = parse_body::<ToolResultBody>(&body)?.into_submission()?;
                match runner.submit(&id, submission).await? {
                    Routed::Here => {
                        self.schedule(&id);
                        json_response(202, &json!({ "accepted": true }))
                    }
                    // Pending in a child session: its object stores the answer.
                    Routed::Owner(child) => {
                        let path = format!("/v1/sessions/{child}/tool-results");
                        crate::entry::call_object(
                            &self.env,
                            self.app.sessions(),
                            &child,
                            Method::Post,
                            &path,
                            None,
                            Some(body),
                        )
                        .await
                    }
                }
            }
            (Method::Post, "messages") => {
                let MessageBody { message } = parse_body(&body)?;
                if message.trim().is_empty() {
                    return Err(ApiError::client(
                        400,
                        "validation_error",
                        "message must not be empty.",
                    ));
                }
                let run_id = runner.send_message(&id, message).await?;
                self.schedule(&id);
                json_response(202, &json!({ "runId": run_id }))
            }
            (Method::Post, "interrupt") => {
                let ReasonBody { reason } = parse_body(&empty_or(&body))?;
                runner.interrupt(&id, reason).await?;
                self.schedule(&id);
                json_response(202, &json!({ "accepted": true }))
            }
            (Method::Post, "resume") => {
                let _: ReasonBody = parse_body(&empty_or(&body))?;
                let run_id = runner.resume(&id).await?;
                self.schedule(&id);
                json_response(202, &json!({ "runId": run_id }))
            }
            (Method::Post, "abort") => {
                let ReasonBody { reason } = parse_body(&empty_or(&body))?;
                runner.abort(&id, reason).await?;
                log(Level::Info, "run_aborted", json!({ "session": id }));
                json_response(202, &json!({ "accepted": true }))
            }
            (Method::Post, "retry") => {
                let RetryBody { checkpoint_id } = parse_body(&empty_or(&body))?;
                let run_id = runner.retry(&id, checkpoint_id.as_deref()).await?;
                self.schedule(&id);
                json_response(202, &json!({ "runId": run_id }))
            }
            (Method::Get, "runs") => {
                self.head(&runner, &id).await?;
                let runs: Vec<RunView> = runner
                    .store()
                    .runs(&id)
                    .await
                    .map_err(RunError::from)?
                    .into_iter()
                    .map(RunView::from)
                    .collect();
                json_response(200, &json!({ "runs": runs }))
            }
            (Method::Get, "checkpoints") => {
                self.head(&runner, &id).await?;
                let checkpoints: Vec<CheckpointView> = runner
                    .store()
                    .checkpoints(&id)
                    .await
                    .map_err(RunError::from)?
                    .into_iter()
                    .map(CheckpointView::from)
                    .collect();
                json_response(200, &json!({ "checkpoints": checkpoints }))
            }
            (method, _) => Err(ApiError::method_not_allowed(method.as_ref(), &path)),
        }
    }

    async fn head(
        &self,
        runner: &Runner<D1Store>,
        id: &str,
    ) -> std::result::Result<crate::store::SessionHead, ApiError> {
        let loaded = runner.store().load(id).await.map_err(RunError::from)?;
        Ok(loaded
            .ok_or_else(|| RunError::Store(StoreError::NotFound(id.into())))?
            .head)
    }

    /// Test-only (feature `test-routes`): the benchmark's floor, the least a session
    /// request can do — reach this object, make one D1 write, answer.
    #[cfg(feature = "test-routes")]
    async fn floor(&self) -> std::result::Result<Response, ApiError> {
        let db = self
            .env
            .d1(self.app.database())
            .map_err(|e| internal("d1 binding", e))?;
        db.prepare("INSERT OR REPLACE INTO cas_guard (id, ok) VALUES (2, 1)")
            .run()
            .await
            .map_err(|e| internal("floor", e))?;
        json_response(200, &json!({ "ok": true }))
    }

    /// Test-only (feature `test-routes`): the store conformance suite with creates kept in
    /// this object's outbox, as sessions run.
    #[cfg(feature = "test-routes")]
    async fn conformance(&self) -> std::result::Result<Response, ApiError> {
        let db = self
            .env
            .d1(self.app.database())
            .map_err(|e| internal("d1 binding", e))?;
        self.journal()?; // creates the outbox's table
        let outbox = Outbox::new(self.state.storage().sql());
        let store = D1Store::new(db).deferring_creates(outbox);
        let results = crate::entry::conformance_results(&store, "outbox").await;
        json_response(200, &json!({ "results": results }))
    }

    /// A request touched the session: resolve expired deadlines without waiting for the alarm.
    /// Continues a session that a read finds with work and nobody on it: a client call
    /// past its deadline, or — after a restart, before the alarm comes back — a run that
    /// is not waiting for anyone (no pending call, or every one answered).
    fn touch(self: &Rc<Self>, runner: &Runner<D1Store>, id: &str, loaded: &crate::store::Loaded) {
        let now = Date::now().as_millis();
        let head = &loaded.head;
        let expired = head
            .pending
            .iter()
            .any(|p| p.deadline.is_some_and(|d| d <= now));
        let Ok(journal) = self.journal() else { return };
        let answered = |call: &str| matches!(journal.find_answer(id, call), Ok(Some(_)));
        let stalled = head.status == SessionStatus::Active
            && !runner.is_driving()
            && head
                .pending
                .iter()
                .all(|p| p.kind != PendingKind::Child && answered(&p.tool_call_id));
        if expired || stalled {
            self.schedule(id);
        }
    }

    /// Drives the session after the response is sent.
    fn schedule(self: &Rc<Self>, id: &str) {
        self.state.wait_until(self.clone().drive(id.to_string()));
    }

    /// One slice of work, with the alarm as the durable trigger around it. Boxed: the
    /// alarm and `wait_until` share one copy of the drive's state machine.
    fn drive(self: Rc<Self>, id: String) -> futures::future::LocalBoxFuture<'static, ()> {
        Box::pin(async move { self.drive_slice(&id).await })
    }

    async fn drive_slice(&self, id: &str) {
        let Ok(runner) = self.runner() else { return };
        let storage = self.state.storage();
        let now = Date::now().as_millis();
        if let Err(e) = storage.set_alarm(Duration::from_millis(GUARD_MS)).await {
            log(
                Level::Warn,
                "alarm_error",
                json!({ "session": id, "error": e.to_string() }),
            );
        }
        let started = Date::now().as_millis();
        let progress = runner.drive(id, STEPS_PER_SLICE).await;
        let elapsed = Date::now().as_millis().saturating_sub(started);
        let reported = self.report_to_parent(&runner, id).await;
        let next = match &progress {
            // The runner logged how the run stands (`run_suspended`, `run_completed`, ...).
            Ok(Progress::Suspended { next_deadline }) => {
                next_deadline.map(|d| d.saturating_sub(now).max(1))
            }
            Ok(Progress::Idle(_)) => None,
            Ok(Progress::Yielded) => Some(1),
            Ok(Progress::Busy) => return, // The drive in progress re-arms when it ends.
            Err(e) => {
                log(
                    Level::Warn,
                    "drive_failed",
                    json!({ "session": id, "error": e.to_string(), "ms": elapsed }),
                );
                Some(RETRY_MS)
            }
        };
        // A parent that did not hear from its child yet: try again soon.
        let next = match (next, reported) {
            (next, true) => next,
            (Some(ms), false) => Some(ms.min(RETRY_MS)),
            (None, false) => Some(RETRY_MS),
        };
        let rearmed = match next {
            Some(ms) => storage.set_alarm(Duration::from_millis(ms)).await,
            None => storage.delete_alarm().await,
        };
        if let Err(e) = rearmed {
            log(
                Level::Warn,
                "alarm_error",
                json!({ "session": id, "error": e.to_string() }),
            );
        }
    }

    /// `/__internal/child`: a parent starts this object's session as its child.
    async fn start_child(
        self: &Rc<Self>,
        runner: &Runner<D1Store>,
        id: &str,
        body: &[u8],
    ) -> std::result::Result<Response, ApiError> {
        // Internal bodies are read as plain JSON values: no deserializer per body type
        // in the bundle.
        let body = internal_json(body);
        let field = |v: &serde_json::Value, key: &str| {
            v.get(key)
                .and_then(serde_json::Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| ApiError::client(400, "validation_error", "Malformed child start."))
        };
        let parent = &body["parent"];
        let parent = ParentRef {
            session_id: field(parent, "sessionId")?,
            tool_call_id: field(parent, "toolCallId")?,
            root_id: field(parent, "rootId")?,
        };
        self.remember(id)?;
        let created = runner
            .create(CreateSession {
                session_id: id.to_string(),
                agent: field(&body, "agent")?,
                message: field(&body, "message")?,
                state: None,
                parent: Some(parent),
            })
            .await?;
        self.schedule(id);
        json_response(201, &json!({ "sessionId": id, "runId": created.run_id }))
    }

    /// `/__internal/relay`: chunks of a child's stream, appended to this one (and passed
    /// on to this session's own parent, if it has one).
    async fn take_relay(
        self: &Rc<Self>,
        runner: &Runner<D1Store>,
        id: &str,
        body: &[u8],
    ) -> std::result::Result<Response, ApiError> {
        let body = internal_json(body);
        let from = body["from"].as_str().unwrap_or_default();
        let chunks: Vec<(u64, String)> = body["chunks"]
            .as_array()
            .map(|all| {
                let pair =
                    |c: &serde_json::Value| Some((c[0].as_u64()?, c[1].as_str()?.to_string()));
                all.iter().filter_map(pair).collect()
            })
            .unwrap_or_default();
        if from.is_empty() {
            return Err(ApiError::client(
                400,
                "validation_error",
                "Malformed relay.",
            ));
        }
        self.journal()?.append_relayed(from, &chunks);
        let parent = runner
            .store()
            .load(id)
            .await
            .ok()
            .flatten()
            .and_then(|l| l.head.parent);
        if let Some(parent) = parent {
            let inner = self.clone();
            let id = id.to_string();
            self.state.wait_until(async move {
                inner.relay(&parent.session_id, &id).await;
            });
        }
        json_response(202, &json!({ "accepted": true }))
    }

    /// For a child session: relays its new chunks to the parent and, once it ended,
    /// wakes the parent (once per ending). `false` if the parent could not be reached.
    async fn report_to_parent(&self, runner: &Runner<D1Store>, id: &str) -> bool {
        let Ok(Some(loaded)) = runner.store().load(id).await else {
            return true;
        };
        let Some(parent) = loaded.head.parent.as_ref() else {
            return true;
        };
        if !self.relay(&parent.session_id, id).await {
            return false;
        }
        let Ok(journal) = self.journal() else {
            return false;
        };
        let version = loaded.head.version.to_string();
        if child_outcome(&loaded.head).is_none()
            || journal.flag("woke").as_deref() == Some(&version)
        {
            return true;
        }
        match post(
            &self.env,
            self.app.sessions(),
            &parent.session_id,
            WAKE_PATH,
            json!({}),
            &[],
        )
        .await
        {
            Ok(()) => {
                journal.set_flag("woke", &version);
                true
            }
            Err(e) => {
                log(
                    Level::Warn,
                    "parent_unreachable",
                    json!({ "session": id, "parent": parent.session_id, "error": e }),
                );
                false
            }
        }
    }

    /// Sends the chunks the parent has not acknowledged yet; `false` if it failed.
    async fn relay(&self, parent_id: &str, id: &str) -> bool {
        let Ok(journal) = self.journal() else {
            return false;
        };
        loop {
            let (upto, chunks) = journal.unrelayed(RELAY_BATCH);
            if upto
                == journal
                    .flag("relayed")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0)
            {
                return true;
            }
            let body = json!({ "from": id, "chunks": chunks });
            if let Err(e) = post(
                &self.env,
                self.app.sessions(),
                parent_id,
                RELAY_PATH,
                body,
                &[],
            )
            .await
            {
                log(
                    Level::Warn,
                    "relay_failed",
                    json!({ "session": id, "parent": parent_id, "error": e }),
                );
                return false;
            }
            journal.mark_relayed(upto);
        }
    }

    /// `GET …/stream`: replays after `Last-Event-ID`/`?after=`, then streams live.
    async fn stream(
        self: &Rc<Self>,
        runner: &Runner<D1Store>,
        id: &str,
        req: &Request,
    ) -> std::result::Result<Response, ApiError> {
        let head = runner.head_for_stream(id).await?;
        let after_header = req.headers().get("last-event-id").ok().flatten();
        let after_query = query(req)
            .into_iter()
            .find(|(k, _)| k == "after")
            .map(|(_, v)| v);
        let after = match after_header.or(after_query) {
            None => 0,
            Some(v) => v.trim().parse::<u64>().map_err(|_| {
                ApiError::client(
                    400,
                    "validation_error",
                    "Last-Event-ID / after must be a sequence number.",
                )
            })?,
        };
        let journal = self.journal()?;
        let (tx, rx) = mpsc::channel::<Vec<u8>>(CLIENT_QUEUE);
        let backlog = journal.subscribe(after, tx);
        let ended =
            head.status != SessionStatus::Active && head.status != SessionStatus::Interrupted;
        let live = if ended {
            journal.close_clients();
            None
        } else {
            self.start_pings();
            Some(rx.take_while(|frame| futures::future::ready(!frame.is_empty())))
        };
        // Frames that are ready together (a replayed backlog, a committed batch) go out
        // as one chunk: one write per batch instead of one per event.
        let chunks = futures::stream::iter(backlog)
            .chain(futures::stream::iter(live).flatten())
            .ready_chunks(FRAMES_PER_CHUNK)
            .map(|frames| Ok::<Vec<u8>, worker::Error>(frames.concat()));
        let mut resp = Response::from_stream(chunks).map_err(|e| internal("stream", e))?;
        let headers = resp.headers_mut();
        for (k, v) in [
            ("content-type", "text/event-stream"),
            ("cache-control", "no-cache"),
        ] {
            headers.set(k, v).map_err(|e| internal("headers", e))?;
        }
        Ok(resp)
    }

    /// One heartbeat loop per object, while any client is connected.
    fn start_pings(self: &Rc<Self>) {
        if self.pinging.replace(true) {
            return;
        }
        let inner = self.clone();
        let every = config_value(&self.env, "SSE_PING_MS")
            .and_then(|v| v.parse().ok())
            .unwrap_or(PING_EVERY_MS);
        worker::wasm_bindgen_futures::spawn_local(async move {
            loop {
                Delay::from(Duration::from_millis(every)).await;
                let connected = inner.journal.borrow().as_ref().map_or(0, |j| j.ping());
                if connected == 0 {
                    inner.pinging.set(false);
                    break;
                }
            }
        });
    }
}

fn query(req: &Request) -> Vec<(String, String)> {
    crate::api::query_pairs(&req.inner().url())
}

/// An internal body as a plain JSON value (`Null` when it is not JSON). Parsed as `str`
/// like every other body, so the bundle carries one instance of the JSON parser.
fn internal_json(body: &[u8]) -> serde_json::Value {
    std::str::from_utf8(body)
        .ok()
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or_default()
}
