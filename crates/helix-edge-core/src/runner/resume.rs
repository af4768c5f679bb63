//! Resuming a suspended step from durable state alone: expire overdue client calls,
//! wait while any call is unanswered, claim approved calls for this instance in the
//! journal (so they run at most once), run them, turn every other answer into a tool
//! result, and commit the results with the merged writes. A run that finished in the
//! step that started sub-agents completes with that commit, once they have ended.

use super::INSTANCING;
use super::conclude::Outcome;
use super::exec::{Run, merge_into};
use super::finish::finish_waits;
use super::plan::suspended_step;
use super::results::{end_denied, end_with_result, end_without_running};
use super::waited::wait_of;
use super::{Live, Progress, RunError, Runner, ToolEnd, Waited};
use crate::agent::{Agent, Hook};
use crate::chunk::ChunkBody;
use crate::error::ToolError;
use crate::host::Level;
use crate::host::LogValue::Num;
use crate::message::{Message, ToolCall};
use crate::state::PatchOp;
use crate::store::{Answer, AnswerOutcome, CheckpointStatus, PendingKind, Store};

impl<S: Store> Runner<S> {
    /// Resumes the suspended step of `live` once every pending call is answered (or
    /// expired): runs the approved calls, turns every other answer into a tool result
    /// and commits them; until then, settles what waits outside and reports when to
    /// look again.
    pub(crate) async fn resume_step(
        &self,
        live: &mut Live,
        agent: &Agent,
    ) -> Result<Option<Progress>, RunError> {
        self.expire_overdue(live).await?;
        let look_again = self.settle_waits(live, agent).await?;
        let waiting: Vec<_> = live
            .head
            .pending
            .iter()
            .filter(|p| live.answer(&p.tool_call_id).is_none())
            .collect();
        if !waiting.is_empty() {
            let deadlines = waiting.iter().filter_map(|p| p.deadline);
            let next_deadline = deadlines.chain(look_again).min();
            return Ok(Some(Progress::Suspended { next_deadline }));
        }
        // The suspension commit is the head's last update: the wait is measured from it.
        let now = self.host.now_ms();
        let waited = now.saturating_sub(live.head.updated_at);
        if let Some(reason) = live.head.suspended_reason {
            let wait = Waited {
                reason: reason.as_str(),
                calls: &live.head.pending,
                since: live.head.updated_at,
            };
            self.observer.waited(&live.head.id, &wait, now);
        }
        let mine = self.claim_approved(live)?;
        let emitter = self.emitter(&live.head, Some(live.head.step_count));
        let mut state_ops = Vec::new();
        let hook = (Hook::Resumed, None);
        self.fire(live, agent, hook, &mut state_ops, &emitter).await;
        emitter.chunk(ChunkBody::RunResumed {
            turn: live.head.run.turn,
        });
        // How long the humans (approvals) and clients (client tools) took to answer.
        let client = live
            .head
            .pending
            .iter()
            .filter(|p| p.kind == PendingKind::Client)
            .count();
        let calls = live.head.pending.len() as u64;
        let fields = [
            ("waitedMs", Num(waited)),
            ("calls", Num(calls)),
            ("clientCalls", Num(client as u64)),
        ];
        self.log(live, Level::Info, "run_resumed", &fields);

        let pending = live.head.pending.clone();
        let calls: Vec<ToolCall> = pending
            .iter()
            .map(|p| ToolCall {
                id: p.tool_call_id.clone(),
                name: p.tool_name.clone(),
                arguments: p.arguments.clone(),
            })
            .collect();
        let runnable: Vec<usize> = (0..pending.len()).filter(|&i| mine[i]).collect();

        // Who approved each call, for its result and its `tool_end`; and the answer a
        // call that asked mid-call goes on with.
        let answers: Vec<_> = calls
            .iter()
            .zip(&pending)
            .map(|(call, p)| match live.answer(&call.id) {
                Some(Answer::Approval { decided_by, .. }) => (decided_by.clone(), None),
                Some(Answer::ClientResult { result, .. }) if p.kind.asked_mid_call() => {
                    (None, Some(result.clone()))
                }
                _ => (None, None),
            })
            .collect();
        // A step's own call may ask the user again; an instance of one (`_forEach`) may not.
        let (step_calls, _) = suspended_step(live);
        let own: Vec<bool> = calls
            .iter()
            .map(|c| step_calls.iter().any(|s| s.id == c.id))
            .collect();
        let runs: Vec<Run> = runnable
            .iter()
            .map(|&i| Run {
                approved: pending[i].kind == PendingKind::Approval,
                decided_by: answers[i].0.as_ref(),
                answer: answers[i].1.as_ref(),
                may_wait: own[i],
                ..Run::new(i, &calls[i], pending[i].output_path.as_deref())
            })
            .collect();
        let outcomes = self
            .tools()
            .run_parallel(agent, &runs, &mut live.state, &emitter)
            .await;

        let mut results: Vec<Option<Message>> = vec![None; calls.len()];
        let mut writes: Vec<Vec<PatchOp>> = vec![Vec::new(); calls.len()];
        // The calls that asked the user again: pending once more.
        let mut asked_again = Vec::new();
        let now = self.host.now_ms();
        for (i, outcome) in outcomes {
            let run = runs.iter().find(|r| r.index == i);
            if let (Some(wait), Some(run)) = (outcome.wait, run) {
                // A later instant than the wait answered: each wait keeps its own answer.
                asked_again.push(run.asked(wait, now.max(pending[i].since + 1)));
                continue;
            }
            results[i] = Some(outcome.message);
            writes[i] = outcome.writes;
        }
        drop(runs);
        let again: Vec<String> = asked_again.iter().map(|p| p.tool_call_id.clone()).collect();
        let waits_again = |id: &str| again.iter().any(|a| a == id);
        for (i, call) in calls.iter().enumerate() {
            if results[i].is_some() || waits_again(&call.id) {
                continue;
            }
            let output = pending[i].output_path.as_deref();
            let answer = live.answer(&call.id);
            let waited = answer.and_then(|a| self.end_wait(agent, call, a, output, live, &emitter));
            let message = match (waited, answer) {
                (Some((message, stored)), _) => {
                    writes[i].extend(stored);
                    message
                }
                _ if agent.tool(&call.name).is_none() => {
                    end_without_running(call, &ToolError::NotFound(call.name.clone()), &emitter)
                }
                (None, Some(Answer::Approval { approved: true, .. })) => {
                    end_without_running(call, &ToolError::Interrupted, &emitter)
                }
                // Another instance claimed its going on with the answer, and is gone.
                (None, Some(Answer::ClientResult { .. })) if pending[i].kind.asked_mid_call() => {
                    end_without_running(call, &ToolError::Interrupted, &emitter)
                }
                (
                    None,
                    Some(Answer::Approval {
                        approved: false,
                        reason,
                        decided_by,
                        ..
                    }),
                ) => end_denied(
                    call,
                    reason.as_deref(),
                    decided_by.as_ref(),
                    pending[i].approvers.as_ref(),
                    &emitter,
                ),
                (None, Some(Answer::ClientResult { result, .. })) => {
                    let (message, stored) =
                        end_with_result(call, result.clone(), output, &live.state, &emitter);
                    writes[i].extend(stored);
                    message
                }
                (None, Some(Answer::ClientError { error, .. })) => {
                    end_without_running(call, &ToolError::Client(error.clone()), &emitter)
                }
                (None, _) => end_without_running(call, &ToolError::TimedOut, &emitter),
            };
            let (decided_by, answer) = match answer {
                Some(Answer::Approval {
                    approved,
                    decided_by,
                    ..
                }) => (
                    decided_by.as_ref(),
                    if *approved { "approved" } else { "denied" },
                ),
                Some(Answer::ClientResult { .. } | Answer::ClientError { .. }) => (None, "client"),
                Some(Answer::Expired) | None => (None, "expired"),
                Some(
                    Answer::ChildOutput { .. }
                    | Answer::ChildFailed { .. }
                    | Answer::CompanionResult { .. },
                ) => (None, "child"),
            };
            let end = ToolEnd {
                step: live.head.step_count,
                call,
                result: &message,
                times: (now, now),
                decided_by,
                answer,
            };
            self.observer.tool_ended(&live.head.id, &end);
            results[i] = Some(message);
        }
        // An instance's result is kept as its (`_forEach`), for its call to gather.
        if let Some(instancing) = INSTANCING.first() {
            let (step_calls, _) = suspended_step(live);
            for (p, result) in pending.iter().zip(results.iter_mut()) {
                *result = result
                    .take()
                    .map(|m| (instancing.answered)(step_calls, p, m));
            }
        }
        self.ensure_not_aborted()?;
        // The hooks see the results' writes: they are told them once merged.
        let told = match agent.hooks() {
            Some(_) => writes.clone(),
            None => Vec::new(),
        };
        merge_into(&mut live.state, writes, &mut state_ops, &emitter);
        let told = (calls.as_slice(), results.as_slice(), told.as_slice());
        self.result_hooks(live, agent, told, &mut state_ops, &emitter)
            .await;

        let now = self.host.now_ms();
        // How long each approval and client call waited: on its message and the run.
        let mut waits = Vec::new();
        for (p, result) in pending.iter().zip(results.iter_mut()) {
            if p.kind == PendingKind::Child {
                continue;
            }
            let wait = wait_of(p, live.answer(&p.tool_call_id), now);
            if let Some(Message::Tool { metadata, .. }) = result {
                let waited = serde_json::Value::from(wait.waited_ms);
                metadata
                    .get_or_insert_default()
                    .insert("waitedMs".into(), waited);
            }
            waits.push(wait);
        }
        let mut messages: Vec<Message> = results.into_iter().flatten().collect();
        // A plan goes on: the calls that waited on these run now (and may wait again).
        let mut waiting_again = self
            .resume_plan(
                live,
                agent,
                &mut messages,
                &mut state_ops,
                &asked_again,
                &emitter,
            )
            .await?;
        waiting_again.splice(0..0, asked_again);
        // The step's finishing calls ran once nothing of it waits on a person or a
        // client any more.
        let finished = match finish_waits(&waiting_again) {
            true => None,
            false => {
                self.resume_finishing(live, agent, &mut messages, &mut state_ops, &emitter)
                    .await?
            }
        };
        // The answers used up: a call asking again waits for a new one.
        live.answers.retain(|(id, _)| !waits_again(id));
        let children = self.wait_records(live, agent, now).await?;
        let mut head = live.head.clone();
        head.pending.clear();
        head.suspended_reason = None;
        let closing = match (head.run.deferred_output.take(), finished) {
            // The run finished in the step that started these sub-agents: it completes
            // now that they have ended.
            (Some(output), _) => Some(Outcome::Complete(Some(output))),
            // The plan waits again.
            (None, _) if !waiting_again.is_empty() => Some(Outcome::Suspend(waiting_again)),
            // A finishing call that waited for the answers gave the output.
            (None, Some(output)) => Some(Outcome::Complete(Some(output))),
            (None, None) => None,
        };
        if let Some(outcome) = closing {
            let completes = matches!(outcome, Outcome::Complete(_));
            let concluded = self.close(agent, &mut head, outcome, &emitter);
            self.suspended_hook(live, agent, &head, &mut state_ops, &emitter)
                .await;
            let (mut commit, mut events) = self.checkpointed_commit(
                head,
                messages,
                (state_ops, &live.state),
                concluded.status,
                &emitter,
            );
            commit.subsessions = children;
            commit.subsessions.extend(concluded.children);
            record_waits(&mut commit, waits);
            events.extend(concluded.post);
            self.commit_closing(live, commit, events, concluded.suspended)
                .await?;
            return Ok(completes.then_some(Progress::Idle(live.head.status)));
        }
        let (mut commit, post) = self.checkpointed_commit(
            head,
            messages,
            (state_ops, &live.state),
            CheckpointStatus::Active,
            &emitter,
        );
        commit.subsessions = children;
        record_waits(&mut commit, waits);
        // The results go out with the next model call (or land before anything else).
        self.pipeline().send_ahead(live, commit, post, None);
        Ok(None)
    }

