//! Sub-agents: child sessions started by a parent's sub-agent tool calls. The parent
//! never waits in memory. Its step records a pending `child` call per sub-agent call
//! (and a [`SubSession`] reference) and suspends; every later drive settles those calls
//! from durable state alone:
//! - a child that does not exist yet is started (again, after a crash: the child id is
//!   derived from the parent and the call, so a retried start finds the same child);
//! - a child that ended (its head in the store says so) answers its call with its output
//!   or its failure;
//! - a child past the call's timeout is aborted and the call fails as timed out;
//! - a start that fails fails that call only.
//!
//! The platform wakes the parent when a child ends; the timeout alarm covers a lost wake.
//! Answers to calls pending in a child are submitted to the root and routed to the
//! owning child, found through the parents' references ([`Runner::descendant_calls`]).

use super::emit::Emitter;
use super::{Live, RunError, Runner};
use crate::agent::Agent;
use crate::chunk::ChunkBody;
use crate::message::{Message, ToolCall};
use crate::store::{
    Answer, AnswerOutcome, ParentRef, PendingCall, PendingKind, SessionHead, SessionStatus, Store,
    SubSession,
};
use futures::future::{LocalBoxFuture, join_all};
use sha2::{Digest, Sha256};

/// How deep [`Runner::descendant_calls`] looks, and how many sessions it visits at most.
const MAX_DESCENDANTS: usize = 64;

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
}

/// How a runner reaches child sessions (on the platform: their Durable Objects).
pub trait Children {
    /// Sends `order` to child `child_id`; `Err` carries a message for logs and the model.
    fn send<'a>(
        &'a self,
        child_id: &'a str,
        order: ChildOrder,
    ) -> LocalBoxFuture<'a, Result<(), String>>;
}

/// For runners without sub-agents: every order fails.
pub struct NoChildren;

impl Children for NoChildren {
    fn send<'a>(&'a self, _: &'a str, _: ChildOrder) -> LocalBoxFuture<'a, Result<(), String>> {
        Box::pin(async { Err("sub-agents are not available in this runner".to_string()) })
    }
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
        None => "running",
        Some(Answer::ChildOutput { .. }) => "completed",
        Some(Answer::ChildFailed { code, .. }) if code == "subagent_timeout" => "timed_out",
        Some(_) => "failed",
    };
    SubSession {
        child_id: child_session_id(parent_id, &call.tool_call_id),
        agent: agent.into(),
        tool_call_id: call.tool_call_id.clone(),
        status: status.into(),
        created_at: now,
        updated_at: now,
    }
}

