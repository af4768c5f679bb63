//! The session's journal as the runner sees it: three contracts the platform keeps in
//! the session's Durable Object (its own SQLite) and tests keep in memory.
//! - [`StreamLog`]: the ordered events of the SSE stream, and the bookkeeping that
//!   keeps the stream consistent with committed state across crashes.
//! - [`StepAttempts`]: how often each step began (crash loops end the run).
//! - [`Suspension`]: the answers, claims and routes a suspended run waits on, and the
//!   session's [`Vault`] (what its tools keep privately).
//!
//! [`conformance`] holds the suites every backend of each passes.

mod attempts;
pub mod conformance;
mod stream;
mod suspension;
mod vault;

pub use attempts::{MemoryAttempts, StepAttempts};
pub use stream::{Frame, MemoryStreamLog, Recovery, StreamLog};
pub use suspension::{MemorySuspension, Suspension};
pub use vault::Vault;

use crate::chunk::StreamEvent;
use crate::store::{Answer, AnswerOutcome, StoreError};
use std::rc::Rc;

/// The three parts of a session's journal, as a runner holds them.
#[derive(Clone)]
pub struct Journal {
    /// The stream.
    pub stream: Rc<dyn StreamLog>,
    /// Step attempts.
    pub attempts: Rc<dyn StepAttempts>,
    /// The suspension context.
    pub suspension: Rc<dyn Suspension>,
}

impl<T: StreamLog + StepAttempts + Suspension + 'static> From<Rc<T>> for Journal {
    /// One backend that keeps all three.
    fn from(all: Rc<T>) -> Self {
        Self {
            stream: all.clone(),
            attempts: all.clone(),
            suspension: all,
        }
    }
}

/// All three parts in memory, for tests. Survives "restarts" of runners that share it.
#[derive(Debug, Default)]
pub struct MemoryJournal {
    stream: MemoryStreamLog,
    attempts: MemoryAttempts,
    suspension: MemorySuspension,
}

impl MemoryJournal {
    /// An empty journal.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every event so far, in sequence order (sequence = index + 1).
    pub fn events(&self) -> Vec<StreamEvent> {
        self.stream.events()
    }

    /// Who claimed call `tool_call_id`, whichever step or run it was pending in.
    pub fn claimed_by(&self, tool_call_id: &str) -> Option<String> {
        self.suspension.claimed_by(tool_call_id)
    }
}

impl StreamLog for MemoryJournal {
    fn emit(&self, event: StreamEvent) -> u64 {
        self.stream.emit(event)
    }
    fn next_sequence(&self) -> u64 {
        self.stream.next_sequence()
    }
    fn stage(&self, commit_id: &str, version: u64, events: Vec<StreamEvent>) {
        self.stream.stage(commit_id, version, events)
    }
    fn release(&self, commit_id: &str) {
        self.stream.release(commit_id)
    }
    fn discard(&self, commit_id: &str) {
        self.stream.discard(commit_id)
    }
    fn recover(&self, version: u64, commit_id: &str) -> Recovery {
        self.stream.recover(version, commit_id)
    }
    fn confirm(&self, version: u64) {
        self.stream.confirm(version)
    }
    fn unconfirmed_from(&self) -> Option<u64> {
        self.stream.unconfirmed_from()
    }
    fn replay(&self, after: u64) -> Vec<Frame> {
        self.stream.replay(after)
    }
}

impl StepAttempts for MemoryJournal {
    fn begin_step(&self, run_id: &str, step: u32) -> u32 {
        self.attempts.begin_step(run_id, step)
    }
}

impl Suspension for MemoryJournal {
    fn answer(
        &self,
        session: &str,
        call: &str,
        answer: &Answer,
    ) -> Result<AnswerOutcome, StoreError> {
        self.suspension.answer(session, call, answer)
    }
    fn find_answer(&self, session: &str, call: &str) -> Result<Option<Answer>, StoreError> {
        self.suspension.find_answer(session, call)
    }
    fn claim(
        &self,
        run: &str,
        step: u32,
        call: &str,
        instance: &str,
    ) -> Result<String, StoreError> {
        self.suspension.claim(run, step, call, instance)
    }
    fn route(&self, call: &str, owner: &str) -> Result<bool, StoreError> {
        self.suspension.route(call, owner)
    }
    fn routed(&self, call: &str) -> Result<Option<String>, StoreError> {
        self.suspension.routed(call)
    }
    fn keep(&self, session: &str, key: &str, value: Option<&str>) -> Result<(), StoreError> {
        self.suspension.keep(session, key, value)
    }
    fn kept(&self, session: &str, key: &str) -> Result<Option<String>, StoreError> {
        self.suspension.kept(session, key)
    }
}
