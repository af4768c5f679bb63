//! Sub-agents: child sessions started by a parent's sub-agent tool calls. The parent
//! never waits in memory, and never reads a child's rows: its step records a pending
//! `child` call per sub-agent call (and a [`SubSession`] reference) and suspends; the
//! protocol between the two sessions is messages, which the platform carries between
//! their objects:
//! - the parent orders its children ([`ChildOrder`] through [`Children`]): a start is
//!   idempotent (the child id is derived from the parent and the call, so a retried
//!   start after a crash finds the child it started before), as are abort, interrupt
//!   and resume;
//! - a child that ends reports to its parent ([`ChildEnded`], built by
//!   [`ended_report`]), again until it is delivered; the parent stores the outcome as
//!   the call's answer ([`Runner::child_ended`]) and resumes from durable state;
//! - a child past the call's timeout is aborted and the call fails as timed out; a
//!   start that fails fails that call only;
//! - answers to calls pending in a child are submitted to the root, which passes them
//!   down to the children it waits on ([`Routed::Descendants`](super::Routed)), and the
//!   root lists those calls as its own ([`Runner::descendant_calls`]).

// Without the feature `subagents` the machinery below is not reached: the runner's ways
// into it are the stubs next to each.
#![cfg_attr(not(feature = "subagents"), allow(dead_code, unused_imports))]

use super::emit::Emitter;
use super::{Live, RunError, Runner};
use crate::agent::Agent;
use crate::chunk::ChunkBody;
use crate::message::{Message, ToolCall};
use crate::state::PatchOp;
use crate::store::{
    Answer, AnswerOutcome, ChildStatus, ParentRef, PendingCall, PendingKind, SessionHead,
    SessionStatus, Store, SubSession,
};
use futures::future::{LocalBoxFuture, join_all};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What a parent asks of one of its child sessions.
#[derive(Debug, Clone, PartialEq)]
pub enum ChildOrder {
    /// Create the child and start its run (a child that exists already is left alone).
    Start {
        /// The child's agent.
        agent: String,
        /// Its first message: the call's arguments as JSON text.
        message: String,
        /// Where it reports.
        parent: ParentRef,
    },
    /// End it for good.
    Abort {
        /// Why.
        reason: String,
    },
    /// Stop it at its next step boundary.
    Interrupt {
        /// Why.
        reason: Option<String>,
    },
    /// Continue it after an interrupt.
    Resume,
    /// Start a persistent child's next turn with `message`, for the parent's call
    /// `tool_call_id` (a child that has that call already is left alone).
    #[cfg(feature = "persistent-children")]
    Message {
        /// The message.
        message: String,
        /// The parent's call the turn answers.
        tool_call_id: String,
    },
    /// Delete it and everything of it, for good (its parent is being deleted).
    Delete,
}

/// How a runner reaches its child sessions (on the platform: their Durable Objects).
pub trait Children {
    /// Sends `order` to child `child_id`; `Err` carries a message for logs and the model.
    fn send<'a>(
        &'a self,
        child_id: &'a str,
        order: ChildOrder,
    ) -> LocalBoxFuture<'a, Result<(), String>>;
    /// The calls a client answers that are pending in child `child_id` or below it.
    fn pending<'a>(
        &'a self,
        child_id: &'a str,
    ) -> LocalBoxFuture<'a, Result<Vec<PendingCall>, String>>;
}

/// For runners without sub-agents: every order fails, and nothing is pending below.
pub struct NoChildren;

impl Children for NoChildren {
    fn send<'a>(&'a self, _: &'a str, _: ChildOrder) -> LocalBoxFuture<'a, Result<(), String>> {
        Box::pin(async { Err("sub-agents are not available in this runner".to_string()) })
    }

    fn pending<'a>(&'a self, _: &'a str) -> LocalBoxFuture<'a, Result<Vec<PendingCall>, String>> {
        Box::pin(async { Ok(Vec::new()) })
    }
}

