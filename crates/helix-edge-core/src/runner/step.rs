//! One model step: build the prompt, call the model (streaming its deltas as chunks),
//! plan the tool calls, run them — phase 1: regular calls in parallel; phase 2:
//! `finish_with` calls in order, seeing phase 1's writes — and commit the assistant
//! message, the results, the merged state writes, the run bookkeeping and a checkpoint
//! in one write. Approval-gated and client calls become durable pending calls. When the
//! run goes on, that write goes out together with the next model call ([`super::Ahead`]).

use super::children::{child_session_id, subsession};
use super::emit::Emitter;
use super::exec::CallOutcome;
use super::{Live, RunError, Runner};
use crate::agent::{Agent, FINISH_TOOL};
use crate::chunk::{ChunkBody, Executor, RunStatus, StreamEvent, SuspendReason};
use crate::error::{Coded, ErrorInfo, ToolError};
use crate::host::Level;
use crate::host::LogValue::{Null, Num, Str};
use crate::message::{Message, ToolCall};
use crate::model::{Delta, ModelRequest};
use crate::state::{PatchOp, merge};
use crate::store::{
    CheckpointRecord, CheckpointStatus, Commit, PendingCall, PendingKind, SessionHead,
    SessionStatus, StateChange, Store,
};
use futures::future::{join_all, try_join};
use serde_json::{Map, Value, json};
use std::cell::RefCell;
use std::rc::Rc;

/// The text of the corrective nudge sent when a required output is missing.
pub(crate) const OUTPUT_NUDGE: &str =
    "You must finish by calling the __finish__ tool with your final answer as its arguments.";

/// How the step handles one call.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Plan {
    Regular,
    FinishWith,
    Finish,
    Gated(PendingKind),
    SubAgent,
    Unknown,
}

/// What the step decided for the run.
enum Outcome {
    Continue,
    Suspend(Vec<PendingCall>),
    Complete(Option<Value>),
    Fail(ErrorInfo),
}

/// Makes arguments a JSON object: a string holding an object is parsed (providers and
/// models sometimes double-encode); anything else becomes `{}` with a warning.
fn coerce_arguments(args: Value) -> (Value, Option<String>) {
    match args {
        Value::Object(_) => (args, None),
        Value::Null => (Value::Object(Map::new()), None),
        Value::String(text) => match serde_json::from_str::<Value>(&text) {
            Ok(obj @ Value::Object(_)) => (obj, None),
            _ => (
                Value::Object(Map::new()),
                Some("Tool arguments were not a JSON object; used {}".to_string()),
            ),
        },
        _ => (
            Value::Object(Map::new()),
            Some("Tool arguments were not a JSON object; used {}".to_string()),
        ),
    }
}

/// Normalises the model's calls: object arguments, and ids unique in the session
/// (answers are keyed by call id, and some models repeat ids across turns).
fn normalize_calls(
    raw: Vec<ToolCall>,
    transcript: &[Message],
    step: u32,
    emitter: &Emitter,
) -> Vec<ToolCall> {
    let earlier: Vec<&str> = transcript
        .iter()
        .flat_map(|m| match m {
            Message::Assistant { tool_calls, .. } => tool_calls.as_slice(),
            _ => &[],
        })
        .map(|c| c.id.as_str())
        .collect();
    let mut taken: Vec<String> = Vec::with_capacity(raw.len());
    raw.into_iter()
        .enumerate()
        .map(|(i, mut call)| {
            if call.id.is_empty() || earlier.contains(&call.id.as_str()) || taken.contains(&call.id)
            {
                call.id = if call.id.is_empty() {
                    format!("call_{step}_{i}")
                } else {
                    format!("{}_{step}_{i}", call.id)
                };
            }
            taken.push(call.id.clone());
            let (arguments, warning) = coerce_arguments(std::mem::take(&mut call.arguments));
            call.arguments = arguments;
            if let Some(message) = warning {
                emitter.chunk(ChunkBody::Error {
                    code: "tool_arguments_coerced".into(),
                    message,
                    recoverable: true,
                });
            }
            call
        })
        .collect()
}