    /// Resolves unanswered client calls whose deadline has passed as expired, and
    /// approvals whose deadline has passed as denied by it.
    async fn expire_overdue(&self, live: &mut Live) -> Result<(), RunError> {
        let now = self.host.now_ms();
        let overdue: Vec<(String, Answer)> = live
            .head
            .pending
            .iter()
            .filter(|p| p.deadline.is_some_and(|d| d <= now))
            .filter(|p| live.answer(&p.tool_call_id).is_none())
            .filter_map(|p| match p.kind {
                PendingKind::Client => Some((p.tool_call_id.clone(), Answer::Expired)),
                PendingKind::Approval => {
                    let secs = p.deadline.unwrap_or(now).saturating_sub(p.since) / 1000;
                    let denied = Answer::Approval {
                        approved: false,
                        reason: Some(format!(
                            "Nobody decided within the approval's deadline ({secs} s)."
                        )),
                        answered_at: now,
                        decided_by: Some(crate::store::Owner {
                            subject: crate::store::Owner::DEADLINE.into(),
                            tenant: None,
                        }),
                    };
                    Some((p.tool_call_id.clone(), denied))
                }
                _ => None,
            })
            .collect();
        for (id, expired) in overdue {
            let answer = match self
                .journal
                .suspension
                .answer(&live.head.id, &id, &expired)?
            {
                AnswerOutcome::Stored => {
                    let p = live.head.pending.iter().find(|p| p.tool_call_id == id);
                    if let Some(p) = p {
                        self.log_answered(live, p, &expired);
                    }
                    expired
                }
                // The client answered just in time: its answer stands.
                AnswerOutcome::AlreadyAnswered(answer) => answer,
            };
            live.answers.push((id, answer));
        }
        Ok(())
    }

