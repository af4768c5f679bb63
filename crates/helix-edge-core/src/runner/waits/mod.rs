//! Work a run waits on outside its session: one abstraction ([`Waits`]) for every kind,
//! each kind in a module of its own, registered with the runner ([`WaitKind`],
//! [`Runner::with_waits`]) by the platform that can carry it out:
//! - `subagents` (feature `subagents`): a sub-agent call's child session here;
//! - `companions` (feature `persistent-children`): the companion calls on persistent
//!   children, each a session that keeps its transcript between turns;
//! - `remote` (feature `remote-subagents`): a session of another deployment, polled.
//!
//! Every such call is a pending `child` call, recorded durably before anything reaches
//! the other side and settled from durable state alone: the kind starts what it must
//! ([`Waits::settle`], idempotently), stores the answer once the other side ended, and
//! passes answers, interrupts, resumes and aborts on. The session tree's own protocol
//! (orders to children, their reports) is [`child`]'s.

mod child;
#[cfg(feature = "persistent-children")]
mod companions;
#[cfg(feature = "remote-subagents")]
mod remote;
#[cfg(feature = "subagents")]
mod subagents;

pub use child::{
    CREATE_PATH, ChildEnded, ChildOrder, Children, DELETE_PATH, ENDED_PATH, MESSAGE_PATH,
    NoChildren, OrderRequest, RELAY_PATH, Relay, child_outcome, child_session_id, ended_report,
    parse_message,
};
pub(crate) use child::{end_child_call, failed, subsession};
#[cfg(feature = "remote-subagents")]
pub use remote::{
    ApiRemotes, MAX_FAILURES, MAX_POLL_MS, MIN_POLL_MS, NoRemotes, RemoteAnswer, RemoteError,
    RemoteHttp, RemoteOrder, RemoteView, Remotes, relayed_chunks, submission_body,
};

use super::emit::Emitter;
use super::{Live, RunError, Runner, Submission};
use crate::agent::Agent;
use crate::host::{Level, LogValue};
use crate::message::{Message, ToolCall};
use crate::state::PatchOp;
use crate::store::{
    Answer, AnswerOutcome, PendingCall, PendingKind, SessionHead, Store, SubSession,
};
use crate::tool::ChildCall;
use futures::future::{LocalBoxFuture, join_all};
use std::rc::Rc;

/// A future of a kind's work.
type Fut<'a, T> = LocalBoxFuture<'a, T>;

/// A kind of work a run waits on outside its session, as a runner holds it. Each
/// method has the kind's part of one runner operation; the defaults do nothing.
pub(crate) trait Waits<S: Store> {
    /// Whether calls of this kind are `call`'s.
    fn runs(&self, call: &ChildCall) -> bool;

    /// Before a step's model call: the messages the step tells the model (notices of
    /// children's ends), their records put in `live.notified` for its commit.
    fn notices<'a>(
        &'a self,
        _rt: &'a Runner<S>,
        _live: &'a mut Live,
        _agent: &'a Agent,
    ) -> Fut<'a, Result<Vec<Message>, RunError>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    /// After the model's answer: what the calls leave to the runtime (a child's name).
    fn complete_calls<'a>(
        &'a self,
        _rt: &'a Runner<S>,
        _live: &'a Live,
        _agent: &'a Agent,
        _calls: &'a mut [ToolCall],
    ) -> Fut<'a, Result<(), RunError>> {
        Box::pin(async { Ok(()) })
    }

    /// Settles this kind's unanswered calls `open`: starts what was not started by this
    /// instance, times out what is overdue, stores the answers that are known (they go
    /// into `live.answers`). Returns when the run should look again (ms), for a kind
    /// that polls.
    fn settle<'a>(
        &'a self,
        rt: &'a Runner<S>,
        live: &'a mut Live,
        agent: &'a Agent,
        open: Vec<PendingCall>,
    ) -> Fut<'a, Result<Option<u64>, RunError>>;

    /// The tool message of an answered call of this kind, when it is not a child's
    /// output ([`end_child_call`]).
    fn end_call(
        &self,
        _call: &ToolCall,
        _answer: &Answer,
        _output: Option<&str>,
        _state: &serde_json::Value,
        _emitter: &Emitter,
    ) -> Option<(Message, Option<PatchOp>)> {
        None
    }

    /// The parent's records of its children once a resumption answered its calls.
    fn records<'a>(
        &'a self,
        _rt: &'a Runner<S>,
        _live: &'a Live,
        _agent: &'a Agent,
        _now: u64,
    ) -> Fut<'a, Result<Vec<SubSession>, RunError>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    /// The child sessions of this deployment whose pending calls surface at `head` and
    /// take the answers submitted there.
    fn asked<'a>(
        &'a self,
        _rt: &'a Runner<S>,
        _head: &'a SessionHead,
    ) -> Fut<'a, Result<Vec<String>, RunError>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    /// Calls pending beyond this deployment that surface at `head`.
    fn listed<'a>(
        &'a self,
        _rt: &'a Runner<S>,
        _head: &'a SessionHead,
    ) -> Fut<'a, Vec<PendingCall>> {
        Box::pin(async { Vec::new() })
    }

    /// Passes `submission` from `by` on beyond this deployment, once `by` may give it
    /// (the rule of a local call, checked here: the deployment beyond is told with a
    /// credential that may answer anything); `true` once taken there.
    fn route<'a>(
        &'a self,
        _rt: &'a Runner<S>,
        _head: &'a SessionHead,
        _submission: &'a Submission,
        _by: &'a crate::auth::Principal,
    ) -> Fut<'a, Result<bool, RunError>> {
        Box::pin(async { Ok(false) })
    }

    /// Passes an interrupt, resume or abort of `head` on to what it waits on.
    fn order<'a>(
        &'a self,
        _rt: &'a Runner<S>,
        _head: &'a SessionHead,
        _order: &'a ChildOrder,
    ) -> Fut<'a, ()> {
        Box::pin(async {})
    }

    /// `head` is being deleted: ends what is not one of its recorded children here.
    fn on_delete<'a>(&'a self, _rt: &'a Runner<S>, _head: &'a SessionHead) -> Fut<'a, ()> {
        Box::pin(async {})
    }

    /// A child of `live` reports that it ended; `None` when the report is not this
    /// kind's, else whether the parent has work to do now.
    fn report<'a>(
        &'a self,
        _rt: &'a Runner<S>,
        _live: &'a mut Live,
        _report: &'a ChildEnded,
    ) -> Fut<'a, Option<Result<bool, RunError>>> {
        Box::pin(async { None })
    }
}

