//! Remote sub-agents (feature `remote-subagents`): a call of a
//! [`Tool::remote_subagent`](crate::tool::Tool::remote_subagent) runs as a session of
//! another helix-edge deployment, reached through its public API ([`Remotes`]).
//!
//! - The call is recorded as a pending child call, like a local sub-agent's. Its remote
//!   session has the id a local child would have ([`child_session_id`]): a start
//!   retried after a crash finds the session it created before (`409 session_exists`)
//!   instead of creating another, and nothing finished there runs again.
//! - The parent holds no connection while it waits. It **polls**: each drive of the
//!   suspended parent asks the remote for the session ([`Remotes::view`], which also
//!   brings the remote's new stream chunks into the parent's stream), and the drive
//!   suspends again with the next poll as its deadline, so the platform's alarm wakes
//!   the parent then. Polls come every second while the remote session changes and
//!   back off to [`MAX_POLL_MS`] while it does not (a human deciding an approval there).
//!   Polling rather than a callback from the remote: the remote needs no route back to
//!   the parent and no credential of it, a parent behind a private network works, and
//!   the poll is what recovery after a crash needs anyway — one path, not two.
//! - Answers submitted at the root for calls pending in the remote session are
//!   forwarded to it ([`Remotes::answer`]); interrupt, resume and abort are passed on.
//! - A remote that cannot be reached (or answers garbage) [`MAX_FAILURES`] polls in a
//!   row, that refuses the session, or that exceeds the call's timeout fails the call
//!   with a classified tool error (`subagent_remote_unavailable`, `_rejected`,
//!   `_invalid`, `subagent_timeout`): the model sees it and the parent goes on.

mod api;
mod client;

pub use api::{
    NoRemotes, RemoteAnswer, RemoteError, RemoteOrder, RemoteView, Remotes, submission_body,
};
pub use client::{ApiRemotes, RemoteHttp, relayed_chunks};

use super::{ChildOrder, Fut, WaitKind, Waits, child_session_id};
use crate::agent::Agent;
use crate::host::{Level, LogValue};
use crate::runner::{Live, RunError, Runner, Submission};
use crate::store::{Answer, PendingCall, PendingKind, SessionHead, Store};
use crate::tool::{ChildCall, RemoteAgent};
use futures::future::join_all;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// Polls that fail in a row before the call fails.
pub const MAX_FAILURES: u32 = 3;
/// The first wait between two polls of a remote session (ms).
pub const MIN_POLL_MS: u64 = 1_000;
/// The longest wait between two polls of a remote session that does not change (ms).
pub const MAX_POLL_MS: u64 = 15_000;

/// How this instance polls one remote session (kept in memory: a new process starts
/// polling afresh, which is all recovery needs).
#[derive(Debug, Clone, Copy, Default)]
struct Polling {
    version: Option<u64>,
    wait_ms: u64,
    failures: u32,
}

/// Remote sub-agent calls, polled through [`Remotes`].
struct RemoteCalls {
    remotes: Rc<dyn Remotes>,
    /// The remote sessions this instance started (a start is idempotent).
    started: RefCell<Vec<String>>,
    /// How this instance polls each remote session it waits on.
    polls: RefCell<HashMap<String, Polling>>,
}

impl<S: Store> WaitKind<S> {
    /// Remote sub-agent calls ([`Tool::remote_subagent`](crate::tool::Tool::remote_subagent)),
    /// run on other deployments through `remotes`.
    pub fn remote(remotes: Rc<dyn Remotes>) -> Self {
        Self(Rc::new(RemoteCalls {
            remotes,
            started: RefCell::default(),
            polls: RefCell::default(),
        }))
    }
}

/// The remote agent a pending call of `head` runs on, if it is a remote call.
fn remote_call<S: Store>(
    rt: &Runner<S>,
    head: &SessionHead,
    p: &PendingCall,
) -> Option<Rc<RemoteAgent>> {
    if p.kind != PendingKind::Child {
        return None;
    }
    let agent = rt.agents.get(&head.agent)?;
    agent.tool(&p.tool_name)?.remote_of().cloned()
}

/// The remote calls of `head` still waiting: each call's remote and session id.
fn open_remotes<S: Store>(rt: &Runner<S>, head: &SessionHead) -> Vec<(Rc<RemoteAgent>, String)> {
    head.pending
        .iter()
        .filter(|p| !rt.has_answer(&head.id, &p.tool_call_id))
        .filter_map(|p| {
            let remote = remote_call(rt, head, p)?;
            Some((remote, child_session_id(&head.id, &p.tool_call_id)))
        })
        .collect()
}

impl<S: Store> Waits<S> for RemoteCalls {
    fn runs(&self, call: &ChildCall) -> bool {
        matches!(call, ChildCall::Remote { .. })
    }

