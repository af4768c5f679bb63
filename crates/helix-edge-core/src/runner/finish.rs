//! A step's finishing calls — `finish_with` tools in order, then `__finish__` — run
//! after every other call of the step and see all their writes. When some of the
//! step's calls wait on a person or a client, the finishing calls wait too: they stay
//! without a result while the step is suspended, and the resumption runs them once
//! those calls are answered (a denial is a result like any other), so a human's pending
//! approval is never discarded by a finish in the same step.

use super::calls::{Plan, plan};
use super::conclude::finish_output;
use super::emit::Emitter;
use super::exec::{Run, merge_into};
use super::plan::{prepare_call, suspended_calls};
use super::results::{end_skipped, end_without_running};
use super::{Live, RunError, Runner};
use crate::agent::Agent;
use crate::error::ToolError;
use crate::message::{Message, ToolCall};
use crate::state::PatchOp;
use crate::store::{PendingCall, PendingKind, Store};
use serde_json::Value;

/// Whether the step's finishing calls wait for these pending calls (any that waits on
/// a person or a client: all but a child's).
pub(crate) fn finish_waits(pending: &[PendingCall]) -> bool {
    pending.iter().any(|p| p.kind != PendingKind::Child)
}

/// What running finishing calls adds to a step, indexed like its calls.
pub(crate) struct Finishing<'a> {
    /// Which calls may run (the others are ended already, or not finishing calls).
    pub todo: &'a [bool],
    pub results: &'a mut [Option<Message>],
    pub writes: &'a mut [Vec<PatchOp>],
    /// The writes merged into the state, in order (for the commit).
    pub ops: &'a mut Vec<PatchOp>,
    /// In a resumption: each call is claimed for this instance first (at most once).
    pub claim: bool,
}

impl<S: Store> Runner<S> {
    /// Runs the finishing calls among `calls` (planned as `plans`) that `out.todo`
    /// allows; returns the output the first of them gave.
    pub(crate) async fn run_finishing(
        &self,
        live: &mut Live,
        agent: &Agent,
        calls: &[ToolCall],
        plans: &[Plan],
        out: Finishing<'_>,
        emitter: &Emitter,
    ) -> Result<Option<Value>, RunError> {
        let mut output: Option<Value> = None;
        for (i, call) in calls.iter().enumerate() {
            if plans[i] != Plan::FinishWith || !out.todo[i] || out.results[i].is_some() {
                continue;
            }
            let Some(tool) = agent.tool(&call.name) else {
                continue;
            };
            if output.is_some() {
                let skipped = ToolError::Skipped("the run already finished".into());
                out.results[i] = Some(end_without_running(call, &skipped, emitter));
                continue;
            }
            if out.claim && !self.claim_call(live, call)? {
                let err = ToolError::Interrupted;
                out.results[i] = Some(end_without_running(call, &err, emitter));
                continue;
            }
            let ready = match prepare_call(agent, tool, call, &live.state) {
                Ok(ready) => ready,
                Err(err) => {
                    out.results[i] = Some(end_without_running(call, &err, emitter));
                    continue;
                }
            };
            if let Some(why) = &ready.skip {
                out.results[i] = Some(end_skipped(call, why, emitter));
                continue;
            }
            if ready.each.is_some() {
                let err = ToolError::InputInvalid {
                    tool: call.name.clone(),
                    reason: "a finishing call runs once; it cannot take _forEach".into(),
                };
                out.results[i] = Some(end_without_running(call, &err, emitter));
                continue;
            }
            let run = [Run::new(i, &ready.call, ready.output.as_deref())];
            let outcomes = self
                .tools()
                .run_parallel(agent, &run, &mut live.state, emitter)
                .await;
            let Some((_, outcome)) = outcomes.into_iter().next() else {
                continue; // the tool exists: it ran
            };
            if agent.hooks().is_some() {
                out.writes[i] = outcome.writes.clone();
            }
            merge_into(&mut live.state, vec![outcome.writes], out.ops, emitter);
            output = outcome.value;
            out.results[i] = Some(outcome.message);
        }
        for (i, call) in calls.iter().enumerate() {
            if plans[i] == Plan::Finish && out.todo[i] && out.results[i].is_none() {
                out.results[i] = Some(finish_output(agent, call, &mut output));
            }
        }
        Ok(output)
    }

    /// In a resumption, after the answers' results (`messages`): runs the finishing
    /// calls the suspended step left waiting, appending their results to `messages`;
    /// returns the output one of them gave.
    pub(crate) async fn resume_finishing(
        &self,
        live: &mut Live,
        agent: &Agent,
        messages: &mut Vec<Message>,
        state_ops: &mut Vec<PatchOp>,
        emitter: &Emitter,
    ) -> Result<Option<Value>, RunError> {
        let (calls, ended) = suspended_calls(live, messages);
        let plans: Vec<Plan> = calls.iter().map(|c| plan(agent, c, &live.state)).collect();
        let todo: Vec<bool> = plans
            .iter()
            .zip(&ended)
            .map(|(p, ended)| matches!(p, Plan::FinishWith | Plan::Finish) && ended.is_none())
            .collect();
        if !todo.contains(&true) {
            return Ok(None);
        }
        let mut results = vec![None; calls.len()];
        let mut writes = vec![Vec::new(); calls.len()];
        let out = Finishing {
            todo: &todo,
            results: &mut results,
            writes: &mut writes,
            ops: state_ops,
            claim: true,
        };
        let output = self
            .run_finishing(live, agent, &calls, &plans, out, emitter)
            .await?;
        messages.extend(results.into_iter().flatten());
        Ok(output)
    }
}
