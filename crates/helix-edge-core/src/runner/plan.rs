//! Running a step's calls in dependency order (see [`crate::memory`]): a call runs once
//! every call whose stored result it references has succeeded, calls that are ready
//! together run in parallel, and each is prepared (references resolved, `_outputPath`
//! taken out) and its approval decided on that resolved input just before it runs. A
//! step without dependencies is one such round, its calls all from the pre-step state.
//!
//! A call whose dependency waits on a person, a client or a child is *deferred*: it
//! stays without a result in the transcript and the resumption runs it, after the
//! answers ([`Runner::resume_plan`]). A call whose dependency was denied or failed fails
//! with `tool_dependency_failed`; the others' results stay.

use super::INSTANCING;
use super::calls::{Plan, plan};
use super::emit::Emitter;
use super::exec::{Run, merge_into};
use super::instancing::Round;
use super::results::{end_skipped, end_without_running};
use super::step_calls::{Ran, StepCalls};
use super::{Live, RunError, Runner};
use crate::agent::Agent;
use crate::error::ToolError;
use crate::memory;
use crate::message::{Message, ToolCall};
use crate::state::PatchOp;
use crate::store::{PendingCall, PendingKind, Store};

impl<S: Store> Runner<S> {
    /// Runs the calls `todo` of `step` (server calls run; approval-gated, client and
    /// sub-agent calls become pending) in dependency order: round by round, the calls
    /// whose dependencies have succeeded are prepared against the current state and run
    /// in parallel, and their writes merged into the live state before the next round.
    /// Calls still waiting on a pending call when nothing more can run stay deferred.
    pub(crate) async fn run_calls(
        &self,
        live: &mut Live,
        agent: &Agent,
        step: &mut StepCalls<'_>,
        todo: &[usize],
        ran: &mut Ran,
        emitter: &Emitter,
    ) -> Result<(), RunError> {
        let mut open = todo.to_vec();
        loop {
            let ready = self.next_round(step, &mut open, ran, emitter);
            if ready.is_empty() {
                return Ok(());
            }
            let runs = self.prepare_round(live, agent, step, &ready, ran, emitter)?;
            let n = step.calls.len();
            let runs: Vec<Run> = runs
                .iter()
                .map(|(i, call, output)| Run {
                    may_wait: *i < n,
                    ..Run::new(*i, call, output.as_deref())
                })
                .collect();
            let outcomes = self
                .tools()
                .run_parallel(agent, &runs, &mut live.state, emitter)
                .await;
            let mut writes = Vec::with_capacity(outcomes.len());
            let now = self.host.now_ms();
            for (slot, outcome) in outcomes {
                if let (Some(run), Some(instancing)) = (slot.checked_sub(n), INSTANCING.first()) {
                    (instancing.ended)(step, ran, run, outcome.message);
                    writes.push(outcome.writes);
                    continue;
                }
                // It waits on the user: pending, like a gated call (not ended).
                let run = runs.iter().find(|r| r.index == slot);
                if let (Some(wait), Some(run)) = (outcome.wait, run) {
                    ran.pending.push(run.asked(wait, now));
                    continue;
                }
                step.ended[slot] = Some(outcome.value.is_some());
                ran.results[slot] = Some(outcome.message);
                if agent.hooks().is_some() {
                    ran.writes[slot] = outcome.writes.clone();
                }
                writes.push(outcome.writes);
            }
            merge_into(&mut live.state, writes, &mut ran.ops, emitter);
            if let Some(instancing) = INSTANCING.first() {
                let gathered: Vec<PatchOp> = (0..n)
                    .filter_map(|i| (instancing.gather)(step, i, ran, &live.state, emitter))
                    .collect();
                merge_into(&mut live.state, vec![gathered], &mut ran.ops, emitter);
            }
        }
    }

    /// The next round of `open`: the calls whose dependencies have all succeeded (taken
    /// out of `open`). A call whose dependency failed fails with
    /// `tool_dependency_failed`, and so, in turn, do the calls that depend on it.
    fn next_round(
        &self,
        step: &mut StepCalls<'_>,
        open: &mut Vec<usize>,
        ran: &mut Ran,
        emitter: &Emitter,
    ) -> Vec<usize> {
        loop {
            let mut ready = Vec::new();
            let mut failed_any = false;
            let mut still = Vec::new();
            for &i in open.iter() {
                let deps = step.graph.deps(i);
                if let Some(&d) = deps.iter().find(|&&d| step.ended[d] == Some(false)) {
                    let dep = &step.calls[d];
                    let err = ToolError::DependencyFailed {
                        call: dep.id.clone(),
                        tool: dep.name.clone(),
                    };
                    ran.results[i] = Some(end_without_running(&step.calls[i], &err, emitter));
                    step.ended[i] = Some(false);
                    failed_any = true;
                } else if deps.iter().all(|&d| step.ended[d] == Some(true)) {
                    ready.push(i);
                } else {
                    still.push(i);
                }
            }
            *open = still;
            if !ready.is_empty() || !failed_any {
                return ready;
            }
        }
    }