    /// Starts, polls and times out the unanswered remote calls; the calls that ended
    /// get their answers (stored first, so they stand). Returns when the next poll is
    /// due.
    fn settle<'a>(
        &'a self,
        rt: &'a Runner<S>,
        live: &'a mut Live,
        agent: &'a Agent,
        open: Vec<PendingCall>,
    ) -> Fut<'a, Result<Option<u64>, RunError>> {
        Box::pin(async move {
            let calls: Vec<(PendingCall, Rc<RemoteAgent>)> = open
                .into_iter()
                .filter_map(|p| {
                    let remote = agent.tool(&p.tool_name)?.remote_of()?.clone();
                    Some((p, remote))
                })
                .collect();
            let head_id = live.head.id.clone();
            let ended = join_all(
                calls
                    .iter()
                    .map(|(call, remote)| self.poll(rt, &head_id, call, remote)),
            )
            .await;
            let now = rt.host.now_ms();
            let mut due: Option<u64> = None;
            for ((call, _), answer) in calls.iter().zip(ended) {
                let child_id = child_session_id(&head_id, &call.tool_call_id);
                match answer {
                    Some(answer) => {
                        self.polls.borrow_mut().remove(&child_id);
                        rt.store_child_answer(live, &call.tool_call_id, answer)?;
                    }
                    None => {
                        let wait = self
                            .polls
                            .borrow()
                            .get(&child_id)
                            .map_or(MIN_POLL_MS, |p| p.wait_ms);
                        let at = now + wait;
                        due = Some(due.map_or(at, |t| t.min(at)));
                    }
                }
            }
            Ok(due)
        })
    }

    fn listed<'a>(&'a self, rt: &'a Runner<S>, head: &'a SessionHead) -> Fut<'a, Vec<PendingCall>> {
        Box::pin(async move {
            let open = open_remotes(rt, head);
            let views = join_all(
                open.iter()
                    .map(|(remote, id)| self.remotes.view(remote, id)),
            )
            .await;
            let mut calls = Vec::new();
            for ((_, child_id), view) in open.iter().zip(views) {
                match view {
                    Ok(view) => calls.extend(view.pending),
                    Err(e) => {
                        let fields = [
                            ("session", LogValue::Str(&head.id)),
                            ("child", LogValue::Str(child_id)),
                            ("error", LogValue::Str(e.message())),
                        ];
                        rt.host.log(Level::Warn, "subagent_unreachable", &fields);
                    }
                }
            }
            calls
        })
    }

    /// Forwards `submission` to the remote session of `head` that has the call pending,
    /// once `by` may give the answer by the rule of a local call (the remote's pending
    /// call names its `approvers`; the root's owner is the owner): the remote is told
    /// with the deployment's token, which may answer anything, so the rule is kept
    /// here, and the remote is told who decided (`decidedBy`). The route is recorded so
    /// a second answer is refused here. A remote that refuses it gives the client its
    /// refusal.
    fn route<'a>(
        &'a self,
        rt: &'a Runner<S>,
        head: &'a SessionHead,
        submission: &'a Submission,
        by: &'a crate::auth::Principal,
    ) -> Fut<'a, Result<bool, RunError>> {
        Box::pin(async move {
            let call_id = submission.call_id();
            let mut unreachable = None;
            for (remote, child_id) in open_remotes(rt, head) {
                let pending = match self.remotes.view(&remote, &child_id).await {
                    Ok(view) => view.pending.into_iter().find(|p| p.tool_call_id == call_id),
                    Err(e) => {
                        unreachable = Some(e);
                        continue;
                    }
                };
                let Some(pending) = pending else { continue };
                let decided_by =
                    crate::runner::ops::answer::answerer(by, &pending, head.owner.as_ref(), None)?;
                let mut body = submission_body(submission);
                if let (Some(decider), Some(fields)) = (decided_by, body.as_object_mut()) {
                    fields.insert("decidedBy".into(), decider.to_json());
                }
                match self.remotes.answer(&remote, &child_id, &body).await {
                    Ok(RemoteAnswer::Taken) => {
                        rt.record_route(call_id, &child_id)?;
                        // It goes on now: poll it soon again, not after the back-off.
                        self.polls.borrow_mut().remove(&child_id);
                        return Ok(true);
                    }
                    Ok(RemoteAnswer::NotThere) => {}
                    Ok(RemoteAnswer::Refused(e)) => return Err(e),
                    Err(e) => unreachable = Some(e),
                }
            }
            match unreachable {
                Some(e) => Err(RunError::RemoteUnavailable(e.message().to_string())),
                None => Ok(false),
            }
        })
    }

    fn order<'a>(
        &'a self,
        rt: &'a Runner<S>,
        head: &'a SessionHead,
        order: &'a ChildOrder,
    ) -> Fut<'a, ()> {
        Box::pin(async move {
            let passed_on = match order {
                ChildOrder::Abort { .. } => RemoteOrder::Abort,
                ChildOrder::Interrupt { .. } => RemoteOrder::Interrupt,
                ChildOrder::Resume => RemoteOrder::Resume,
                _ => return,
            };
            self.order_open(rt, head, passed_on).await;
        })
    }

    /// Remote sessions still running for it end; their records are their deployment's.
    fn on_delete<'a>(&'a self, rt: &'a Runner<S>, head: &'a SessionHead) -> Fut<'a, ()> {
        Box::pin(self.order_open(rt, head, RemoteOrder::Abort))
    }
}

