//! The durable run loop. A [`Runner`] owns nothing that matters only in memory: every
//! operation loads the session from the [`Store`], changes it with one compare-and-set
//! commit, and streams through the [`Journal`]. At a human-in-the-loop boundary the run
//! commits its pending calls and returns; a fresh runner built from the store alone
//! resumes it.
//!
//! # Where things are
//! - [`machine`]: **the step machine** — what a drive does next, a pure function of the
//!   session, the agent's limit and the drive's budget, with every transition listed.
//!   `drive` carries out what it decides, one transition at a time.
//! - A model step: `step` (call the model, run the calls, commit; `prompted`: the
//!   system prompt's part a run read as it started, within the model call), `calls` (normalise
//!   and classify the model's calls), `plan` (run them in dependency order, over
//!   `step_calls`;
//!   `instancing`: a call run once per item, which `instances` does with the feature
//!   `plans`), `exec`
//!   (the [`ToolRunner`](exec::ToolRunner) that runs server calls), `results` (how a
//!   call ends), `conclude` (what the step leads to, decided purely), `commit` (the
//!   step's commit and the events it releases), `shown` (live state: tools' writes
//!   streamed as they make them, corrected by the commit).
//! - `resume`: a suspended step resumed from its answers; `waited`: how long each
//!   call waited.
//! - `hooked`: the agent's hooks fired in a step or a resumption, their writes joining
//!   its commit. [`Observer`] (`observe`): what the runner tells an observer — slices,
//!   model calls, tool calls, waits, commits (telemetry is built on it).
//! - `pipeline`: the commit pipeline — commits landing, and a step's commit sent ahead
//!   with the next model call.
//! - [`waits`]: work a run waits on outside its session — one abstraction, each kind
//!   (sub-agents, persistent children, remote sub-agents) a module registered by
//!   feature.
//! - `ops`: the request-driven operations — create, answer (and route answers below),
//!   follow-ups and new runs, interrupt/resume/abort, retry and fork, delete.
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

mod calls;
mod commit;
mod conclude;
mod drive;
mod emit;
mod error;
mod exec;
mod finish;
mod hooked;
#[cfg(feature = "plans")]
mod instances;
mod instancing;
pub mod machine;
mod observe;
mod ops;
mod pipeline;
mod plan;
mod prompted;
mod results;
mod resume;
mod shown;
mod step;
mod step_calls;
mod tooled;
mod waited;
pub mod waits;

pub use error::RunError;
pub use observe::{ModelCall, Observer, ToolEnd, Unobserved, Waited};
pub use ops::{CreateSession, Created, Routed, Submission};
#[cfg(feature = "schedules")]
pub(crate) use ops::{check_options, ensure_idle};
pub use waits::{
    ChildEnded, ChildOrder, Children, NoChildren, WaitKind, child_outcome, child_session_id,
    ended_report,
};

use crate::abort::AbortSignal;
use crate::agent::{Agent, Agents};
use crate::chunk::{ChunkBody, ResyncReason};
use crate::host::{Host, Level, LogValue};
use crate::journal::Journal;
use crate::message::Message;
use crate::model::Models;
use crate::store::{
    Answer, InterruptRequest, SessionHead, SessionStatus, Store, StoreError, SubSession,
};
use emit::Emitter;
use exec::ToolRunner;
use pipeline::{Ahead, Pipeline};
use serde_json::Value;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// Running a call once per item (`_forEach`), as this build has it: the feature
/// `plans` registers it.
pub(crate) const INSTANCING: &[instancing::Instancing] = &[
    #[cfg(feature = "plans")]
    instances::INSTANCING,
];

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
        /// The earliest client deadline among the unanswered calls (or the next look
        /// a kind of outside work asked for).
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
    /// A commit `live` already shows that has not landed yet (see [`pipeline`]).
    pub ahead: Option<Ahead>,
    /// Records of children whose ends the step being taken tells the model about; its
    /// commit stores them.
    pub notified: Vec<SubSession>,
}

