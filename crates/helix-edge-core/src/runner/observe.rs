//! What a runner tells an [`Observer`] as a run goes: each slice of work on a run, each
//! model call, each tool call's end, each wait on a person, a client or sub-agents, and
//! each commit — with the times and the records at hand, and nothing computed for it.
//! Telemetry (OpenTelemetry spans: the feature `traces`) is built on it; every method
//! has an empty default.

use crate::error::ProviderError;
use crate::message::{Message, ToolCall};
use crate::model::{ModelName, ModelTurn};
use crate::store::{Owner, PendingCall, SessionHead};

/// One model call.
pub struct ModelCall<'a> {
    /// The step (1-based, the session's).
    pub step: u32,
    /// The model that answered.
    pub name: &'a ModelName,
    /// The system prompt and the transcript it was sent.
    pub prompt: (&'a str, &'a [Message]),
    /// When it was sent, its first delta arrived (if one did), and it ended (ms).
    pub times: (u64, Option<u64>, u64),
    /// Its answer, or why there is none.
    pub outcome: Result<&'a ModelTurn, &'a ProviderError>,
}

/// One tool call's end: run by the server, answered by a client, denied or timed out.
pub struct ToolEnd<'a> {
    /// The step it was made in.
    pub step: u32,
    /// The call (arguments as it ran with them).
    pub call: &'a ToolCall,
    /// Its result message.
    pub result: &'a Message,
    /// When it started and ended (ms); the same instant for a call that did not run
    /// here.
    pub times: (u64, u64),
    /// Who approved or denied it, when a person did.
    pub decided_by: Option<&'a Owner>,
    /// `approved`, `denied`, `client` (a client's result), `answered` (a question the
    /// call asked mid-call, answered), `expired`, `child` (a sub-agent's) or `server`
    /// (no decision).
    pub answer: &'static str,
}

/// An end of a wait: the run was suspended on `calls` from `since` until `now` (ms).
pub struct Waited<'a> {
    /// `client_tool` or `awaiting_children`.
    pub reason: &'a str,
    /// The calls it waited on.
    pub calls: &'a [PendingCall],
    /// When it suspended.
    pub since: u64,
}

/// Told what a runner does (see the module docs). Everything between a drive's
/// `slice_started` and its `slice_ended` belongs to that slice of `session`'s run.
pub trait Observer {
    /// A drive begins work on `head`'s run at `now` (a slice: a start, a resumption
    /// or a continuation).
    fn slice_started(&self, _head: &SessionHead, _now: u64) {}
    /// That drive stops at `now`, leaving `head` (suspended, ended or still going).
    fn slice_ended(&self, _head: &SessionHead, _now: u64) {}
    /// A new run starts at `now` (`after`) where `before`'s ended or was interrupted;
    /// within a drive, the slice goes on with it.
    fn run_started(&self, _before: &SessionHead, _after: &SessionHead, _now: u64) {}
    /// A run ended outside any drive (an abort): `head` as committed.
    fn run_ended(&self, _head: &SessionHead, _now: u64) {}
    /// A model call ended.
    fn model_called(&self, _session: &str, _call: &ModelCall<'_>) {}
    /// A tool call ended.
    fn tool_ended(&self, _session: &str, _end: &ToolEnd<'_>) {}
    /// A wait ended: the run resumes at `now`.
    fn waited(&self, _session: &str, _wait: &Waited<'_>, _now: u64) {}
    /// A commit closing step `step` was written from `from` to `to` (ms).
    fn committed(&self, _session: &str, _step: u32, _from: u64, _to: u64) {}
}

/// What no observer is told.
pub struct Unobserved;

impl Observer for Unobserved {}