fn plan(agent: &Agent, call: &ToolCall, state: &Value) -> Plan {
    if call.name == FINISH_TOOL && agent.output_schema().is_some() {
        return Plan::Finish;
    }
    match agent.tool(&call.name) {
        None => Plan::Unknown,
        Some(t) if t.subagent_of().is_some() => Plan::SubAgent,
        Some(t) if t.is_client() => Plan::Gated(PendingKind::Client),
        Some(t) if t.needs_approval(&call.arguments, state) => Plan::Gated(PendingKind::Approval),
        Some(t) if t.is_finish_with() => Plan::FinishWith,
        Some(_) => Plan::Regular,
    }
}

/// Takes the state out of `slot` to share it read-only with a phase's tools.
fn share(slot: &mut Value) -> Rc<Value> {
    Rc::new(std::mem::take(slot))
}

/// Gets the state back once the phase's tools are done (no copy unless a tool kept a
/// context alive).
fn unshare(base: Rc<Value>) -> Value {
    Rc::try_unwrap(base).unwrap_or_else(|rc| (*rc).clone())
}

impl<S: Store> Runner<S> {
    pub(crate) async fn model_step(&self, live: &mut Live, agent: &Agent) -> Result<(), RunError> {
        let step = live.head.step_count + 1;
        let emitter = self.emitter(&live.head, Some(step));
        let model = match self.models.model_for(agent) {
            Ok(model) => model,
            Err(e) => {
                self.settle(live).await?;
                return self.fail_run(live, ErrorInfo::of(&e)).await;
            }
        };
        let ahead = live.ahead.take();
        let request = ModelRequest {
            system: agent.system_prompt(&live.state),
            messages: &live.transcript,
            tools: agent.tool_specs(),
            settings: agent.model(),
            abort: self.abort.borrow().clone(),
        };
        let show = |delta: Delta| {
            emitter.chunk(match delta {
                Delta::Text(delta) => ChunkBody::TextDelta { delta },
                Delta::Thinking {
                    content,
                    is_complete,
                } => ChunkBody::Thinking {
                    content,
                    is_complete,
                },
            });
        };
        // Deltas wait while the previous step's commit is out, to follow its batch.
        let held = RefCell::new(ahead.as_ref().map(|_| Vec::new()));
        let mut on_delta = |delta: Delta| match held.borrow_mut().as_mut() {
            Some(waiting) => waiting.push(delta),
            None => show(delta),
        };
        let started = self.host.now_ms();
        // The commit is polled first: one refused before it is sent (too large) stops the
        // model call from going out at all, and one that fails later cancels it. The
        // model's answer is only good for a durable transcript.
        let land = async {
            let Some(ahead) = ahead else {
                return Ok(None);
            };
            match self.land_ahead(&live.head.id, ahead).await {
                (Ok(version), kept) => {
                    let waiting = held.borrow_mut().take();
                    waiting.into_iter().flatten().for_each(show);
                    Ok(Some((version, kept)))
                }
                (Err(e), kept) => Err((e, kept)),
            }
        };
        let generate = async { Ok(model.generate(request, &mut on_delta).await) };
        let result = match try_join(land, generate).await {
            Ok((landed, result)) => {
                if let Some((version, kept)) = landed {
                    self.landed(live, kept, Ok(version))?;
                }
                result
            }
            Err((e, kept)) => return self.landed(live, kept, Err(e)),
        };
        let ms = self.host.now_ms().saturating_sub(started);
        let turn = match result {
            Ok(turn) => turn,
            Err(e) => {
                let fields = [
                    ("step", Num(step.into())),
                    ("ms", Num(ms)),
                    ("code", Str(e.code())),
                ];
                self.log(live, Level::Warn, "model_call_failed", &fields);
                return self.fail_run(live, ErrorInfo::of(&e)).await;
            }
        };
        let usage = turn.usage;
        let fields = [
            ("step", Num(step.into())),
            ("ms", Num(ms)),
            ("inputTokens", Num(usage.input_tokens)),
            ("outputTokens", Num(usage.output_tokens)),
            ("cacheReadTokens", Num(usage.cache_read_tokens)),
            ("stop", Str(turn.stop.as_str())),
        ];
        self.log(live, Level::Debug, "model_call", &fields);

        let calls = normalize_calls(turn.tool_calls, &live.transcript, step, &emitter);
        // Usage and the stop reason are recorded per step, on the step's message.
        let metadata =
            serde_json::to_value(json!({ "usage": turn.usage, "stopReason": turn.stop }))
                .ok()
                .and_then(|v| v.as_object().cloned());
        let assistant = Message::Assistant {
            content: turn.text,
            tool_calls: calls.clone(),
            thinking: turn.thinking,
            metadata,
        };
        if let Some(h) = agent.hooks() {
            h.on_message(&assistant);
        }
        let plans: Vec<Plan> = calls.iter().map(|c| plan(agent, c, &live.state)).collect();
        let mut results: Vec<Option<Message>> = vec![None; calls.len()];
        let mut state_ops: Vec<PatchOp> = Vec::new();

        // Phase 1: regular calls in parallel, each from the committed pre-step state.
        let base = share(&mut live.state);
        let phase1 = calls
            .iter()
            .zip(&plans)
            .enumerate()
            .filter(|(_, (_, p))| **p == Plan::Regular)
            .filter_map(|(i, (call, _))| {
                let tool = agent.tool(&call.name)?;
                let base = base.clone();
                let emitter = &emitter;
                Some(async move { (i, self.run_tool(agent, tool, call, base, emitter).await) })
            });
        let outcomes: Vec<(usize, CallOutcome)> = join_all(phase1).await;
        live.state = unshare(base);
        let mut writes = Vec::with_capacity(outcomes.len());
        for (i, outcome) in outcomes {
            results[i] = Some(outcome.message);
            writes.push(outcome.writes);
        }
        self.merge_into(&mut live.state, writes, &mut state_ops, &emitter);

        // Phase 2: finish_with calls in order, each seeing every write before it.
        let mut output: Option<Value> = None;
        for (i, call) in calls
            .iter()
            .enumerate()
            .filter(|(i, _)| plans[*i] == Plan::FinishWith)
        {
            let Some(tool) = agent.tool(&call.name) else {
                continue;
            };
            if output.is_some() {
                let skipped = ToolError::Skipped("the run already finished".into());
                results[i] = Some(self.end_without_running(agent, call, &skipped, &emitter));
                continue;
            }
            let base = share(&mut live.state);
            let outcome = self
                .run_tool(agent, tool, call, base.clone(), &emitter)
                .await;
            live.state = unshare(base);
            self.merge_into(
                &mut live.state,
                vec![outcome.writes],
                &mut state_ops,
                &emitter,
            );
            output = outcome.value;
            results[i] = Some(outcome.message);
        }

        // Structured output, unknown tools, gated calls, sub-agents (after phase 2).
        let mut pending = Vec::new();
        let now = self.host.now_ms();
        for (i, call) in calls.iter().enumerate() {
            match plans[i] {
                Plan::Finish => results[i] = Some(self.finish_output(agent, call, &mut output)),
                Plan::Unknown => {
                    let err = ToolError::NotFound(call.name.clone());
                    results[i] = Some(self.end_without_running(agent, call, &err, &emitter));
                }
                Plan::Gated(kind) => pending.push(PendingCall {
                    tool_call_id: call.id.clone(),
                    tool_name: call.name.clone(),
                    arguments: call.arguments.clone(),
                    kind,
                    deadline: agent
                        .tool(&call.name)
                        .and_then(|t| t.client_deadline())
                        .map(|d| now + d.as_millis() as u64),
                }),
                Plan::SubAgent => {
                    let Some(tool) = agent.tool(&call.name) else {
                        continue;
                    };
                    match crate::schema::validate(tool.input_schema(), &call.arguments) {
                        Ok(()) => pending.push(PendingCall {
                            tool_call_id: call.id.clone(),
                            tool_name: call.name.clone(),
                            arguments: call.arguments.clone(),
                            kind: PendingKind::Child,
                            deadline: tool.subagent_of().map(|(_, t)| now + t.as_millis() as u64),
                        }),
                        Err(reason) => {
                            let err = ToolError::InputInvalid {
                                tool: call.name.clone(),
                                reason,
                            };
                            results[i] =
                                Some(self.end_without_running(agent, call, &err, &emitter));
                        }
                    }
                }
                Plan::Regular | Plan::FinishWith => {}
            }
        }

        let mut head = live.head.clone();
        head.run.usage.add(&turn.usage);
        let mut messages = vec![assistant];
        let outcome = if output.is_some() {
            // The run ends now: gated and sub-agent calls of the same step never run.
            let skipped = ToolError::Skipped("the run finished first".into());
            for (i, call) in calls.iter().enumerate() {
                let waits = matches!(plans[i], Plan::Gated(_) | Plan::SubAgent);
                if waits && results[i].is_none() {
                    results[i] = Some(self.end_without_running(agent, call, &skipped, &emitter));
                }
            }
            Outcome::Complete(output)
        } else if !pending.is_empty() {
            Outcome::Suspend(pending)
        } else if calls.is_empty() && agent.output_schema().is_some() {
            if head.run.nudges < self.config.max_output_nudges {
                head.run.nudges += 1;
                results.push(Some(Message::User {
                    content: OUTPUT_NUDGE.into(),
                    metadata: Some(Map::from_iter([("nudge".to_string(), json!(true))])),
                }));
                Outcome::Continue
            } else {
                Outcome::Fail(ErrorInfo {
                    code: "output_missing".into(),
                    message: format!(
                        "The model answered in text {} times instead of calling {FINISH_TOOL}",
                        head.run.nudges + 1
                    ),
                    retryable: true,
                })
            }
        } else if calls.is_empty() {
            Outcome::Complete(None)
        } else {
            Outcome::Continue
        };
        messages.extend(results.into_iter().flatten());
        self.ensure_not_aborted()?;
        self.commit_step(
            live, agent, head, step, messages, state_ops, outcome, &emitter,
        )
        .await
    }

