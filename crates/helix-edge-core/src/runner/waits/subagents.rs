//! Sub-agents (feature `subagents`): each call of a sub-agent tool runs the tool's agent
//! as a child session of this deployment. The child's id is derived from the parent and
//! the call ([`child_session_id`]), so a start retried after a crash finds the child it
//! started before; a child past the call's timeout is aborted and the call fails as
//! timed out; a start that fails fails that call only. The child reports its end to
//! its parent ([`ChildEnded`]), which stores the outcome as the call's answer.

use super::{ChildEnded, ChildOrder, Fut, WaitKind, Waits, child_session_id, failed};
use crate::agent::Agent;
use crate::host::{Level, LogValue};
use crate::runner::{Live, RunError, Runner};
use crate::store::{AnswerOutcome, ParentRef, PendingCall, PendingKind, SessionHead, Store};
use crate::tool::ChildCall;
use futures::future::join_all;
use std::cell::RefCell;
use std::rc::Rc;

/// Sub-agent calls, run as child sessions of this deployment.
#[derive(Default)]
struct Subagents {
    /// The child sessions this instance started (a later process starts them again:
    /// a start is idempotent).
    started: RefCell<Vec<String>>,
}

impl<S: Store> WaitKind<S> {
    /// Sub-agent calls ([`Tool::subagent`](crate::tool::Tool::subagent)), as child
    /// sessions reached through the runner's [`Children`](super::Children).
    pub fn subagents() -> Self {
        Self(Rc::new(Subagents::default()))
    }
}

/// The child session a pending call of `head` waits on, if it is a sub-agent call (or
/// a child call whose tool this deployment no longer has).
fn child_of<S: Store>(rt: &Runner<S>, head: &SessionHead, p: &PendingCall) -> Option<String> {
    let agent = rt.agents.get(&head.agent);
    let call = agent
        .as_ref()
        .and_then(|a| a.tool(&p.tool_name)?.child_call().cloned());
    let other_kind = matches!(
        call,
        Some(ChildCall::Remote { .. } | ChildCall::Companion(_))
    );
    (p.kind == PendingKind::Child && !other_kind)
        .then(|| child_session_id(&head.id, &p.tool_call_id))
}

impl<S: Store> Waits<S> for Subagents {
    fn runs(&self, call: &ChildCall) -> bool {
        matches!(call, ChildCall::SubAgent { .. })
    }

    fn settle<'a>(
        &'a self,
        rt: &'a Runner<S>,
        live: &'a mut Live,
        agent: &'a Agent,
        open: Vec<PendingCall>,
    ) -> Fut<'a, Result<Option<u64>, RunError>> {
        Box::pin(async move {
            let now = rt.host.now_ms();
            let mut starts = Vec::new();
            for call in open {
                let child_id = child_session_id(&live.head.id, &call.tool_call_id);
                let tool = agent.tool(&call.tool_name);
                let Some((child_agent, timeout)) = tool.and_then(|t| t.subagent_of()) else {
                    continue;
                };
                if call.deadline.is_some_and(|d| d <= now) {
                    let reason = "The sub-agent exceeded its timeout.".to_string();
                    let order = ChildOrder::Abort { reason };
                    if let Err(e) = rt.children.send(&child_id, order).await {
                        let fields = [("error", LogValue::Str(&e))];
                        rt.log(live, Level::Warn, "subagent_abort_failed", &fields);
                    }
                    let message = format!(
                        "The sub-agent did not finish within {} s.",
                        timeout.as_secs()
                    );
                    let failure = failed("subagent_timeout", &message);
                    rt.store_child_answer(live, &call.tool_call_id, failure)?;
                } else if !self.started.borrow().contains(&child_id) {
                    let order = ChildOrder::Start {
                        agent: child_agent.to_string(),
                        message: call.arguments.to_string(),
                        parent: rt.parent_ref(live, &call.tool_call_id),
                        owner: live.head.owner.clone(),
                        trace: live.head.run.trace.as_ref().map(|t| t.context()),
                    };
                    starts.push((call.tool_call_id, child_id, order));
                }
            }
            let sent = join_all(
                starts
                    .iter()
                    .map(|(_, child_id, order)| rt.children.send(child_id, order.clone())),
            )
            .await;
            for ((call_id, child_id, _), result) in starts.into_iter().zip(sent) {
                match result {
                    Ok(()) => self.started.borrow_mut().push(child_id),
                    Err(e) => {
                        let failure = failed(
                            "subagent_dispatch_failed",
                            &format!("The sub-agent could not be started: {e}"),
                        );
                        rt.store_child_answer(live, &call_id, failure)?;
                    }
                }
            }
            Ok(None)
        })
    }

    fn asked<'a>(
        &'a self,
        rt: &'a Runner<S>,
        head: &'a SessionHead,
    ) -> Fut<'a, Result<Vec<String>, RunError>> {
        Box::pin(async move {
            let asked = head
                .pending
                .iter()
                .filter(|p| !rt.has_answer(&head.id, &p.tool_call_id))
                .filter_map(|p| child_of(rt, head, p))
                .collect();
            Ok(asked)
        })
    }

    fn order<'a>(
        &'a self,
        rt: &'a Runner<S>,
        head: &'a SessionHead,
        order: &'a ChildOrder,
    ) -> Fut<'a, ()> {
        Box::pin(async move {
            let ids: Vec<String> = head
                .pending
                .iter()
                .filter_map(|p| child_of(rt, head, p))
                .collect();
            rt.order_all(&head.id, &ids, order.clone()).await;
        })
    }

    fn report<'a>(
        &'a self,
        rt: &'a Runner<S>,
        live: &'a mut Live,
        report: &'a ChildEnded,
    ) -> Fut<'a, Option<Result<bool, RunError>>> {
        Box::pin(async move {
            let parent_id = &live.head.id;
            let waits = live.head.pending.iter().any(|p| {
                p.kind == PendingKind::Child
                    && p.tool_call_id == report.tool_call_id
                    && child_session_id(parent_id, &p.tool_call_id) == report.child_id
            });
            if !waits {
                return None;
            }
            let stored =
                rt.journal
                    .suspension
                    .answer(parent_id, &report.tool_call_id, &report.answer);
            Some(
                stored
                    .map(|s| s == AnswerOutcome::Stored)
                    .map_err(RunError::from),
            )
        })
    }
}

/// What a kind of local child session (a sub-agent's, a persistent child) shares.
impl<S: Store> Runner<S> {
    /// Sends `order` to each of `ids`, children of `session`; failures are logged.
    pub(crate) async fn order_all(&self, session: &str, ids: &[String], order: ChildOrder) {
        let sent = join_all(ids.iter().map(|id| self.children.send(id, order.clone()))).await;
        for (id, result) in ids.iter().zip(sent) {
            if let Err(e) = result {
                let fields = [
                    ("session", LogValue::Str(session)),
                    ("child", LogValue::Str(id)),
                    ("error", LogValue::Str(&e)),
                ];
                self.host.log(Level::Warn, "subagent_order_failed", &fields);
            }
        }
    }

    /// Where a child started by call `tool_call_id` of `live` reports.
    pub(crate) fn parent_ref(&self, live: &Live, tool_call_id: &str) -> ParentRef {
        ParentRef {
            session_id: live.head.id.clone(),
            tool_call_id: tool_call_id.to_string(),
            root_id: live
                .head
                .parent
                .as_ref()
                .map_or_else(|| live.head.id.clone(), |p| p.root_id.clone()),
        }
    }
}