/// A child's report to its parent that it ended: the outcome its parent's call gets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChildEnded {
    /// The child session.
    pub child_id: String,
    /// The parent's call it answers.
    pub tool_call_id: String,
    /// The child's version when it ended: a report is delivered once per ending.
    pub version: u64,
    /// The outcome ([`Answer::ChildOutput`] or [`Answer::ChildFailed`]).
    pub answer: Answer,
}

/// The report a child session owes its parent: `Some` once it ended, unless the report
/// of this ending (`delivered`: the version last reported) went out already.
pub fn ended_report(child: &SessionHead, delivered: Option<u64>) -> Option<(String, ChildEnded)> {
    let parent = child.parent.as_ref()?;
    let answer = child_outcome(child)?;
    (delivered != Some(child.version)).then(|| {
        let report = ChildEnded {
            child_id: child.id.clone(),
            tool_call_id: parent.tool_call_id.clone(),
            version: child.version,
            answer,
        };
        (parent.session_id.clone(), report)
    })
}

/// The id of the child session that answers `tool_call_id` of `parent_id`: the same
/// every time, so a retried start finds the child it started before. It is a valid
/// session id (`[A-Za-z0-9._-]`, at most 110 characters).
pub fn child_session_id(parent_id: &str, tool_call_id: &str) -> String {
    let digest = Sha256::new()
        .chain_update(parent_id.as_bytes())
        .chain_update([0u8])
        .chain_update(tool_call_id.as_bytes())
        .finalize();
    let hex: String = digest[..10].iter().map(|b| format!("{b:02x}")).collect();
    let prefix: String = parent_id.chars().take(80).collect();
    format!("{prefix}.sub-{hex}")
}

/// How an ended child answers its parent's call; `None` while it has not ended.
pub fn child_outcome(child: &SessionHead) -> Option<Answer> {
    let failed = |code: &str, what: &str| {
        let detail = child
            .error
            .as_ref()
            .map_or(String::new(), |e| format!(": {}", e.message));
        Some(Answer::ChildFailed {
            code: code.into(),
            error: format!("The sub-agent {what}{detail}"),
        })
    };
    match child.status {
        SessionStatus::Completed => Some(Answer::ChildOutput {
            output: child.output.clone().unwrap_or_default(),
        }),
        SessionStatus::Failed => failed("subagent_failed", "failed"),
        SessionStatus::Aborted => failed("subagent_aborted", "was aborted"),
        SessionStatus::Active | SessionStatus::Interrupted => None,
    }
}

/// The parent's record of a child, as it ends for the parent (`answer`) or starts.
pub(crate) fn subsession(
    parent_id: &str,
    call: &PendingCall,
    agent: &str,
    answer: Option<&Answer>,
    now: u64,
) -> SubSession {
    let status = match answer {
        None => ChildStatus::Running,
        Some(Answer::ChildOutput { .. }) => ChildStatus::Completed,
        Some(Answer::ChildFailed { code, .. }) if code == "subagent_timeout" => {
            ChildStatus::TimedOut
        }
        Some(_) => ChildStatus::Failed,
    };
    SubSession {
        child_id: child_session_id(parent_id, &call.tool_call_id),
        agent: agent.into(),
        tool_call_id: call.tool_call_id.clone(),
        status,
        created_at: now,
        updated_at: now,
        name: None,
        mode: None,
    }
}

/// The child session a pending call of session `head_id` waits on: a sub-agent call's
/// child, or the persistent child of a companion call that waits on a turn.
pub(crate) fn waited_child(head_id: &str, p: &PendingCall) -> Option<String> {
    if p.kind != PendingKind::Child {
        return None;
    }
    #[cfg(feature = "persistent-children")]
    if let Some(op) = p
        .tool_name
        .strip_prefix(crate::tool::companion::COMPANION_PREFIX)
    {
        // Companion calls that wait on a turn: a spawn, a message, a wait.
        if !matches!(op, "spawnAgent" | "sendMessage" | "waitForResult") {
            return None;
        }
        let name = p.arguments.get("name")?.as_str()?;
        return Some(crate::agent::persistent_child_id(head_id, name));
    }
    Some(child_session_id(head_id, &p.tool_call_id))
}

