//! The suspension context: what a suspended run waits for, kept with the session's
//! stream in its own object, so that nothing between an approval and its tool waits on
//! the database.
//! - The first [`answer`](Suspension::answer) to a pending call is stored and kept; a
//!   later one gets [`AnswerOutcome::AlreadyAnswered`]. It is durable before it is
//!   acknowledged.
//! - An approved call is [`claim`](Suspension::claim)ed by the runner instance that will
//!   execute it before the tool starts. A claim is never taken over, so an approved call
//!   runs at most once.
//! - An answer the session passed on to a descendant (a call pending in a sub-agent's
//!   session) is [`route`](Suspension::route)d: a second answer to it is refused here.
//! - What a session's tools keep privately ([`keep`](Suspension::keep), read through a
//!   [`Vault`](super::Vault)): credentials stay in the object, never in the record.

use crate::store::{Answer, AnswerOutcome, StoreError};
use std::cell::RefCell;
use std::collections::HashMap;

/// Answers, claims and routes of a session's pending calls.
pub trait Suspension {
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
    /// Records that the answer to `tool_call_id` went to descendant session `owner`;
    /// `false` if an answer to it was routed before (the first one stands).
    fn route(&self, tool_call_id: &str, owner: &str) -> Result<bool, StoreError>;
    /// The descendant an answer to `tool_call_id` was routed to, if any.
    fn routed(&self, tool_call_id: &str) -> Result<Option<String>, StoreError>;
    /// Keeps `value` under `key` for session `session_id` (`None` forgets it).
    fn keep(&self, session_id: &str, key: &str, value: Option<&str>) -> Result<(), StoreError>;
    /// What is kept under `key` for session `session_id`.
    fn kept(&self, session_id: &str, key: &str) -> Result<Option<String>, StoreError>;
}

/// A suspension context in memory, for tests.
#[derive(Debug, Default)]
pub struct MemorySuspension {
    claims: RefCell<HashMap<(String, u32, String), String>>,
    answers: RefCell<HashMap<(String, String), Answer>>,
    routes: RefCell<HashMap<String, String>>,
    kept: RefCell<HashMap<(String, String), String>>,
}

impl MemorySuspension {
    /// Who claimed call `tool_call_id`, whichever step or run it was pending in.
    pub fn claimed_by(&self, tool_call_id: &str) -> Option<String> {
        let claims = self.claims.borrow();
        let mut owners = claims.iter().filter(|((_, _, c), _)| c == tool_call_id);
        owners.next().map(|(_, owner)| owner.clone())
    }
}

impl Suspension for MemorySuspension {
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

    fn route(&self, tool_call_id: &str, owner: &str) -> Result<bool, StoreError> {
        let mut routes = self.routes.borrow_mut();
        if routes.contains_key(tool_call_id) {
            return Ok(false);
        }
        routes.insert(tool_call_id.into(), owner.into());
        Ok(true)
    }

    fn routed(&self, tool_call_id: &str) -> Result<Option<String>, StoreError> {
        Ok(self.routes.borrow().get(tool_call_id).cloned())
    }

    fn keep(&self, session_id: &str, key: &str, value: Option<&str>) -> Result<(), StoreError> {
        let key = (session_id.to_string(), key.to_string());
        let mut kept = self.kept.borrow_mut();
        match value {
            Some(value) => kept.insert(key, value.into()),
            None => kept.remove(&key),
        };
        Ok(())
    }

    fn kept(&self, session_id: &str, key: &str) -> Result<Option<String>, StoreError> {
        let key = (session_id.to_string(), key.to_string());
        Ok(self.kept.borrow().get(&key).cloned())
    }
}
