//! Closing a step (or a run) durably: the commit that appends the step's messages,
//! applies its state writes and checkpoints the result, with the events that may only
//! be seen once it is durable (`state_patch`, `step_committed`, the suspension, `end` or
//! `fail`); and a run that fails without a step.

use super::conclude::Outcome;
use super::emit::Emitter;
use super::ops::head_only;
use super::waits::{child_session_id, subsession};
use super::{Live, RunError, Runner};
use crate::agent::{Agent, Hook, Suspension};
use crate::chunk::{ChunkBody, Executor, RunStatus, StreamEvent, SuspendReason};
use crate::error::ErrorInfo;
use crate::host::Level;
use crate::host::LogValue::{Null, Num, Str};
use crate::message::Message;
use crate::model::{StopReason, Usage};
use crate::state::PatchOp;
use crate::store::{
    CheckpointRecord, CheckpointStatus, Commit, PendingCall, PendingKind, SessionHead,
    SessionStatus, StateChange, Store, SubSession,
};
use serde_json::Value;

/// An outcome applied to a head: the checkpoint status, the events that follow the
/// commit, the calls suspended on and the child sessions to record.
pub(crate) struct Concluded {
    pub status: CheckpointStatus,
    pub post: Vec<StreamEvent>,
    pub suspended: Option<Vec<String>>,
    pub children: Vec<SubSession>,
}

impl<S: Store> Runner<S> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn commit_step(
        &self,
        live: &mut Live,
        agent: &Agent,
        mut head: SessionHead,
        step: u32,
        (usage, stop_reason): (Usage, StopReason),
        messages: Vec<Message>,
        mut state_ops: Vec<PatchOp>,
        outcome: Outcome,
        emitter: &Emitter,
    ) -> Result<(), RunError> {
        head.step_count = step;
        head.run.step_count += 1;
        let concluded = self.close(agent, &mut head, outcome, emitter);
        self.suspended_hook(live, agent, &head, &mut state_ops, emitter)
            .await;
        let (mut commit, mut events) = self.checkpointed_commit(
            head,
            messages,
            (state_ops, &live.state),
            concluded.status,
            emitter,
        );
        // The step's model call, recorded with its checkpoint (`GET …/runs` shows it).
        if let Some(checkpoint) = &mut commit.checkpoint {
            checkpoint.usage = Some(usage);
            checkpoint.stop_reason = Some(stop_reason);
        }
        commit.subsessions = concluded.children;
        commit.subsessions.append(&mut live.notified);
        events.extend(concluded.post);
        if concluded.status == CheckpointStatus::Active {
            // The run goes on: the commit goes out with the next model call.
            self.pipeline().send_ahead(live, commit, events, Some(step));
            return Ok(());
        }
        self.commit_closing(live, commit, events, concluded.suspended)
            .await
    }

    /// Applies `outcome` to `head`: its status, pending calls, output or error.
    pub(crate) fn close(
        &self,
        agent: &Agent,
        head: &mut SessionHead,
        outcome: Outcome,
        emitter: &Emitter,
    ) -> Concluded {
        let now = self.host.now_ms();
        let mut concluded = Concluded {
            status: match &outcome {
                Outcome::Continue => CheckpointStatus::Active,
                Outcome::Suspend(_) => CheckpointStatus::Suspended,
                Outcome::Complete(_) => CheckpointStatus::Completed,
                Outcome::Fail(_) => CheckpointStatus::Failed,
            },
            post: Vec::new(),
            suspended: None,
            children: Vec::new(),
        };
        let post = &mut concluded.post;
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
                    if let (PendingKind::Child, Some(child)) = (
                        p.kind,
                        agent.tool(&p.tool_name).and_then(|t| t.child_agent()),
                    ) {
                        let record = subsession(&head.id, p, child, None, now);
                        concluded.children.push(record);
                    }
                }
                let ids: Vec<String> = pending.iter().map(|p| p.tool_call_id.clone()).collect();
                post.push(emitter.event(ChunkBody::RunSuspended {
                    reason,
                    tool_call_ids: ids.clone(),
                }));
                head.pending = pending;
                head.suspended_reason = Some(reason);
                concluded.suspended = Some(ids);
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
        concluded
    }

    /// Fires `on_agent_suspended` when `head` (closed) suspends, before its commit,
    /// which takes the hook's writes with `state_ops`.
    pub(crate) async fn suspended_hook(
        &self,
        live: &mut Live,
        agent: &Agent,
        head: &SessionHead,
        state_ops: &mut Vec<PatchOp>,
        emitter: &Emitter,
    ) {
        let Some(reason) = head.suspended_reason.filter(|_| !head.pending.is_empty()) else {
            return;
        };
        let suspension = Suspension {
            reason,
            calls: &head.pending,
        };
        let hook = (Hook::Suspended(suspension), None);
        self.fire(live, agent, hook, state_ops, emitter).await;
    }

    /// Commits a step (or a resumption) that ends or suspends the run, then logs it.
    pub(crate) async fn commit_closing(
        &self,
        live: &mut Live,
        commit: Commit,
        events: Vec<StreamEvent>,
        suspended: Option<Vec<String>>,
    ) -> Result<(), RunError> {
        self.pipeline().commit(live, commit, events).await?;
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
            ("step", Num(live.head.step_count.into())),
            ("pending", Num(live.head.pending.len() as u64)),
            ("code", code),
            ("runSteps", Num(run.step_count.into())),
            ("inputTokens", Num(run.usage.input_tokens)),
            ("outputTokens", Num(run.usage.output_tokens)),
        ];
        self.log(live, level, event, &fields);
        if suspended.is_some() {
            self.log_suspended(live);
        }
        Ok(())
    }

    /// Builds a commit that closes a step (or a resumption): it appends `messages`,
    /// applies `state_ops` (which lead to `state`), and checkpoints the result with
    /// `status`. Returns it with the events that open its post-commit batch:
    /// `state_patch` (what the step's live patches did not show, if anything) and
    /// `step_committed`.
    pub(crate) fn checkpointed_commit(
        &self,
        mut head: SessionHead,
        messages: Vec<Message>,
        (state_ops, state): (Vec<PatchOp>, &Value),
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
            usage: None,
            stop_reason: None,
            waits: Vec::new(),
        };
        head.checkpoint_id = Some(checkpoint.id.clone());
        let mut events = Vec::new();
        let patches = emitter.committed_patch(&state_ops, state);
        if !patches.is_empty() {
            events.push(emitter.event(ChunkBody::StatePatch {
                patches,
                tool_call_id: None,
            }));
        }
        let state = if state_ops.is_empty() {
            StateChange::None
        } else {
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
        self.pipeline()
            .commit(live, head_only(head, false), post)
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
        // The call started already; what it asks goes out as `input_request`.
        PendingKind::Authorization | PendingKind::Elicitation => {
            let mut data = serde_json::json!({
                "toolCallId": p.tool_call_id,
                "toolName": p.tool_name,
                "kind": p.kind,
            });
            if let (Some(data), Some(serde_json::Value::Object(asked))) =
                (data.as_object_mut(), &p.request)
            {
                data.extend(asked.clone());
            }
            vec![emitter.event(ChunkBody::Custom {
                event_name: "input_request".into(),
                data,
            })]
        }
        PendingKind::Child => {
            let child_agent = agent.tool(&p.tool_name).and_then(|t| t.child_agent());
            // A companion call starts no session of its own.
            let Some(child_agent) = child_agent else {
                return vec![emitter.event(start(Executor::Server, None))];
            };
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