impl Live {
    /// The stored answer to pending call `call_id`.
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
    /// Reaches the child sessions of this deployment (the session tree).
    children: Rc<dyn Children>,
    /// The kinds of outside work this runner can wait on.
    waits: Vec<WaitKind<S>>,
    /// Raised by `abort` for the tools of the drive in progress.
    abort: RefCell<AbortSignal>,
    /// An interrupt requested while a drive is in progress: the durable flag is what a
    /// later drive sees; this is how the drive in progress sees it at its next step.
    interrupt_requested: RefCell<Option<InterruptRequest>>,
    /// Whether this instance has brought the journal in line with durable state (once:
    /// recovery is about what earlier processes left behind).
    recovered: Cell<bool>,
    driving: Cell<bool>,
    /// Told what the runner does (telemetry).
    observer: Rc<dyn Observer>,
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
            waits: Vec::new(),
            abort: RefCell::new(AbortSignal::new()),
            interrupt_requested: RefCell::new(None),
            recovered: Cell::new(false),
            driving: Cell::new(false),
            observer: Rc::new(Unobserved),
        }
    }

    /// Tells `observer` what the runner does (see [`Observer`]).
    pub fn with_observer(mut self, observer: Rc<dyn Observer>) -> Self {
        self.observer = observer;
        self
    }

    /// Lets the runner start and steer child sessions through `children`.
    pub fn with_children(mut self, children: Rc<dyn Children>) -> Self {
        self.children = children;
        self
    }

    /// Lets the runner wait on these kinds of outside work (sub-agents, persistent
    /// children, remote sub-agents), in this order.
    pub fn with_waits(mut self, kinds: impl IntoIterator<Item = WaitKind<S>>) -> Self {
        self.waits.extend(kinds);
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

    /// Session `session_id`'s vault: what its tools (and its object) keep privately.
    pub fn vault(&self, session_id: &str) -> crate::journal::Vault {
        crate::journal::Vault::new(session_id, self.journal.suspension.clone())
    }

    /// The agents it runs.
    pub fn agents(&self) -> &Agents {
        &self.agents
    }

    /// Whether call `call_id` of session `session_id` has a stored answer.
    pub fn has_answer(&self, session_id: &str, call_id: &str) -> bool {
        let found = self.journal.suspension.find_answer(session_id, call_id);
        matches!(found, Ok(Some(_)))
    }

    pub(crate) fn agent(&self, name: &str) -> Result<Rc<Agent>, RunError> {
        self.agents
            .get(name)
            .ok_or_else(|| match self.agents.needs(name) {
                Some(needs) => RunError::AgentNotConfigured {
                    agent: name.into(),
                    needs: needs.into(),
                },
                None => RunError::AgentNotFound(name.into()),
            })
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

    /// The commit pipeline of this runner's store and stream.
    fn pipeline(&self) -> Pipeline<'_, S> {
        Pipeline {
            store: &self.store,
            stream: &self.journal.stream,
            host: &self.host,
            observer: &self.observer,
        }
    }

    /// What runs this drive's server calls.
    fn tools(&self) -> ToolRunner<'_> {
        ToolRunner {
            host: &self.host,
            abort: self.abort.borrow().clone(),
            suspension: &self.journal.suspension,
            observer: &self.observer,
        }
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
                .lend_transcript(id, loaded.head.message_count)
                .await?
        } else {
            Vec::new()
        };
        let mut answers = Vec::new();
        for p in &loaded.head.pending {
            if let Some(answer) = self.journal.suspension.find_answer(id, &p.answer_id())? {
                answers.push((p.tool_call_id.clone(), answer));
            }
        }
        let live = Live {
            head: loaded.head,
            state: loaded.state,
            transcript,
            answers,
            interrupt: loaded.interrupt,
            ahead: None,
            notified: Vec::new(),
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
            self.journal.stream.emit(torn(
                &self.emitter(&live.head, None),
                &live.head,
                from_sequence,
            ));
            self.journal.stream.confirm(live.head.version);
        }
    }
}

/// The `stream_resync` that disowns the live chunks from `from_sequence` on (a step
/// that never committed), naming where the session stands: `head`.
fn torn(emitter: &Emitter, head: &SessionHead, from_sequence: u64) -> crate::chunk::StreamEvent {
    emitter.event(ChunkBody::StreamResync {
        checkpoint_id: head.checkpoint_id.clone().unwrap_or_default(),
        step_count: head.step_count,
        message_count: head.message_count,
        from_sequence,
        reason: ResyncReason::CrashRecovery,
    })
}