/// A kind of work a run waits on outside its session, registered with a runner
/// ([`Runner::with_waits`]): `WaitKind::subagents()`, `WaitKind::persistent_children()`
/// or `WaitKind::remote(..)`, each with its feature.
pub struct WaitKind<S: Store>(pub(crate) Rc<dyn Waits<S>>);

impl<S: Store> Clone for WaitKind<S> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<S: Store> Runner<S> {
    /// The kind that runs `tool_name`'s calls of `agent`.
    fn kind_of(&self, agent: &Agent, tool_name: &str) -> Option<&dyn Waits<S>> {
        let call = agent.tool(tool_name)?.child_call()?;
        self.waits.iter().find(|k| k.0.runs(call)).map(|k| &*k.0)
    }

    /// Settles the unanswered child calls of `live`, each by its kind; a call no kind
    /// runs (its tool is gone, or this runner cannot run it) fails. Returns when a
    /// kind wants the run looked at again.
    pub(crate) async fn settle_waits(
        &self,
        live: &mut Live,
        agent: &Agent,
    ) -> Result<Option<u64>, RunError> {
        let open: Vec<PendingCall> = live
            .head
            .pending
            .iter()
            .filter(|p| p.kind == PendingKind::Child && live.answer(&p.tool_call_id).is_none())
            .cloned()
            .collect();
        let mut due: Option<u64> = None;
        for kind in &self.waits {
            let calls: Vec<PendingCall> = open
                .iter()
                .filter(|p| {
                    let call = agent.tool(&p.tool_name).and_then(|t| t.child_call());
                    call.is_some_and(|c| kind.0.runs(c))
                })
                .cloned()
                .collect();
            if calls.is_empty() {
                continue;
            }
            let at = kind.0.settle(self, live, agent, calls).await?;
            due = match (due, at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        for p in open {
            if self.kind_of(agent, &p.tool_name).is_none() {
                let failure = failed("subagent_unknown", "This sub-agent tool no longer exists.");
                self.store_child_answer(live, &p.tool_call_id, failure)?;
            }
        }
        Ok(due)
    }

    /// Notices of children's ends the next step tells the model (see [`Waits::notices`]).
    pub(crate) async fn wait_notices(
        &self,
        live: &mut Live,
        agent: &Agent,
    ) -> Result<Vec<Message>, RunError> {
        live.notified.clear();
        let mut notices = Vec::new();
        for kind in &self.waits {
            notices.extend(kind.0.notices(self, live, agent).await?);
        }
        Ok(notices)
    }

    /// Lets each kind complete the model's calls (see [`Waits::complete_calls`]).
    pub(crate) async fn complete_calls(
        &self,
        live: &Live,
        agent: &Agent,
        calls: &mut [ToolCall],
    ) -> Result<(), RunError> {
        for kind in &self.waits {
            kind.0.complete_calls(self, live, agent, calls).await?;
        }
        Ok(())
    }

    /// The tool message of an answered child call, with what it stores.
    pub(crate) fn end_wait(
        &self,
        agent: &Agent,
        call: &ToolCall,
        answer: &Answer,
        output: Option<&str>,
        live: &Live,
        emitter: &Emitter,
    ) -> Option<(Message, Option<PatchOp>)> {
        if let Some(kind) = self.kind_of(agent, &call.name)
            && let Some(ended) = kind.end_call(call, answer, output, &live.state, emitter)
        {
            return Some(ended);
        }
        matches!(
            answer,
            Answer::ChildOutput { .. } | Answer::ChildFailed { .. }
        )
        .then(|| {
            let at = (live.head.id.as_str(), &live.state);
            end_child_call(agent, call, answer, output, at, emitter)
        })
    }

    /// The records of `live`'s children once its resumption answered its calls: each
    /// sub-agent call's child, and what each kind keeps.
    pub(crate) async fn wait_records(
        &self,
        live: &Live,
        agent: &Agent,
        now: u64,
    ) -> Result<Vec<SubSession>, RunError> {
        let mut records: Vec<SubSession> = live
            .head
            .pending
            .iter()
            .filter(|p| p.kind == PendingKind::Child)
            .filter_map(|p| {
                let child = agent.tool(&p.tool_name)?.child_agent()?;
                let answer = live.answer(&p.tool_call_id);
                Some(subsession(&live.head.id, p, child, answer, now))
            })
            .collect();
        for kind in &self.waits {
            records.extend(kind.0.records(self, live, agent, now).await?);
        }
        Ok(records)
    }

    /// The children whose pending calls surface at `head`, and which take the answers
    /// submitted there: those it still waits on, and its running non-blocking helpers.
    pub(crate) async fn asked_children(&self, head: &SessionHead) -> Result<Vec<String>, RunError> {
        let mut children = Vec::new();
        for kind in &self.waits {
            children.extend(kind.0.asked(self, head).await?);
        }
        Ok(children)
    }

    /// Passes `submission` on beyond this deployment; `true` once taken there.
    pub(crate) async fn route_beyond(
        &self,
        head: &SessionHead,
        submission: &Submission,
        by: &crate::auth::Principal,
    ) -> Result<bool, RunError> {
        for kind in &self.waits {
            if kind.0.route(self, head, submission, by).await? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The calls pending in the children `head` waits on, and below them, that a client
    /// answers (approvals and client tools): each child is asked. A child that cannot
    /// be reached lists nothing (logged).
    pub async fn descendant_calls(&self, head: &SessionHead) -> Result<Vec<PendingCall>, RunError> {
        let children = self.asked_children(head).await?;
        let listed = join_all(children.iter().map(|id| self.children.pending(id))).await;
        let mut calls = Vec::new();
        for kind in &self.waits {
            calls.extend(kind.0.listed(self, head).await);
        }
        for (id, result) in children.iter().zip(listed) {
            match result {
                Ok(pending) => calls.extend(pending),
                Err(e) => {
                    let fields = [
                        ("session", LogValue::Str(&head.id)),
                        ("child", LogValue::Str(id)),
                        ("error", LogValue::Str(&e)),
                    ];
                    self.host.log(Level::Warn, "subagent_unreachable", &fields);
                }
            }
        }
        Ok(calls)
    }

    /// Passes `order` on to what `head` waits on, kind by kind; failures are logged (a
    /// child that misses an abort still ends at its timeout).
    pub(crate) async fn order_children(&self, head: &SessionHead, order: ChildOrder) {
        for kind in &self.waits {
            kind.0.order(self, head, &order).await;
        }
    }

    /// `head` is being deleted: each kind ends what is not a recorded child.
    pub(crate) async fn waits_deleted(&self, head: &SessionHead) {
        for kind in &self.waits {
            kind.0.on_delete(self, head).await;
        }
    }

    /// A child of session `parent_id` reports that it ended: its kind stores the outcome
    /// as the answer of the call it runs for (the first answer stands: a timeout
    /// recorded before wins). `Ok(true)` when the parent has work to do now; a report
    /// about a call the parent does not wait on (a late or repeated one) changes
    /// nothing.
    pub async fn child_ended(&self, parent_id: &str, report: ChildEnded) -> Result<bool, RunError> {
        let mut live = self.load(parent_id).await?;
        let outcome = matches!(
            report.answer,
            Answer::ChildOutput { .. } | Answer::ChildFailed { .. }
        );
        if !outcome {
            return Ok(false);
        }
        for kind in &self.waits {
            if let Some(taken) = kind.0.report(self, &mut live, &report).await {
                return taken;
            }
        }
        Ok(false)
    }

    /// Stores `answer` for a child call unless one stands already; either way the
    /// standing answer goes into `live.answers`.
    pub(crate) fn store_child_answer(
        &self,
        live: &mut Live,
        call_id: &str,
        answer: Answer,
    ) -> Result<(), RunError> {
        let stored = self
            .journal
            .suspension
            .answer(&live.head.id, call_id, &answer)?;
        let standing = match stored {
            AnswerOutcome::Stored => answer,
            AnswerOutcome::AlreadyAnswered(existing) => existing,
        };
        live.answers.push((call_id.to_string(), standing));
        Ok(())
    }
}