    /// Durably claims the approved calls, and the answered ones that asked mid-call, for
    /// this instance before any runs; returns, per pending call, whether it is this
    /// instance's to run. A call another instance
    /// claimed first (one that is gone) never runs again.
    fn claim_approved(&self, live: &Live) -> Result<Vec<bool>, RunError> {
        let head = &live.head;
        let instance = self.config.instance.as_str();
        let claim = |p: &crate::store::PendingCall| {
            let runs = match live.answer(&p.tool_call_id) {
                Some(Answer::Approval { approved, .. }) => *approved,
                // A call that asked mid-call goes on with the answer.
                Some(Answer::ClientResult { .. }) => p.kind.asked_mid_call(),
                _ => false,
            };
            if !runs {
                return Ok(false);
            }
            let owner = self.journal.suspension.claim(
                &head.run.run_id,
                head.step_count,
                &p.answer_id(),
                instance,
            )?;
            Ok(owner == instance)
        };
        head.pending.iter().map(claim).collect()
    }
}

/// The waits of the calls a resumption answers, kept with its checkpoint.
fn record_waits(commit: &mut crate::store::Commit, waits: Vec<crate::store::CallWait>) {
    if let Some(checkpoint) = &mut commit.checkpoint {
        checkpoint.waits = waits;
    }
}