impl<S: Store> Runner<S> {
    /// Answers the unanswered child calls of `live` whose children ended, timed out or
    /// cannot be started, and starts the children that do not exist yet (siblings
    /// together). Answers go into `live.answers`; failures that are not visible in a
    /// child's head (timeouts, failed starts) are stored first, so they stand.
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
        if open.is_empty() {
            return Ok(());
        }
        let children = self.store.subsessions(&live.head.id).await?;
        let now = self.host.now_ms();
        let mut starts = Vec::new();
        for call in open {
            let child_id = child_session_id(&live.head.id, &call.tool_call_id);
            let head = children
                .iter()
                .find(|c| c.record.child_id == child_id)
                .and_then(|c| c.head.as_ref());
            let Some((child_agent, timeout_ms)) =
                agent.tool(&call.tool_name).and_then(|t| t.subagent_of())
            else {
                let failure = failed("subagent_unknown", "This sub-agent tool no longer exists.");
                self.store_child_answer(live, &call.tool_call_id, failure)
                    .await?;
                continue;
            };
            if let Some(answer) = head.and_then(child_outcome) {
                live.answers.push((call.tool_call_id, answer));
            } else if call.deadline.is_some_and(|d| d <= now) {
                if head.is_some() {
                    let reason = "The sub-agent exceeded its timeout.".to_string();
                    if let Err(e) = self
                        .children
                        .send(&child_id, ChildOrder::Abort { reason })
                        .await
                    {
                        self.log(
                            live,
                            crate::host::Level::Warn,
                            "subagent_abort_failed",
                            &[("error", crate::host::LogValue::Str(&e))],
                        );
                    }
                }
                let message = format!(
                    "The sub-agent did not finish within {} s.",
                    timeout_ms / 1000
                );
                let failure = failed("subagent_timeout", &message);
                self.store_child_answer(live, &call.tool_call_id, failure)
                    .await?;
            } else if head.is_none() {
                let order = ChildOrder::Start {
                    agent: child_agent.name().to_string(),
                    message: call.arguments.to_string(),
                    parent: ParentRef {
                        session_id: live.head.id.clone(),
                        tool_call_id: call.tool_call_id.clone(),
                        root_id: live
                            .head
                            .parent
                            .as_ref()
                            .map_or_else(|| live.head.id.clone(), |p| p.root_id.clone()),
                    },
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
        for ((call_id, _, _), result) in starts.iter().zip(sent) {
            if let Err(e) = result {
                let failure = failed(
                    "subagent_dispatch_failed",
                    &format!("The sub-agent could not be started: {e}"),
                );
                self.store_child_answer(live, call_id, failure).await?;
            }
        }
        Ok(())
    }

    /// Stores `answer` for a child call unless one stands already; either way the
    /// standing answer goes into `live.answers`.
    async fn store_child_answer(
        &self,
        live: &mut Live,
        call_id: &str,
        answer: Answer,
    ) -> Result<(), RunError> {
        let standing = match self.journal.answer(&live.head.id, call_id, &answer)? {
            AnswerOutcome::Stored => answer,
            AnswerOutcome::AlreadyAnswered(existing) => existing,
        };
        live.answers.push((call_id.to_string(), standing));
        Ok(())
    }

    /// Turns a child call's answer into its tool result, with `subagent_end`.
    pub(crate) fn end_child_call(
        &self,
        agent: &Agent,
        call: &ToolCall,
        answer: &Answer,
        live: &Live,
        emitter: &Emitter,
    ) -> Message {
        let child_agent = agent
            .tool(&call.name)
            .and_then(|t| t.subagent_of())
            .map_or_else(String::new, |(a, _)| a.name().to_string());
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
            (Some(output), _) => self.end_with_result(agent, call, output, emitter),
            (None, Answer::ChildFailed { code, error }) => {
                self.end_with_error(agent, call, code, error, emitter)
            }
            (None, _) => self.end_with_error(
                agent,
                call,
                "subagent_failed",
                "The sub-agent ended without output.",
                emitter,
            ),
        }
    }

    /// Sends `order` to every child `head` still waits on; failures are logged (a child
    /// that misses an abort still ends at its timeout).
    pub(crate) async fn order_children(&self, head: &SessionHead, order: ChildOrder) {
        let ids: Vec<String> = head
            .pending
            .iter()
            .filter(|p| p.kind == PendingKind::Child)
            .map(|p| child_session_id(&head.id, &p.tool_call_id))
            .collect();
        let sent = join_all(ids.iter().map(|id| self.children.send(id, order.clone()))).await;
        for (id, result) in ids.iter().zip(sent) {
            if let Err(e) = result {
                let fields = [
                    ("session", crate::host::LogValue::Str(&head.id)),
                    ("child", crate::host::LogValue::Str(id)),
                    ("error", crate::host::LogValue::Str(&e)),
                ];
                let level = crate::host::Level::Warn;
                self.host.log(level, "subagent_order_failed", &fields);
            }
        }
    }

    /// The calls pending in the descendants of `head` that a client answers (approvals
    /// and client tools), with the session that owns each. Looks only below the child
    /// calls `head` still waits on; bounded.
    pub async fn descendant_calls(
        &self,
        head: &SessionHead,
    ) -> Result<Vec<(String, PendingCall)>, RunError> {
        let mut calls = Vec::new();
        let mut visited = 0;
        let mut queue = vec![head.clone()];
        while let Some(parent) = queue.pop() {
            if !parent.pending.iter().any(|p| p.kind == PendingKind::Child) {
                continue;
            }
            for child in self.store.subsessions(&parent.id).await? {
                let Some(h) = child.head else { continue };
                visited += 1;
                if visited > MAX_DESCENDANTS {
                    return Ok(calls);
                }
                if child_outcome(&h).is_some() {
                    continue;
                }
                calls.extend(
                    h.pending
                        .iter()
                        .filter(|p| p.kind != PendingKind::Child)
                        .map(|p| (h.id.clone(), p.clone())),
                );
                queue.push(h);
            }
        }
        Ok(calls)
    }

    /// Every child session below `id`, ended or not (bounded).
    pub(crate) async fn descendants(&self, id: &str) -> Result<Vec<String>, RunError> {
        let mut found = Vec::new();
        let mut queue = vec![id.to_string()];
        while let Some(parent) = queue.pop() {
            for child in self.store.subsessions(&parent).await? {
                if found.len() >= MAX_DESCENDANTS {
                    return Ok(found);
                }
                found.push(child.record.child_id.clone());
                queue.push(child.record.child_id);
            }
        }
        Ok(found)
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
