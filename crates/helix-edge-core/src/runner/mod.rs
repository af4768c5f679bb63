//! The durable run loop. A [`Runner`] owns nothing that matters only in memory: every
//! operation loads the session from the [`Store`], changes it with one compare-and-set
//! commit, and streams through the [`Journal`]. At a human-in-the-loop boundary the run
//! commits its pending calls and returns; a fresh runner built from the store alone
//! resumes it.
//!
//! Inputs are the `handle`-style operations ([`create`](Runner::create),
//! [`submit`](Runner::submit), [`send_message`](Runner::send_message),
//! [`interrupt`](Runner::interrupt), [`resume`](Runner::resume),
//! [`abort`](Runner::abort), [`retry`](Runner::retry), [`delete`](Runner::delete)); work happens in
//! [`drive`](Runner::drive), in bounded slices of steps.
//!
//! Execution guarantees:
//! - An approved call is claimed durably (in the journal, naming this runner's
//!   instance) before it runs. A claim left by an instance that is gone is never run
//!   again: the call resolves as `tool_interrupted`. So an approved tool runs at most
//!   once.
//! - A step that did not commit is redone from the last commit; nothing committed is
//!   redone, and the stream is told with `stream_resync`.
//! - A step that keeps failing to commit (crashes) fails the run after
//!   [`RunnerConfig::max_step_attempts`] attempts instead of spending model calls forever.

mod ahead;
mod branch;
mod calls;
mod children;
mod commit;
#[cfg(feature = "persistent-children")]
mod companion;
mod delete;
mod emit;
mod error;
mod exec;
#[cfg(feature = "persistent-children")]
mod follow_up;
mod ops;
mod outcome;
mod plan;
#[cfg(feature = "remote-subagents")]
mod remote;
mod resolve;
mod step;
mod waits;

pub(crate) use ahead::Ahead;
pub use children::{
    ChildEnded, ChildOrder, Children, NoChildren, child_outcome, child_session_id, ended_report,
};
pub use error::RunError;
pub use ops::{CreateSession, Created, Routed, Submission};
#[cfg(feature = "remote-subagents")]
pub use remote::{
    MAX_FAILURES, MAX_POLL_MS, MIN_POLL_MS, NoRemotes, RemoteAnswer, RemoteError, RemoteOrder,
    RemoteView, Remotes, submission_body,
};

use crate::abort::AbortSignal;
use crate::agent::{Agent, Agents};
use crate::chunk::RunStatus;
use crate::error::ErrorInfo;
use crate::host::{Host, Level, LogValue};
use crate::journal::Journal;
use crate::message::Message;
use crate::model::Models;
use crate::store::{
    Answer, Commit, InterruptRequest, SessionHead, SessionStatus, Store, StoreError,
};
use emit::Emitter;
use futures::future::LocalBoxFuture;
use serde_json::Value;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// Tunables of a runner.
#[derive(Debug, Clone)]
pub struct RunnerConfig {
    /// Identifies this runner's process. Claims by any other instance are from a process
    /// that is gone (one live owner per session is the platform's guarantee).
    pub instance: String,
    /// How many times one step may begin before the run fails (crash loops).
    pub max_step_attempts: u32,
    /// Corrective nudges when a required output is missing, before the run fails.
    pub max_output_nudges: u32,
}

impl RunnerConfig {
    /// Defaults for an instance id: 3 step attempts, 2 output nudges.
    pub fn new(instance: impl Into<String>) -> Self {
        Self {
            instance: instance.into(),
            max_step_attempts: 3,
            max_output_nudges: 2,
        }
    }
}

/// What a [`Runner::drive`] call left behind.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    /// Nothing to do: the session is in this status.
    Idle(SessionStatus),
    /// Waiting on answers; drive again when one arrives or at `next_deadline` (ms).
    Suspended {
        /// The earliest client deadline among the unanswered calls.
        next_deadline: Option<u64>,
    },
    /// The step budget ran out with work left: drive again.
    Yielded,
    /// Another drive of this runner is in progress.
    Busy,
}