    /// Prepares the `ready` calls against the current state: references resolved and
    /// output paths taken out; the gated, client and sub-agent calls among them become
    /// pending ones (their approval decided on the resolved input), and a call that
    /// cannot be prepared ends with its error. Returns the server calls to run now,
    /// claimed for this instance in a resumption.
    fn prepare_round(
        &self,
        live: &Live,
        agent: &Agent,
        step: &mut StepCalls<'_>,
        ready: &[usize],
        ran: &mut Ran,
        emitter: &Emitter,
    ) -> Result<Vec<(usize, ToolCall, Option<String>)>, RunError> {
        let now = self.host.now_ms();
        let mut runs = Vec::new();
        step.slots.clear();
        for &i in ready {
            let call = &step.calls[i];
            let Some(tool) = agent.tool(&call.name) else {
                continue;
            };
            let prepared = prepare_call(agent, tool, call, &live.state).and_then(|ready| {
                // A skipped call asks nothing; an instanced one asks per instance.
                if ready.skip.is_some() || ready.each.is_some() {
                    return Ok((ready, Plan::Regular));
                }
                match plan(agent, &ready.call, &live.state) {
                    Plan::Child => {
                        crate::schema::validate(tool.input_schema(), &ready.call.arguments)
                            .map_err(|reason| ToolError::InputInvalid {
                                tool: call.name.clone(),
                                reason,
                            })
                            .map(|()| (ready, Plan::Child))
                    }
                    planned => Ok((ready, planned)),
                }
            });
            let (
                Ready {
                    call: ready,
                    output,
                    skip,
                    each,
                },
                planned,
            ) = match prepared {
                Ok(prepared) => prepared,
                Err(err) => {
                    ran.results[i] = Some(end_without_running(call, &err, emitter));
                    step.ended[i] = Some(false);
                    continue;
                }
            };
            if let Some(why) = skip {
                ran.results[i] = Some(end_skipped(call, &why, emitter));
                step.ended[i] = Some(true);
                continue;
            }
            if let (Some(each), Some(instancing)) = (each, INSTANCING.first()) {
                let claim = |call: &ToolCall| self.claim_call(live, call);
                let mut round = Round {
                    state: &live.state,
                    agent,
                    ran,
                    runs: &mut runs,
                    emitter,
                    now,
                    claim: &claim,
                };
                (instancing.start)(&mut round, step, i, (each, output))?;
                continue;
            }
            let kind = match planned {
                Plan::Gated(kind) => kind,
                Plan::Child => PendingKind::Child,
                _ => {
                    if self.claimed(live, step, &ready)? {
                        runs.push((i, ready, output));
                    } else {
                        let err = ToolError::Interrupted;
                        ran.results[i] = Some(end_without_running(call, &err, emitter));
                        step.ended[i] = Some(false);
                    }
                    continue;
                }
            };
            let deadline = match kind {
                PendingKind::Child => tool.child_deadline(),
                PendingKind::Approval => tool.approval_deadline(),
                _ => tool.client_deadline(),
            };
            ran.pending.push(PendingCall {
                tool_call_id: ready.id,
                tool_name: ready.name,
                arguments: ready.arguments,
                kind,
                deadline: deadline.map(|d| now + d.as_millis() as u64),
                since: now,
                output_path: output,
                approvers: tool
                    .approvers
                    .clone()
                    .filter(|_| kind == PendingKind::Approval),
                request: None,
            });
        }
        Ok(runs)
    }

    /// Whether `call` may run on this instance: always in a step; in a resumption only
    /// once claimed for it (so a call runs at most once — one another instance claimed
    /// ends as interrupted).
    fn claimed(
        &self,
        live: &Live,
        step: &StepCalls<'_>,
        call: &ToolCall,
    ) -> Result<bool, RunError> {
        if !step.claim {
            return Ok(true);
        }
        self.claim_call(live, call)
    }

    /// Claims `call` of the suspended step for this instance in the journal; false when
    /// another instance claimed it first.
    pub(crate) fn claim_call(&self, live: &Live, call: &ToolCall) -> Result<bool, RunError> {
        let (head, instance) = (&live.head, self.config.instance.as_str());
        let owner =
            self.journal
                .suspension
                .claim(&head.run.run_id, head.step_count, &call.id, instance)?;
        Ok(owner == instance)
    }