    /// Merges tool writes into `state`, reporting writes that no longer apply.
    pub(crate) fn merge_into(
        &self,
        state: &mut Value,
        writes: Vec<Vec<PatchOp>>,
        ops: &mut Vec<PatchOp>,
        emitter: &Emitter,
    ) {
        let merged = merge(state, writes);
        for (op, err) in merged.conflicts {
            emitter.chunk(ChunkBody::Error {
                code: err.code().into(),
                message: format!("A tool's write to '{}' was dropped: {err}", op.path()),
                recoverable: true,
            });
        }
        ops.extend(merged.applied);
    }

    /// Checks a `__finish__` call against the output schema; the first valid one is the
    /// output. Invalid output goes back to the model as a tool error it can fix.
    fn finish_output(&self, agent: &Agent, call: &ToolCall, output: &mut Option<Value>) -> Message {
        let schema = agent.output_schema().cloned().unwrap_or(Value::Bool(true));
        match crate::schema::validate(&schema, &call.arguments) {
            Ok(()) => {
                output.get_or_insert_with(|| call.arguments.clone());
                Message::tool_result(call, json!({"accepted": true}))
            }
            Err(reason) => {
                let err = ToolError::InputInvalid {
                    tool: FINISH_TOOL.into(),
                    reason,
                };
                Message::tool_error(call, err.code(), &err.to_string())
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn commit_step(
        &self,
        live: &mut Live,
        agent: &Agent,
        mut head: crate::store::SessionHead,
        step: u32,
        messages: Vec<Message>,
        state_ops: Vec<PatchOp>,
        outcome: Outcome,
        emitter: &Emitter,
    ) -> Result<(), RunError> {
        head.step_count = step;
        head.run.step_count += 1;
        let status = match &outcome {
            Outcome::Continue => CheckpointStatus::Active,
            Outcome::Suspend(_) => CheckpointStatus::Suspended,
            Outcome::Complete(_) => CheckpointStatus::Completed,
            Outcome::Fail(_) => CheckpointStatus::Failed,
        };
        let now = self.host.now_ms();
        let mut post = Vec::new();
        let mut suspended = None;
        let mut children = Vec::new();
        match outcome {
            Outcome::Continue => {}
            Outcome::Suspend(pending) => {
                let reason = if pending.iter().any(|p| p.kind == PendingKind::Child) {
                    SuspendReason::AwaitingChildren
                } else {
                    SuspendReason::ClientTool
                };
                for p in &pending {
                    post.extend(suspension_events(agent, &head.id, p, emitter));
                    if let (PendingKind::Child, Some((child, _))) = (
                        p.kind,
                        agent.tool(&p.tool_name).and_then(|t| t.subagent_of()),
                    ) {
                        children.push(subsession(&head.id, p, child.name(), None, now));
                    }
                }
                let ids: Vec<String> = pending.iter().map(|p| p.tool_call_id.clone()).collect();
                post.push(emitter.event(ChunkBody::RunSuspended {
                    reason,
                    tool_call_ids: ids.clone(),
                }));
                head.pending = pending;
                head.suspended_reason = Some(reason);
                suspended = Some(ids);
            }
            Outcome::Complete(output) => {
                if let Some(out) = &output {
                    post.push(emitter.event(ChunkBody::Output {
                        output: out.clone(),
                    }));
                }
                post.push(emitter.event(ChunkBody::RunFinished {
                    status: RunStatus::Completed,
                }));
                post.push(StreamEvent::End {
                    output: output.clone(),
                });
                head.status = SessionStatus::Completed;
                head.run.status = RunStatus::Completed;
                head.run.completed_at = Some(now);
                head.output = output;
            }
            Outcome::Fail(error) => {
                post.extend(failure_events(emitter, &error));
                head.status = SessionStatus::Failed;
                head.run.status = RunStatus::Failed;
                head.run.completed_at = Some(now);
                head.run.error = Some(error.clone());
                head.error = Some(error);
            }
        }
        let (mut commit, mut events) =
            self.checkpointed_commit(head, messages, state_ops, status, emitter);
        commit.subsessions = children;
        events.extend(post);
        if status == CheckpointStatus::Active {
            // The run goes on: the commit goes out with the next model call.
            self.send_ahead(live, commit, events, Some(step));
            return Ok(());
        }
        self.commit(live, commit, events).await?;
        let (level, event) = match (live.head.status, &suspended) {
            (_, Some(_)) => (Level::Info, "run_suspended"),
            (SessionStatus::Completed, _) => (Level::Info, "run_completed"),
            (SessionStatus::Failed, _) => (Level::Warn, "run_failed"),
            _ => (Level::Debug, "step_committed"),
        };
        // The run's token usage so far: `model_call` lines (debug) have each call's.
        let code = live.head.error.as_ref().map_or(Null, |e| Str(&e.code));
        let run = &live.head.run;
        let fields = [
            ("step", Num(step.into())),
            ("pending", Num(live.head.pending.len() as u64)),
            ("code", code),
            ("runSteps", Num(run.step_count.into())),
            ("inputTokens", Num(run.usage.input_tokens)),
            ("outputTokens", Num(run.usage.output_tokens)),
        ];
        self.log(live, level, event, &fields);
        if let (Some(ids), Some(h)) = (
            suspended,
            self.agents
                .get(&live.head.agent)
                .and_then(|a| a.hooks.clone()),
        ) {
            h.on_agent_suspended(&ids);
        }
        Ok(())
    }

    /// Builds a commit that closes a step (or a resumption): it appends `messages`,
    /// applies `state_ops`, and checkpoints the result with `status`. Returns it with
    /// the events that open its post-commit batch: `state_patch` (if any) and
    /// `step_committed`.
    pub(crate) fn checkpointed_commit(
        &self,
        mut head: SessionHead,
        messages: Vec<Message>,
        state_ops: Vec<PatchOp>,
        status: CheckpointStatus,
        emitter: &Emitter,
    ) -> (Commit, Vec<StreamEvent>) {
        let now = self.host.now_ms();
        head.message_count += messages.len() as u64;
        head.updated_at = now;
        let checkpoint = CheckpointRecord {
            id: self.host.new_id("ckpt"),
            step_count: head.step_count,
            message_count: head.message_count,
            timestamp: now,
            status,
            run_id: head.run.run_id.clone(),
        };
        head.checkpoint_id = Some(checkpoint.id.clone());
        let mut events = Vec::new();
        let state = if state_ops.is_empty() {
            StateChange::None
        } else {
            events.push(emitter.event(ChunkBody::StatePatch {
                patches: state_ops.clone(),
            }));
            StateChange::Patch(state_ops)
        };
        events.push(emitter.event(ChunkBody::StepCommitted {
            checkpoint_id: checkpoint.id.clone(),
        }));
        let commit = Commit {
            head,
            truncate_messages_to: None,
            messages,
            state,
            checkpoint: Some(checkpoint),
            clear_interrupt: false,
            subsessions: Vec::new(),
        };
        (commit, events)
    }

    /// Ends the run as failed with `error` (no step committed).
    pub(crate) async fn fail_run(&self, live: &mut Live, error: ErrorInfo) -> Result<(), RunError> {
        let now = self.host.now_ms();
        let mut head = live.head.clone();
        head.status = SessionStatus::Failed;
        head.run.status = RunStatus::Failed;
        head.run.completed_at = Some(now);
        head.run.error = Some(error.clone());
        head.error = Some(error.clone());
        head.updated_at = now;
        let emitter = self.emitter(&head, None);
        let post = failure_events(&emitter, &error);
        self.commit(live, super::ops::head_only(head, false), post)
            .await?;
        let steps = u64::from(live.head.run.step_count);
        self.log(
            live,
            Level::Warn,
            "run_failed",
            &[("code", Str(&error.code)), ("runSteps", Num(steps))],
        );
        Ok(())
    }
}

/// What the stream shows for a call the run suspends on: the approval request, the
/// client tool's start, or a sub-agent's start (`tool_start` and `subagent_start`).
fn suspension_events(
    agent: &Agent,
    session_id: &str,
    p: &PendingCall,
    emitter: &Emitter,
) -> Vec<StreamEvent> {
    let start = |executor, deadline| ChunkBody::ToolStart {
        tool_call_id: p.tool_call_id.clone(),
        tool_name: p.tool_name.clone(),
        arguments: p.arguments.clone(),
        executor,
        deadline,
    };
    match p.kind {
        PendingKind::Approval => vec![emitter.event(ChunkBody::ToolApprovalRequest {
            tool_call_id: p.tool_call_id.clone(),
            tool_name: p.tool_name.clone(),
            arguments: p.arguments.clone(),
        })],
        PendingKind::Client => vec![emitter.event(start(Executor::Client, p.deadline))],
        PendingKind::Child => {
            let child_agent = agent
                .tool(&p.tool_name)
                .and_then(|t| t.subagent_of())
                .map_or("", |(a, _)| a.name());
            vec![
                emitter.event(start(Executor::Server, None)),
                emitter.event_as(
                    child_agent,
                    ChunkBody::SubagentStart {
                        sub_session_id: child_session_id(session_id, &p.tool_call_id),
                        tool_call_id: p.tool_call_id.clone(),
                    },
                ),
            ]
        }
    }
}

/// `error`, `run_finished{failed}` and `fail`.
fn failure_events(emitter: &Emitter, error: &ErrorInfo) -> Vec<StreamEvent> {
    vec![
        emitter.event(ChunkBody::Error {
            code: error.code.clone(),
            message: error.message.clone(),
            recoverable: error.retryable,
        }),
        emitter.event(ChunkBody::RunFinished {
            status: RunStatus::Failed,
        }),
        StreamEvent::Fail {
            error: error.clone(),
        },
    ]
}