/// A session loaded for work: the durable head and state, the transcript (loaded only
/// for driving), the answers to its pending calls and any requested interrupt.
#[derive(Debug, Clone)]
pub(crate) struct Live {
    pub head: SessionHead,
    pub state: Value,
    pub transcript: Vec<Message>,
    pub answers: Vec<(String, Answer)>,
    pub interrupt: Option<InterruptRequest>,
    /// A commit `live` already shows that has not landed yet (see [`Ahead`]).
    pub ahead: Option<Ahead>,
    /// Records of persistent children whose ended turns the step being taken tells the
    /// model about; its commit stores them.
    #[cfg(feature = "persistent-children")]
    pub notified: Vec<crate::store::SubSession>,
}

impl Live {
    pub fn answer(&self, call_id: &str) -> Option<&Answer> {
        self.answers
            .iter()
            .find(|(id, _)| id == call_id)
            .map(|(_, a)| a)
    }
}

/// Drives the sessions of one deployment (or, on the platform, of one Durable Object).
pub struct Runner<S: Store> {
    store: S,
    agents: Agents,
    models: Rc<dyn Models>,
    journal: Journal,
    host: Rc<dyn Host>,
    config: RunnerConfig,
    /// Reaches the child sessions of sub-agent calls.
    children: Rc<dyn Children>,
    /// Raised by `abort` for the tools of the drive in progress.
    abort: RefCell<AbortSignal>,
    /// An interrupt requested while a drive is in progress: the durable flag is what a
    /// later drive sees; this is how the drive in progress sees it at its next step.
    interrupt_requested: RefCell<Option<InterruptRequest>>,
    /// The child sessions this instance started (a later process starts them again:
    /// a start is idempotent).
    #[cfg_attr(not(feature = "subagents"), allow(dead_code))]
    started: RefCell<Vec<String>>,
    /// Reaches the deployments of remote sub-agent calls.
    #[cfg(feature = "remote-subagents")]
    remotes: Rc<dyn Remotes>,
    /// How this instance polls each remote session it waits on.
    #[cfg(feature = "remote-subagents")]
    polls: RefCell<std::collections::HashMap<String, remote::Polling>>,
    /// When the next poll of a remote session is due, as the last settle left it.
    #[cfg(feature = "remote-subagents")]
    poll_at: Cell<Option<u64>>,
    /// Whether this instance has brought the journal in line with durable state (once:
    /// recovery is about what earlier processes left behind).
    recovered: Cell<bool>,
    driving: Cell<bool>,
}

/// Resets the `driving` flag however a drive ends (including being dropped).
struct DriveGuard<'a>(&'a Cell<bool>);

impl Drop for DriveGuard<'_> {
    fn drop(&mut self) {
        self.0.set(false);
    }
}

impl<S: Store> Runner<S> {
    /// A runner over `store`, streaming to `journal`.
    pub fn new(
        store: S,
        agents: Agents,
        models: Rc<dyn Models>,
        journal: impl Into<Journal>,
        host: Rc<dyn Host>,
        config: RunnerConfig,
    ) -> Self {
        Self {
            store,
            agents,
            models,
            journal: journal.into(),
            host,
            config,
            children: Rc::new(NoChildren),
            abort: RefCell::new(AbortSignal::new()),
            interrupt_requested: RefCell::new(None),
            started: RefCell::new(Vec::new()),
            #[cfg(feature = "remote-subagents")]
            remotes: Rc::new(NoRemotes),
            #[cfg(feature = "remote-subagents")]
            polls: RefCell::default(),
            #[cfg(feature = "remote-subagents")]
            poll_at: Cell::new(None),
            recovered: Cell::new(false),
            driving: Cell::new(false),
        }
    }

    /// Lets the runner start and steer child sessions (sub-agents) through `children`.
    pub fn with_children(mut self, children: Rc<dyn Children>) -> Self {
        self.children = children;
        self
    }

    /// Lets the runner run remote sub-agent calls on other deployments through `remotes`.
    #[cfg(feature = "remote-subagents")]
    pub fn with_remotes(mut self, remotes: Rc<dyn Remotes>) -> Self {
        self.remotes = remotes;
        self
    }