impl RemoteCalls {
    /// One remote call's turn: its timeout, its start (once per instance: a start is
    /// idempotent), then a look at the session. `Some` once the call ends.
    async fn poll<S: Store>(
        &self,
        rt: &Runner<S>,
        head_id: &str,
        call: &PendingCall,
        remote: &RemoteAgent,
    ) -> Option<Answer> {
        let child_id = child_session_id(head_id, &call.tool_call_id);
        if call.deadline.is_some_and(|d| d <= rt.host.now_ms()) {
            self.order_one(rt, head_id, remote, &child_id, RemoteOrder::Abort)
                .await;
            let secs = call.deadline.unwrap_or_default().saturating_sub(call.since) / 1000;
            return Some(Answer::ChildFailed {
                code: "subagent_timeout".into(),
                error: format!("The remote sub-agent did not finish within {secs} s."),
            });
        }
        if !self.started.borrow().contains(&child_id) {
            let message = call.arguments.to_string();
            match self.remotes.start(remote, &child_id, &message).await {
                Ok(()) => self.started.borrow_mut().push(child_id.clone()),
                Err(e) => {
                    return self
                        .failed(rt, head_id, remote, &child_id, e, "could not be started")
                        .await;
                }
            }
        }
        match self.remotes.view(remote, &child_id).await {
            Ok(view) => {
                let mut polls = self.polls.borrow_mut();
                let polling = polls.entry(child_id).or_default();
                polling.wait_ms = match polling.version == Some(view.version) {
                    true => (polling.wait_ms * 2).clamp(MIN_POLL_MS, MAX_POLL_MS),
                    false => MIN_POLL_MS,
                };
                polling.version = Some(view.version);
                polling.failures = 0;
                view.outcome()
            }
            Err(e) => {
                self.failed(rt, head_id, remote, &child_id, e, "could not be reached")
                    .await
            }
        }
    }

    /// A remote call's request failed: a refusal or garbage ends the call at once, an
    /// unreachable remote after [`MAX_FAILURES`] failures in a row (it is aborted, in
    /// case it is only unreachable from here).
    async fn failed<S: Store>(
        &self,
        rt: &Runner<S>,
        head_id: &str,
        remote: &RemoteAgent,
        child_id: &str,
        error: RemoteError,
        what: &str,
    ) -> Option<Answer> {
        let failures = {
            let mut polls = self.polls.borrow_mut();
            let polling = polls.entry(child_id.to_string()).or_default();
            polling.failures += 1;
            polling.wait_ms = MIN_POLL_MS * 2;
            polling.failures
        };
        let fields = [
            ("session", LogValue::Str(head_id)),
            ("child", LogValue::Str(child_id)),
            ("code", LogValue::Str(error.code())),
            ("error", LogValue::Str(error.message())),
            ("failures", LogValue::Num(u64::from(failures))),
        ];
        rt.host.log(Level::Warn, "subagent_remote_failed", &fields);
        if matches!(error, RemoteError::Unavailable(_)) && failures < MAX_FAILURES {
            return None;
        }
        self.order_one(rt, head_id, remote, child_id, RemoteOrder::Abort)
            .await;
        Some(error.answer(what))
    }

    /// Passes `order` on to a remote session; a failure is logged (a session that
    /// misses an abort is one its deployment ends by its own rules).
    async fn order_one<S: Store>(
        &self,
        rt: &Runner<S>,
        head_id: &str,
        remote: &RemoteAgent,
        child_id: &str,
        order: RemoteOrder,
    ) {
        if let Err(e) = self.remotes.order(remote, child_id, order).await {
            let fields = [
                ("session", LogValue::Str(head_id)),
                ("child", LogValue::Str(child_id)),
                ("order", LogValue::Str(order.path())),
                ("error", LogValue::Str(e.message())),
            ];
            rt.host.log(Level::Warn, "subagent_order_failed", &fields);
        }
    }

    /// Passes `order` on to every remote session `head` waits on.
    async fn order_open<S: Store>(&self, rt: &Runner<S>, head: &SessionHead, order: RemoteOrder) {
        let open = open_remotes(rt, head);
        let sent = open
            .iter()
            .map(|(remote, child_id)| self.order_one(rt, &head.id, remote, child_id, order));
        join_all(sent).await;
    }
}
