//! Running a call once per item (`_forEach`) inside a plan, as the plan runner asks for
//! it: what a round gives it and what it does, one [`Instancing`] that the feature
//! `plans` registers in the runner's `INSTANCING` (`super::instances`). Without the
//! feature the table is empty and a build carries none of it.

use super::RunError;
use super::emit::Emitter;
use super::step_calls::{Ran, StepCalls};
use crate::agent::Agent;
use crate::message::{Message, ToolCall};
use crate::state::PatchOp;
use crate::store::PendingCall;

/// What a round gives the instancing of a call: the state, the agent, what ran, the
/// calls to run, the stream, the time, and how to claim a call in a resumption.
#[allow(
    dead_code,
    reason = "read by the instancing a build registers (feature `plans`)"
)]
pub(crate) struct Round<'a> {
    pub state: &'a serde_json::Value,
    pub agent: &'a Agent,
    pub ran: &'a mut Ran,
    pub runs: &'a mut Vec<(usize, ToolCall, Option<String>)>,
    pub emitter: &'a Emitter,
    pub now: u64,
    pub claim: &'a dyn Fn(&ToolCall) -> Result<bool, RunError>,
}

/// Running a call once per item (`_forEach`): `super::instances`, which the feature
/// `plans` registers in the runner's `INSTANCING`.
pub(crate) struct Instancing {
    /// Starts a call's instances (their arguments and the output path).
    pub start: StartFn,
    /// A call's result, once all its instances have ended (the write storing it).
    pub gather: GatherFn,
    /// The result of an instance the round ran (its run's number among the round's).
    pub ended: fn(&mut StepCalls<'_>, &mut Ran, usize, Message),
    /// The result of an answered pending call, kept as an instance's where it is one.
    pub answered: fn(&[ToolCall], &PendingCall, Message) -> Message,
    /// The transcript as the model reads it, when it holds instances' results (they
    /// are read gathered, in their calls' own results).
    pub prompt: fn(&[Message]) -> Option<Vec<Message>>,
}

type StartFn = fn(
    &mut Round<'_>,
    &mut StepCalls<'_>,
    usize,
    (Vec<serde_json::Value>, Option<String>),
) -> Result<(), RunError>;
type GatherFn =
    fn(&mut StepCalls<'_>, usize, &mut Ran, &serde_json::Value, &Emitter) -> Option<PatchOp>;