    /// Whether a drive is under way in this runner.
    pub fn is_driving(&self) -> bool {
        self.driving.get()
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Whether call `call_id` of session `session_id` has a stored answer.
    pub fn has_answer(&self, session_id: &str, call_id: &str) -> bool {
        let found = self.journal.suspension.find_answer(session_id, call_id);
        matches!(found, Ok(Some(_)))
    }

    fn agent(&self, name: &str) -> Result<Rc<Agent>, RunError> {
        self.agents
            .get(name)
            .ok_or_else(|| RunError::AgentNotFound(name.into()))
    }

    /// A structured log event about `live`'s current run.
    pub(crate) fn log(
        &self,
        live: &Live,
        level: Level,
        event: &str,
        fields: &[(&str, LogValue<'_>)],
    ) {
        let mut all = vec![
            ("session", LogValue::Str(&live.head.id)),
            ("run", LogValue::Str(&live.head.run.run_id)),
        ];
        all.extend_from_slice(fields);
        self.host.log(level, event, &all);
    }

    /// Fails with [`RunError::Aborted`] once `abort` was called during this drive.
    fn ensure_not_aborted(&self) -> Result<(), RunError> {
        if self.abort.borrow().is_aborted() {
            Err(RunError::Aborted)
        } else {
            Ok(())
        }
    }

    fn emitter(&self, head: &SessionHead, step: Option<u32>) -> Emitter {
        Emitter::new(self.journal.stream.clone(), self.host.clone(), head, step)
    }

    /// Loads a session without its transcript (what request-driven operations need).
    async fn load(&self, id: &str) -> Result<Live, RunError> {
        self.load_with(id, !self.driving.get(), false).await
    }

    /// The durable head, for a client about to read the stream. Like every request, the
    /// first one after a restart brings the journal in line with it: a batch whose commit
    /// landed just before the crash is released (a completed session gets its `end`
    /// although no drive will run again), torn chunks get `stream_resync`.
    pub async fn head_for_stream(&self, id: &str) -> Result<SessionHead, RunError> {
        Ok(self.load(id).await?.head)
    }

    async fn load_with(
        &self,
        id: &str,
        recover: bool,
        with_transcript: bool,
    ) -> Result<Live, RunError> {
        let loaded = self
            .store
            .load(id)
            .await?
            .ok_or_else(|| StoreError::NotFound(id.into()))?;
        let transcript = if with_transcript {
            self.store
                .messages(id, 0, loaded.head.message_count)
                .await?
        } else {
            Vec::new()
        };
        let mut answers = Vec::new();
        for p in &loaded.head.pending {
            if let Some(answer) = self.journal.suspension.find_answer(id, &p.tool_call_id)? {
                answers.push((p.tool_call_id.clone(), answer));
            }
        }
        let live = Live {
            head: loaded.head,
            state: loaded.state,
            transcript,
            answers,
            interrupt: loaded.interrupt,
            #[cfg(feature = "persistent-children")]
            notified: Vec::new(),
            ahead: None,
        };
        if recover && !self.recovered.replace(true) {
            self.resync(&live);
        }
        Ok(live)
    }

    fn resync(&self, live: &Live) {
        let recovery = self
            .journal
            .stream
            .recover(live.head.version, &live.head.commit_id);
        if let Some(from_sequence) = recovery.torn_from {
            let emitter = self.emitter(&live.head, None);
            emitter.chunk(crate::chunk::ChunkBody::StreamResync {
                checkpoint_id: live.head.checkpoint_id.clone().unwrap_or_default(),
                step_count: live.head.step_count,
                message_count: live.head.message_count,
                from_sequence,
                reason: crate::chunk::ResyncReason::CrashRecovery,
            });
            self.journal.stream.confirm(live.head.version);
        }
    }

    /// Commits `commit` with compare-and-set, releasing `post` (events that must only be
    /// seen once the commit is durable) after it lands, and updates `live`.
    async fn commit(
        &self,
        live: &mut Live,
        commit: Commit,
        post: Vec<crate::chunk::StreamEvent>,
    ) -> Result<(), RunError> {
        let commit_id = self.stage(&live.head, post);
        let mut commit = commit;
        commit.head.commit_id = commit_id.clone();
        let head = commit.head.clone();
        let messages = commit.messages.clone();
        let truncate = commit.truncate_messages_to;
        let clears_interrupt = commit.clear_interrupt;
        let version = self
            .land(&live.head.id, &commit_id, live.head.version, commit)
            .await?;
        live.head = head;
        live.head.version = version;
        if let Some(n) = truncate {
            live.transcript.truncate(n as usize);
        }
        live.transcript.extend(messages);
        if clears_interrupt {
            live.interrupt = None;
        }
        Ok(())
    }

    /// Stages `post` under a new commit id for the commit after `head`.
    fn stage(&self, head: &SessionHead, post: Vec<crate::chunk::StreamEvent>) -> String {
        let commit_id = self.host.new_id("commit");
        self.journal
            .stream
            .stage(&commit_id, head.version + 1, post);
        commit_id
    }

    /// Sends a staged commit; its batch is released if it lands, dropped if not. Boxed:
    /// every way a run commits shares one copy of the store's commit (a smaller bundle).
    fn land<'a>(
        &'a self,
        id: &'a str,
        commit_id: &'a str,
        expected: u64,
        commit: Commit,
    ) -> LocalBoxFuture<'a, Result<u64, RunError>> {
        Box::pin(async move {
            let result = self.store.commit(id, expected, commit).await;
            let version = result.inspect_err(|_| self.journal.stream.discard(commit_id))?;
            self.journal.stream.release(commit_id);
            Ok(version)
        })
    }

    /// Does the session's pending work, up to `max_steps` model steps: resolves answered
    /// or expired calls, honours interrupts, runs steps and commits each. Returns when
    /// the session suspends, ends, or the budget is spent.
    pub async fn drive(&self, id: &str, max_steps: u32) -> Result<Progress, RunError> {
        if self.driving.replace(true) {
            return Ok(Progress::Busy);
        }
        let _guard = DriveGuard(&self.driving);
        // A fresh signal before the first await, so an abort that arrives at any await
        // of this drive reaches its tools.
        *self.abort.borrow_mut() = AbortSignal::new();
        // Before anything else, bring the journal in line with durable state: a previous
        // process may have died mid-step (the stream is told with `stream_resync`).
        let mut live = self.load_with(id, true, true).await?;
        let agent = self.agent(&live.head.agent)?;
        let mut steps = 0;
        let mut stale = 0;
        loop {
            match self.advance(&mut live, &agent, &mut steps, max_steps).await {
                Ok(Some(progress)) => return Ok(progress),
                Ok(None) => {}
                // An abort is being committed by `abort`; this drive must not commit.
                Err(RunError::Aborted) => return Ok(Progress::Idle(SessionStatus::Aborted)),
                Err(RunError::Store(StoreError::Stale { .. })) if stale < 5 => {
                    // Someone else committed (an abort, say): continue from their state.
                    stale += 1;
                    live = self.load_with(id, false, true).await?;
                }
                // Content over a storage limit: nothing was written, and redoing the step
                // would only repeat it. The run fails with the reason instead.
                Err(RunError::Store(e @ StoreError::TooLarge { .. })) => {
                    self.fail_run(&mut live, crate::error::ErrorInfo::of(&e))
                        .await?;
                    return Ok(Progress::Idle(SessionStatus::Failed));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// One transition of the session; `None` means "keep going".
    async fn advance(
        &self,
        live: &mut Live,
        agent: &Agent,
        steps: &mut u32,
        max_steps: u32,
    ) -> Result<Option<Progress>, RunError> {
        if self.abort.borrow().is_aborted() {
            // The abort is being committed by `abort`: nothing more goes out.
            self.drop_ahead(live);
            return Err(RunError::Aborted);
        }
        if live.interrupt.is_none() {
            live.interrupt = self.interrupt_requested.borrow().clone();
        }
        let step_next = live.head.status == SessionStatus::Active
            && live.interrupt.is_none()
            && live.head.pending.is_empty()
            && live.head.run.step_count < agent.max_steps()
            && *steps < max_steps;
        if !step_next {
            // Only a model call goes out together with the commit sent ahead.
            self.settle(live).await?;
        }
        // A persistent child's next turn, once the turn before it stopped or ended (or
        // after a crash that cut its start off).
        #[cfg(feature = "persistent-children")]
        if let (
            SessionStatus::Interrupted | SessionStatus::Completed | SessionStatus::Failed,
            Some(then),
        ) = (
            live.head.status,
            live.interrupt.as_ref().and_then(|r| r.then.clone()),
        ) && live.head.pending.is_empty()
        {
            self.follow_up(live, then).await?;
            return Ok(None);
        }
        if live.head.status != SessionStatus::Active {
            return Ok(Some(Progress::Idle(live.head.status)));
        }
        // A follow-up waits for the calls its turn waits on: it is taken once they are
        // answered and the turn reaches a step boundary (or ends).
        #[cfg(feature = "persistent-children")]
        let deferred = !live.head.pending.is_empty()
            && live.interrupt.as_ref().is_some_and(|r| r.then.is_some());
        #[cfg(not(feature = "persistent-children"))]
        let deferred = false;
        if !deferred && let Some(request) = live.interrupt.clone() {
            #[cfg(feature = "persistent-children")]
            let then = request.then.clone();
            self.commit_interrupted(live, request).await?;
            #[cfg(feature = "persistent-children")]
            if let Some(then) = then {
                self.follow_up(live, then).await?;
                return Ok(None);
            }
            return Ok(Some(Progress::Idle(SessionStatus::Interrupted)));
        }
        if !live.head.pending.is_empty() {
            return self.resolve_pending(live, agent).await;
        }
        if live.head.run.step_count >= agent.max_steps() {
            let error = ErrorInfo {
                code: "max_steps_exceeded".into(),
                message: format!("The run reached its limit of {} steps", agent.max_steps()),
                retryable: false,
            };
            self.fail_run(live, error).await?;
            return Ok(Some(Progress::Idle(SessionStatus::Failed)));
        }
        if *steps >= max_steps {
            return Ok(Some(Progress::Yielded));
        }
        let attempt = self
            .journal
            .attempts
            .begin_step(&live.head.run.run_id, live.head.step_count + 1);
        if attempt > self.config.max_step_attempts {
            let error = ErrorInfo {
                code: "framework_recovery_exhausted".into(),
                message: format!(
                    "Step {} was started {} times without committing; the run stops instead of retrying \
                     forever",
                    live.head.step_count + 1,
                    attempt - 1
                ),
                retryable: true,
            };
            self.settle(live).await?;
            self.fail_run(live, error).await?;
            return Ok(Some(Progress::Idle(SessionStatus::Failed)));
        }
        self.model_step(live, agent).await?;
        *steps += 1;
        Ok(None)
    }

    async fn commit_interrupted(
        &self,
        live: &mut Live,
        request: InterruptRequest,
    ) -> Result<(), RunError> {
        let mut head = live.head.clone();
        head.status = SessionStatus::Interrupted;
        head.run.status = RunStatus::Interrupted;
        head.updated_at = self.host.now_ms();
        let emitter = self.emitter(&head, None);
        let post = vec![emitter.event(crate::chunk::ChunkBody::RunInterrupted {
            reason: request.reason,
        })];
        // A follow-up keeps the request until its turn has started.
        #[cfg(feature = "persistent-children")]
        let clear = request.then.is_none();
        #[cfg(not(feature = "persistent-children"))]
        let clear = true;
        self.commit(live, ops::head_only(head, clear), post).await?;
        let step = u64::from(live.head.step_count);
        let fields = [("step", LogValue::Num(step))];
        self.log(live, Level::Info, "run_interrupted", &fields);
        // Honoured: the durable flag was cleared by the commit, the in-memory one here.
        self.interrupt_requested.borrow_mut().take();
        Ok(())
    }
}