impl<S: Store> Runner<S> {
    /// Without sub-agents no call waits on a child.
    #[cfg(not(feature = "subagents"))]
    pub(crate) async fn settle_children(&self, _: &mut Live, _: &Agent) -> Result<(), RunError> {
        Ok(())
    }

    /// Answers the unanswered child calls of `live` that timed out or cannot be started,
    /// and starts the children this instance has not started yet (siblings together;
    /// starting one that exists is harmless). Answers go into `live.answers`; they are
    /// stored first, so they stand.
    #[cfg(feature = "subagents")]
    pub(crate) async fn settle_children(
        &self,
        live: &mut Live,
        agent: &Agent,
    ) -> Result<(), RunError> {
        let open: Vec<PendingCall> = live
            .head
            .pending
            .iter()
            .filter(|p| p.kind == PendingKind::Child && live.answer(&p.tool_call_id).is_none())
            .cloned()
            .collect();
        let now = self.host.now_ms();
        let mut starts = Vec::new();
        #[cfg(feature = "remote-subagents")]
        let mut remotes = Vec::new();
        for call in open {
            let child_id = child_session_id(&live.head.id, &call.tool_call_id);
            let tool = agent.tool(&call.tool_name);
            if tool.is_some_and(|t| t.companion_op().is_some()) {
                continue; // settled by `settle_companions`
            }
            #[cfg(feature = "remote-subagents")]
            if let Some(remote) = tool.and_then(|t| t.remote_of()) {
                remotes.push((call, remote.clone()));
                continue;
            }
            let Some((child_agent, timeout_ms)) = tool.and_then(|t| t.subagent_of()) else {
                let failure = failed("subagent_unknown", "This sub-agent tool no longer exists.");
                self.store_child_answer(live, &call.tool_call_id, failure)?;
                continue;
            };
            if call.deadline.is_some_and(|d| d <= now) {
                let reason = "The sub-agent exceeded its timeout.".to_string();
                let aborted = self
                    .children
                    .send(&child_id, ChildOrder::Abort { reason })
                    .await;
                if let Err(e) = aborted {
                    let fields = [("error", crate::host::LogValue::Str(&e))];
                    self.log(
                        live,
                        crate::host::Level::Warn,
                        "subagent_abort_failed",
                        &fields,
                    );
                }
                let message = format!(
                    "The sub-agent did not finish within {} s.",
                    timeout_ms.as_secs()
                );
                let failure = failed("subagent_timeout", &message);
                self.store_child_answer(live, &call.tool_call_id, failure)?;
            } else if !self.started.borrow().contains(&child_id) {
                let order = ChildOrder::Start {
                    agent: child_agent.to_string(),
                    message: call.arguments.to_string(),
                    parent: self.parent_ref(live, &call.tool_call_id),
                };
                starts.push((call.tool_call_id, child_id, order));
            }
        }
        let sent = join_all(
            starts
                .iter()
                .map(|(_, child_id, order)| self.children.send(child_id, order.clone())),
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
                    self.store_child_answer(live, &call_id, failure)?;
                }
            }
        }
        #[cfg(feature = "persistent-children")]
        self.settle_companions(live, agent).await?;
        #[cfg(feature = "remote-subagents")]
        self.settle_remotes(live, remotes).await?;
        Ok(())
    }

    /// Without sub-agents a session has no children to ask.
    #[cfg(not(feature = "subagents"))]
    pub(crate) async fn asked_children(&self, _: &SessionHead) -> Result<Vec<String>, RunError> {
        Ok(Vec::new())
    }

    /// The children whose pending calls surface at `head`, and which take the answers
    /// submitted there: those it still waits on, and its running non-blocking helpers.
    #[cfg(feature = "subagents")]
    pub(crate) async fn asked_children(&self, head: &SessionHead) -> Result<Vec<String>, RunError> {
        let answered = |call: &str| {
            matches!(
                self.journal.suspension.find_answer(&head.id, call),
                Ok(Some(_))
            )
        };
        #[cfg_attr(not(feature = "persistent-children"), allow(unused_mut))]
        let mut children: Vec<String> = head
            .pending
            .iter()
            .filter(|p| !answered(&p.tool_call_id))
            .filter_map(|p| self.local_child(head, p))
            .collect();
        #[cfg(feature = "persistent-children")]
        children.extend(self.persistent_children(head, true).await?);
        Ok(children)
    }

    /// Where a child started by call `tool_call_id` of `live` reports.
    pub(crate) fn parent_ref(&self, live: &Live, tool_call_id: &str) -> crate::store::ParentRef {
        crate::store::ParentRef {
            session_id: live.head.id.clone(),
            tool_call_id: tool_call_id.to_string(),
            root_id: live
                .head
                .parent
                .as_ref()
                .map_or_else(|| live.head.id.clone(), |p| p.root_id.clone()),
        }
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

    /// A child of session `parent_id` reports that it ended: its outcome becomes the
    /// answer of the call it runs for (the first answer stands: a timeout recorded
    /// before wins). `Ok(true)` when the parent has work to do now; a report about a
    /// call the parent does not wait on (a late or repeated one) changes nothing.
    pub async fn child_ended(&self, parent_id: &str, report: ChildEnded) -> Result<bool, RunError> {
        let live = self.load(parent_id).await?;
        let outcome = matches!(
            report.answer,
            Answer::ChildOutput { .. } | Answer::ChildFailed { .. }
        );
        if !outcome {
            return Ok(false);
        }
        #[cfg(feature = "persistent-children")]
        if report.child_id.starts_with(&format!("{parent_id}-agent-")) {
            return self.persistent_turn_ended(live, report).await;
        }
        let waits = live.head.pending.iter().any(|p| {
            p.kind == PendingKind::Child
                && p.tool_call_id == report.tool_call_id
                && child_session_id(parent_id, &p.tool_call_id) == report.child_id
        });
        if !waits {
            return Ok(false);
        }
        let stored =
            self.journal
                .suspension
                .answer(parent_id, &report.tool_call_id, &report.answer)?;
        Ok(stored == AnswerOutcome::Stored)
    }

    /// Turns a child call's answer into its tool result, with `subagent_end`.
    pub(crate) fn end_child_call(
        &self,
        agent: &Agent,
        call: &ToolCall,
        answer: &Answer,
        output_path: Option<&str>,
        live: &Live,
        emitter: &Emitter,
    ) -> (Message, Option<PatchOp>) {
        let child_agent = agent
            .tool(&call.name)
            .and_then(|t| t.child_agent())
            .unwrap_or_default()
            .to_string();
        let output = match answer {
            Answer::ChildOutput { output } => Some(output.clone()),
            _ => None,
        };
        emitter.chunk_as(
            &child_agent,
            ChunkBody::SubagentEnd {
                sub_session_id: child_session_id(&live.head.id, &call.id),
                tool_call_id: call.id.clone(),
                result: output.clone(),
            },
        );
        match (output, answer) {
            (Some(output), _) => {
                self.end_with_result(call, output, output_path, &live.state, emitter)
            }
            (None, Answer::ChildFailed { code, error }) => {
                (self.end_with_error(call, code, error, emitter), None)
            }
            (None, _) => (
                self.end_with_error(
                    call,
                    "subagent_failed",
                    "The sub-agent ended without output.",
                    emitter,
                ),
                None,
            ),
        }
    }

    /// Without sub-agents there is no child to order.
    #[cfg(not(feature = "subagents"))]
    pub(crate) async fn order_children(&self, _: &SessionHead, _: ChildOrder) {}

    /// Sends `order` to every child `head` still waits on; failures are logged (a child
    /// that misses an abort still ends at its timeout).
    #[cfg(feature = "subagents")]
    pub(crate) async fn order_children(&self, head: &SessionHead, order: ChildOrder) {
        #[cfg(feature = "remote-subagents")]
        {
            let passed_on = match order {
                ChildOrder::Abort { .. } => Some(super::RemoteOrder::Abort),
                ChildOrder::Interrupt { .. } => Some(super::RemoteOrder::Interrupt),
                ChildOrder::Resume => Some(super::RemoteOrder::Resume),
                _ => None,
            };
            if let Some(order) = passed_on {
                self.order_remotes(head, order).await;
            }
        }
        let ids: Vec<String> = head
            .pending
            .iter()
            .filter_map(|p| self.local_child(head, p))
            .collect();
        self.order_all(&head.id, &ids, order).await;
    }

    /// The child session in this deployment a pending call of `head` waits on (none
    /// for a remote sub-agent's call).
    fn local_child(&self, head: &SessionHead, p: &PendingCall) -> Option<String> {
        #[cfg(feature = "remote-subagents")]
        if self.remote_call(head, p).is_some() {
            return None;
        }
        waited_child(&head.id, p)
    }

    /// Sends `order` to each of `ids`, children of `session`; failures are logged.
    pub(crate) async fn order_all(&self, session: &str, ids: &[String], order: ChildOrder) {
        let sent = join_all(ids.iter().map(|id| self.children.send(id, order.clone()))).await;
        for (id, result) in ids.iter().zip(sent) {
            if let Err(e) = result {
                let fields = [
                    ("session", crate::host::LogValue::Str(session)),
                    ("child", crate::host::LogValue::Str(id)),
                    ("error", crate::host::LogValue::Str(&e)),
                ];
                let level = crate::host::Level::Warn;
                self.host.log(level, "subagent_order_failed", &fields);
            }
        }
    }

    /// Without sub-agents nothing is pending below a session.
    #[cfg(not(feature = "subagents"))]
    pub async fn descendant_calls(&self, _: &SessionHead) -> Result<Vec<PendingCall>, RunError> {
        Ok(Vec::new())
    }

    /// The calls pending in the children `head` waits on, and below them, that a client
    /// answers (approvals and client tools): each child is asked. A child that cannot
    /// be reached lists nothing (logged).
    #[cfg(feature = "subagents")]
    pub async fn descendant_calls(&self, head: &SessionHead) -> Result<Vec<PendingCall>, RunError> {
        let children = self.asked_children(head).await?;
        let listed = join_all(children.iter().map(|id| self.children.pending(id))).await;
        #[cfg_attr(not(feature = "remote-subagents"), allow(unused_mut))]
        let mut calls = Vec::new();
        #[cfg(feature = "remote-subagents")]
        calls.extend(self.remote_calls(head).await);
        for (id, result) in children.iter().zip(listed) {
            match result {
                Ok(pending) => calls.extend(pending),
                Err(e) => {
                    let fields = [
                        ("session", crate::host::LogValue::Str(&head.id)),
                        ("child", crate::host::LogValue::Str(id)),
                        ("error", crate::host::LogValue::Str(&e)),
                    ];
                    let level = crate::host::Level::Warn;
                    self.host.log(level, "subagent_unreachable", &fields);
                }
            }
        }
        Ok(calls)
    }
}

fn failed(code: &str, error: &str) -> Answer {
    Answer::ChildFailed {
        code: code.into(),
        error: error.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_ids_are_deterministic_valid_and_distinct() {
        let a = child_session_id("root", "call-1");
        assert_eq!(a, child_session_id("root", "call-1"));
        assert_ne!(a, child_session_id("root", "call-2"));
        assert_ne!(a, child_session_id("root2", "call-1"));
        let long = "p".repeat(128);
        let nested = child_session_id(&child_session_id(&long, "x"), "weird id/with:chars");
        assert!(crate::auth::valid_session_id(&nested), "{nested}");
        assert!(nested.len() <= 110);
    }
}
