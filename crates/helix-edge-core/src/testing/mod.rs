//! A testing kit (feature `testing`): run agents through the durable run loop natively,
//! with everything the platform provides played in memory — the store
//! ([`MemoryStore`]), the journal ([`MemoryJournal`]), a manual clock
//! ([`ManualHost`]) and a scripted model ([`ScriptedModel`]) — and check what must hold
//! after any run ([`Scenario::assert_consistent`]).
//!
//! ```
//! use helix_edge_core::agent::{Agent, Agents};
//! use helix_edge_core::testing::Scenario;
//!
//! let agents = Agents::new().with(Agent::builder("helper").build().unwrap()).unwrap();
//! let scenario = Scenario::new(agents);
//! scenario.model.text("Hello.");
//! let runner = scenario.runner("p1");
//! scenario.create(&runner, "helper", "Hi");
//! scenario.drive(&runner);
//! assert_eq!(scenario.session().head.status.as_str(), "completed");
//! scenario.assert_consistent(&serde_json::json!({}));
//! ```

// A testing kit fails tests by panicking, with the reason; it is never in a worker.
#![allow(clippy::panic)]

mod exec;
#[cfg(feature = "objects")]
mod objects;

pub use exec::{block, run_until_stalled, yield_now};
#[cfg(feature = "objects")]
pub use objects::MemoryObjects;

use crate::agent::Agents;
use crate::chunk::{ChunkBody, StreamEvent};
use crate::host::{Host, ManualHost};
use crate::journal::MemoryJournal;
use crate::message::Message;
use crate::model::{Model, OneModel};
use crate::runner::{CreateSession, Progress, Runner, RunnerConfig, Submission};
use crate::scripted::ScriptedModel;
use crate::state::apply_all;
use crate::store::{Loaded, MemoryStore, PendingCall, Store};
use exec::{Flag, poll_while_woken};
use serde_json::Value;
use std::collections::HashMap;
use std::pin::pin;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// The session id a scenario's session has.
pub const SESSION: &str = "s1";

/// The runner a scenario makes.
pub type TestRunner = Runner<Rc<MemoryStore>>;

/// Agents run in memory: one store and journal that survive "restarts" (runners of
/// other processes over them), a clock that moves only when told, a scripted model.
pub struct Scenario {
    /// The store every runner of the scenario shares.
    pub store: Rc<MemoryStore>,
    /// The session's journal (its stream, step attempts, answers and claims).
    pub journal: Rc<MemoryJournal>,
    /// The clock and timers.
    pub host: Rc<ManualHost>,
    /// The model every agent runs on: push its answers before driving.
    pub model: Rc<ScriptedModel>,
    /// The agents.
    pub agents: Agents,
}

impl Scenario {
    /// A scenario of `agents`, at a fixed time.
    pub fn new(agents: Agents) -> Self {
        Self {
            store: Rc::new(MemoryStore::yielding()),
            journal: Rc::new(MemoryJournal::new()),
            host: Rc::new(ManualHost::new(1_795_000_000_000, "")),
            model: Rc::new(ScriptedModel::new()),
            agents,
        }
    }

    /// A runner of process `instance` over the scenario's store and journal (a second
    /// one is another process: a restart).
    pub fn runner(&self, instance: &str) -> TestRunner {
        self.runner_on(instance, self.model.clone())
    }

    /// A runner of process `instance` whose agents run on `model` instead of the
    /// scripted one (the `demo` model with your script, say).
    pub fn runner_on(&self, instance: &str, model: Rc<dyn Model>) -> TestRunner {
        Runner::new(
            self.store.clone(),
            self.agents.clone(),
            Rc::new(OneModel(model)),
            self.journal.clone(),
            self.host.clone(),
            RunnerConfig::new(instance),
        )
    }

    /// A runner that shares nothing with the others but the store and the model (its
    /// own journal: a process whose journal was lost).
    pub fn stranger(&self, instance: &str) -> (TestRunner, Rc<MemoryJournal>) {
        let journal = Rc::new(MemoryJournal::new());
        let runner = Runner::new(
            self.store.clone(),
            self.agents.clone(),
            Rc::new(OneModel(self.model.clone())),
            journal.clone(),
            Rc::new(ManualHost::new(self.host.now_ms(), instance)),
            RunnerConfig::new(instance),
        );
        (runner, journal)
    }

    /// Creates the session [`SESSION`] of `agent` with `message`.
    pub fn create(&self, runner: &TestRunner, agent: &str, message: &str) {
        let created = block(runner.create(CreateSession::new(SESSION, agent, message)));
        if let Err(e) = created {
            panic!("creating {SESSION}: {e}");
        }
    }

    /// Drives the session until it stops moving (suspends, ends or waits).
    pub fn drive(&self, runner: &TestRunner) -> Progress {
        drive(runner)
    }

    /// Approves (or denies, with `reason`) the pending call `call`.
    pub fn approve(&self, runner: &TestRunner, call: &str, approved: bool, reason: Option<&str>) {
        let submission = Submission::Approval {
            tool_call_id: call.into(),
            approved,
            reason: reason.map(str::to_string),
        };
        if let Err(e) = block(runner.submit(SESSION, submission)) {
            panic!("answering {call}: {e}");
        }
    }

