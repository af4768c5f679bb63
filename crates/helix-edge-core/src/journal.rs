//! The session's stream journal as the runner sees it: the ordered events of the SSE
//! stream, plus the bookkeeping that keeps the stream consistent with committed state
//! across crashes. The platform keeps it in the Durable Object's own storage; tests use
//! [`MemoryJournal`].
//!
//! # Protocol
//! - Live chunks (text deltas, tool starts and ends) are [`emit`](Journal::emit)ted as
//!   they happen; until the step commits they are *unconfirmed*.
//! - Chunks that must only be seen once the commit is durable (state patches,
//!   suspension, `end`) are [`stage`](Journal::stage)d under the commit's unique id,
//!   then [`release`](Journal::release)d after the commit succeeds, or
//!   [`discard`](Journal::discard)ed when it fails. Release also confirms everything
//!   emitted before, and drops batches of rival writes of the same or older versions
//!   (they lost the compare-and-set).
//! - After a restart, [`recover`](Journal::recover) is given the durable head's version
//!   and commit id: the batch of that commit is released if it was not yet (nothing
//!   lost); every other batch is dropped (nothing invented); unconfirmed live chunks are
//!   reported so the runner can send `stream_resync`.
//!
//! # Suspension context
//! It also keeps what a suspended run is waiting for, in the object's own storage: no
//! D1 round trip between an approval and its acknowledgement or its tool.
//! - The first [`answer`](Journal::answer) to a pending call is stored and kept; a later
//!   one gets [`AnswerOutcome::AlreadyAnswered`]. It is durable before it is
//!   acknowledged.
//! - An approved call is [`claim`](Journal::claim)ed by the runner instance that will
//!   execute it before the tool starts. A claim is never taken over, so an approved call
//!   runs at most once.

use crate::chunk::StreamEvent;
use crate::store::{Answer, AnswerOutcome, StoreError};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;

/// What [`Journal::recover`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recovery {
    /// The first sequence number of live chunks from a step that never committed.
    pub torn_from: Option<u64>,
}

/// A session's stream buffer and step bookkeeping.
pub trait Journal {
    /// Appends a live event; returns its sequence number (gap-free from 1).
    fn emit(&self, event: StreamEvent) -> u64;
    /// Holds `events` back until commit `commit_id` (creating `version`) lands.
    fn stage(&self, commit_id: &str, version: u64, events: Vec<StreamEvent>);
    /// Commit `commit_id` landed: appends its batch and confirms everything so far.
    fn release(&self, commit_id: &str);
    /// Commit `commit_id` failed: drops its batch.
    fn discard(&self, commit_id: &str);
    /// Brings the journal in line with the durable head (`version`, `commit_id`).
    fn recover(&self, version: u64, commit_id: &str) -> Recovery;
    /// Marks every event so far as confirmed at `version` (after a resync).
    fn confirm(&self, version: u64);
    /// Records that `step` of `run_id` begins; returns how many times it has begun.
    fn begin_step(&self, run_id: &str, step: u32) -> u32;
    /// Claims call `tool_call_id`, pending at `step` of `run_id`, for runner `instance`
    /// unless another instance claimed it first; returns the owner. An error means the
    /// claim could not be stored, so the call must not run now. A claim is durable before
    /// any side effect of the tool can leave the object.
    fn claim(
        &self,
        run_id: &str,
        step: u32,
        tool_call_id: &str,
        instance: &str,
    ) -> Result<String, StoreError>;
    /// Stores the first answer to call `tool_call_id` of session `session_id`.
    fn answer(
        &self,
        session_id: &str,
        tool_call_id: &str,
        answer: &Answer,
    ) -> Result<AnswerOutcome, StoreError>;
    /// The stored answer to a call of session `session_id`, if any.
    fn find_answer(
        &self,
        session_id: &str,
        tool_call_id: &str,
    ) -> Result<Option<Answer>, StoreError>;
}

/// A journal in memory, for tests. Survives "restarts" of runners that share it.
#[derive(Debug, Default)]
pub struct MemoryJournal {
    events: RefCell<Vec<StreamEvent>>,
    /// Events up to this count are confirmed.
    confirmed: Cell<usize>,
    staged: RefCell<Vec<(String, u64, Vec<StreamEvent>)>>,
    attempts: RefCell<HashMap<(String, u32), u32>>,
    claims: RefCell<HashMap<(String, u32, String), String>>,
    answers: RefCell<HashMap<(String, String), Answer>>,
}

impl MemoryJournal {
    /// An empty journal.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every event so far, in sequence order (sequence = index + 1).
    pub fn events(&self) -> Vec<StreamEvent> {
        self.events.borrow().clone()
    }