    /// In a resumption, after the answers' results (`messages`): runs the calls of the
    /// suspended step that were deferred (no result yet, not among the answered calls,
    /// not `asking` the user again) as far as they can go, appending their results to
    /// `messages`. Returns the calls that now wait on an answer (empty when the plan is
    /// done).
    pub(crate) async fn resume_plan(
        &self,
        live: &mut Live,
        agent: &Agent,
        messages: &mut Vec<Message>,
        state_ops: &mut Vec<PatchOp>,
        asking: &[PendingCall],
        emitter: &Emitter,
    ) -> Result<Vec<PendingCall>, RunError> {
        if memory::memory().is_none() {
            return Ok(Vec::new()); // no call is ever deferred
        }
        let (calls, ended) = suspended_calls(live, messages);
        let planned: Vec<bool> = calls
            .iter()
            .map(|c| plan(agent, c, &live.state).in_plan())
            .collect();
        let asks = |call: &ToolCall| asking.iter().any(|p| p.tool_call_id == call.id);
        let todo: Vec<usize> = (0..calls.len())
            .filter(|&i| planned[i] && ended[i].is_none() && !asks(&calls[i]))
            .collect();
        if todo.is_empty() {
            return Ok(Vec::new());
        }
        let mut ran = Ran::new(calls.len());
        match StepCalls::new(agent, &calls, &planned) {
            Ok(mut step) => {
                step.ended = ended;
                step.claim = true;
                step.earlier = instance_results(live, messages);
                self.run_calls(live, agent, &mut step, &todo, &mut ran, emitter)
                    .await?;
            }
            // The definition changed since the step (a new deployment).
            Err(invalid) => {
                for &i in &todo {
                    ran.results[i] = Some(end_without_running(&calls[i], &invalid, emitter));
                }
            }
        }
        let results = (
            calls.as_slice(),
            ran.results.as_slice(),
            ran.writes.as_slice(),
        );
        self.result_hooks(live, agent, results, &mut ran.ops, emitter)
            .await;
        state_ops.extend(ran.ops);
        messages.extend(ran.instances);
        messages.extend(ran.results.into_iter().flatten());
        Ok(ran.pending)
    }
}

/// The suspended step: the calls of the transcript's last assistant message, and the
/// messages after it.
pub(crate) fn suspended_step(live: &Live) -> (&[ToolCall], &[Message]) {
    let at = live
        .transcript
        .iter()
        .rposition(|m| matches!(m, Message::Assistant { .. }));
    match at.map(|at| (&live.transcript[at], &live.transcript[at + 1..])) {
        Some((Message::Assistant { tool_calls, .. }, after)) => (tool_calls, after),
        _ => (&[], &live.transcript),
    }
}

/// The calls of the suspended step and how each has ended so far, in the transcript
/// after it or in `messages` (the results of the resumption under way): `Some(true)`
/// succeeded, `Some(false)` failed, `None` not ended.
pub(crate) fn suspended_calls(
    live: &Live,
    messages: &[Message],
) -> (Vec<ToolCall>, Vec<Option<bool>>) {
    let (tool_calls, after) = suspended_step(live);
    if tool_calls.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let ended_as = |id: &str| {
        after.iter().chain(messages).find_map(|m| match m {
            Message::Tool {
                tool_call_id,
                is_error,
                ..
            } if tool_call_id == id => Some(!is_error),
            _ => None,
        })
    };
    let ended = tool_calls.iter().map(|c| ended_as(&c.id)).collect();
    (tool_calls.to_vec(), ended)
}

/// The results of instances (`_forEach`) of the suspended step so far: in the
/// transcript after its assistant message, and among `messages` (the resumption's).
fn instance_results(live: &Live, messages: &[Message]) -> Vec<Message> {
    let (_, after) = suspended_step(live);
    after
        .iter()
        .chain(messages)
        .filter(|m| m.instance_of().is_some())
        .cloned()
        .collect()
}

/// `call` ready to run in `state` ([`memory::prepare`]): with the arguments it runs with
/// (references resolved, meta-arguments taken out), where its result is stored, and —
/// when its `_when` does not hold — why it is skipped instead.
pub(crate) fn prepare_call(
    agent: &Agent,
    tool: &crate::tool::Tool,
    call: &ToolCall,
    state: &serde_json::Value,
) -> Result<Ready, ToolError> {
    let prepared = memory::prepare(agent.state_schema(), tool, &call.arguments, state)?;
    let call = ToolCall {
        arguments: prepared.arguments,
        ..call.clone()
    };
    Ok(Ready {
        call,
        output: prepared.output,
        skip: prepared.skip,
        each: prepared.each,
    })
}

/// A call prepared to run ([`prepare_call`]).
pub(crate) struct Ready {
    pub call: ToolCall,
    pub output: Option<String>,
    pub skip: Option<String>,
    /// Run once per item: each instance's arguments.
    pub each: Option<Vec<serde_json::Value>>,
}