    /// Answers the pending client call `call` with `result` (or its error).
    pub fn answer_client(&self, runner: &TestRunner, call: &str, result: Result<Value, String>) {
        let submission = Submission::ClientResult {
            tool_call_id: call.into(),
            outcome: result,
        };
        if let Err(e) = block(runner.submit(SESSION, submission)) {
            panic!("answering {call}: {e}");
        }
    }

    /// The session as stored.
    pub fn session(&self) -> Loaded {
        match block(self.store.load(SESSION)) {
            Ok(Some(loaded)) => loaded,
            other => panic!("loading {SESSION}: {other:?}"),
        }
    }

    /// The calls the session waits on.
    pub fn pending(&self) -> Vec<PendingCall> {
        self.session().head.pending
    }

    /// The transcript.
    pub fn messages(&self) -> Vec<Message> {
        block(self.store.messages(SESSION, 0, 100_000)).unwrap_or_default()
    }

    /// The stream's chunks so far.
    pub fn chunks(&self) -> Vec<ChunkBody> {
        chunks_of(&self.journal.events())
    }

    /// What must hold after any run: the stream's patches (those no `stream_resync`
    /// disowned), replayed from `initial_state`, give the stored state; the transcript
    /// is as long as the head says; every call is answered at most once; and no patch is
    /// empty or replaces the root.
    ///
    /// `initial_state` is the state the session **started** with (the agent's initial
    /// state, or the one its create gave), not the state you expect at the end: assert
    /// that one yourself, on `session().state`.
    ///
    /// ```ignore
    /// assert_eq!(s.session().state, json!({ "todos": ["buy milk"] })); // the end
    /// s.assert_consistent(&json!({ "todos": [] })); // the start the stream replays from
    /// ```
    pub fn assert_consistent(&self, initial_state: &Value) {
        let session = self.session();
        let mut state = initial_state.clone();
        for body in chunks_of(&owned(&self.journal.events())) {
            if let ChunkBody::StatePatch { patches, .. } = body {
                assert!(
                    !patches.is_empty() && patches.iter().all(|p| !p.path().is_empty()),
                    "state patches are non-empty and never replace the root"
                );
                if let Err(e) = apply_all(&mut state, &patches) {
                    panic!("a streamed patch does not apply: {e}");
                }
            }
        }
        assert_eq!(state, session.state, "replayed patches == stored state");
        let messages = self.messages();
        assert_eq!(
            messages.len() as u64,
            session.head.message_count,
            "transcript length matches the head"
        );
        let mut answered = HashMap::new();
        for m in &messages {
            if let Message::Tool { tool_call_id, .. } = m {
                *answered.entry(tool_call_id.clone()).or_insert(0) += 1;
            }
        }
        assert!(
            answered.values().all(|n| *n == 1),
            "every call is answered at most once: {answered:?}"
        );
    }
}

/// `events` (a whole stream, from sequence 1) without those a `stream_resync`
/// disowned: from its `fromSequence` to itself.
pub fn owned(events: &[StreamEvent]) -> Vec<StreamEvent> {
    let mut kept: Vec<(u64, &StreamEvent)> = Vec::new();
    for (seq, event) in (1..).zip(events) {
        if let StreamEvent::Chunk(c) = event
            && let ChunkBody::StreamResync { from_sequence, .. } = c.body
        {
            kept.retain(|(s, _)| *s < from_sequence);
            continue;
        }
        kept.push((seq, event));
    }
    kept.into_iter().map(|(_, e)| e.clone()).collect()
}

/// The chunks among `events`.
pub fn chunks_of(events: &[StreamEvent]) -> Vec<ChunkBody> {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Chunk(c) => Some(c.body.clone()),
            _ => None,
        })
        .collect()
}

/// Drives session [`SESSION`] until it stops moving.
pub fn drive(runner: &TestRunner) -> Progress {
    match block(runner.drive(SESSION, 100)) {
        Ok(progress) => progress,
        Err(e) => panic!("driving {SESSION}: {e}"),
    }
}

/// Drives; each time the drive stalls the clock moves `step_ms` forward (firing the
/// timers it passes), at most `steps` times.
pub fn drive_advancing(
    host: &ManualHost,
    runner: &TestRunner,
    step_ms: u64,
    steps: u32,
) -> Progress {
    let flag = Arc::new(Flag(AtomicBool::new(true)));
    let mut f = pin!(runner.drive(SESSION, 100));
    for _ in 0..=steps {
        if let Some(out) = poll_while_woken(f.as_mut(), &flag) {
            match out {
                Ok(progress) => return progress,
                Err(e) => panic!("driving {SESSION}: {e}"),
            }
        }
        host.advance(step_ms);
    }
    panic!("the drive still waits after {steps} steps of {step_ms} ms");
}

/// Drives until the drive hangs, then drops it: a process that dies mid-step.
pub fn drive_and_crash(runner: &TestRunner) {
    let outcome = run_until_stalled(runner.drive(SESSION, 100));
    assert!(
        outcome.is_none(),
        "the drive was expected to hang, but finished: {outcome:?}"
    );
}