    /// Who claimed call `tool_call_id`, whichever step or run it was pending in.
    pub fn claimed_by(&self, tool_call_id: &str) -> Option<String> {
        let claims = self.claims.borrow();
        let mut owners = claims.iter().filter(|((_, _, c), _)| c == tool_call_id);
        owners.next().map(|(_, owner)| owner.clone())
    }
}

impl Journal for MemoryJournal {
    fn emit(&self, event: StreamEvent) -> u64 {
        let mut events = self.events.borrow_mut();
        events.push(event);
        events.len() as u64
    }

    fn stage(&self, commit_id: &str, version: u64, events: Vec<StreamEvent>) {
        self.staged
            .borrow_mut()
            .push((commit_id.into(), version, events));
    }

    fn release(&self, commit_id: &str) {
        let mut staged = self.staged.borrow_mut();
        let mut events = self.events.borrow_mut();
        if let Some(pos) = staged.iter().position(|(id, _, _)| id == commit_id) {
            let (_, version, batch) = staged.remove(pos);
            events.extend(batch);
            staged.retain(|(_, v, _)| *v > version);
        }
        self.confirmed.set(events.len());
    }

    fn discard(&self, commit_id: &str) {
        self.staged
            .borrow_mut()
            .retain(|(id, _, _)| id != commit_id);
    }

    fn recover(&self, _version: u64, commit_id: &str) -> Recovery {
        let landed = self
            .staged
            .borrow()
            .iter()
            .any(|(id, _, _)| id == commit_id);
        if landed {
            self.release(commit_id);
        }
        self.staged.borrow_mut().clear();
        let len = self.events.borrow().len();
        let confirmed = self.confirmed.get();
        Recovery {
            torn_from: (len > confirmed).then_some(confirmed as u64 + 1),
        }
    }

    fn confirm(&self, _version: u64) {
        self.confirmed.set(self.events.borrow().len());
    }

    fn begin_step(&self, run_id: &str, step: u32) -> u32 {
        let mut attempts = self.attempts.borrow_mut();
        let n = attempts.entry((run_id.into(), step)).or_insert(0);
        *n += 1;
        *n
    }

    fn claim(
        &self,
        run_id: &str,
        step: u32,
        tool_call_id: &str,
        instance: &str,
    ) -> Result<String, StoreError> {
        let mut claims = self.claims.borrow_mut();
        let key = (run_id.into(), step, tool_call_id.into());
        Ok(claims.entry(key).or_insert_with(|| instance.into()).clone())
    }

    fn answer(
        &self,
        session_id: &str,
        tool_call_id: &str,
        answer: &Answer,
    ) -> Result<AnswerOutcome, StoreError> {
        let mut answers = self.answers.borrow_mut();
        let key = (session_id.to_string(), tool_call_id.to_string());
        if let Some(existing) = answers.get(&key) {
            return Ok(AnswerOutcome::AlreadyAnswered(existing.clone()));
        }
        answers.insert(key, answer.clone());
        Ok(AnswerOutcome::Stored)
    }

    fn find_answer(
        &self,
        session_id: &str,
        tool_call_id: &str,
    ) -> Result<Option<Answer>, StoreError> {
        let key = (session_id.to_string(), tool_call_id.to_string());
        Ok(self.answers.borrow().get(&key).cloned())
    }
}

#[cfg(test)]
mod tests {
    use super::{Journal, MemoryJournal};
    use crate::store::{Answer, AnswerOutcome};

    #[test]
    fn the_first_answer_to_a_call_wins_and_sessions_do_not_share_answers() {
        let j = MemoryJournal::new();
        let yes = Answer::Approval {
            approved: true,
            reason: None,
        };
        let no = Answer::Approval {
            approved: false,
            reason: Some("no".into()),
        };
        assert_eq!(j.answer("s1", "c1", &yes), Ok(AnswerOutcome::Stored));
        assert_eq!(
            j.answer("s1", "c1", &no),
            Ok(AnswerOutcome::AlreadyAnswered(yes.clone()))
        );
        assert_eq!(j.find_answer("s1", "c1"), Ok(Some(yes)));
        assert_eq!(j.find_answer("s1", "c2"), Ok(None));
        assert_eq!(j.answer("s2", "c1", &no), Ok(AnswerOutcome::Stored));
    }

    #[test]
    fn a_claim_is_never_taken_over() {
        let j = MemoryJournal::new();
        assert_eq!(j.claim("run", 1, "c1", "p1").as_deref(), Ok("p1"));
        assert_eq!(j.claim("run", 1, "c1", "p2").as_deref(), Ok("p1"));
        assert_eq!(j.claim("run", 2, "c1", "p2").as_deref(), Ok("p2"));
    }
}
