//! Persistent children (feature `persistent-children`): the companion calls of an agent
//! with persistent children ([`crate::agent::PersistentChild`]). Every companion call is
//! recorded as a pending child call before anything reaches a child, like a sub-agent
//! call, and then settled from durable state alone:
//! - a spawn (its name chosen in the step when the model gave none) starts the child
//!   `{parent}-agent-{name}` with the call as its parent call, a message starts the
//!   child's next turn: both idempotent, so a retried order after a crash finds the turn
//!   it started;
//! - a blocking spawn or message, and a wait, are answered by the child's report that the
//!   turn ended; everything else is answered at once (a non-blocking start, the list, a
//!   status, a termination);
//! - each turn's outcome is kept under the id `{call}#turn` of the call that started it,
//!   so a status or a wait read later finds it, and the parent's record of the child
//!   (its [`SubSession`], with `name` and `mode`) names the turn's call ([`records`]).

mod records;

use super::{ChildEnded, ChildOrder, Fut, WaitKind, Waits};
use crate::agent::{Agent, persistent_child_id};
use crate::message::{Message, ToolCall};
use crate::runner::emit::Emitter;
use crate::runner::results::{end_with_error, end_with_result, end_without_running};
use crate::runner::{Live, RunError, Runner};
use crate::state::PatchOp;
use crate::store::{
    Answer, AnswerOutcome, ChildMode, ChildStatus, PendingCall, PendingKind, SessionHead,
    SessionStatus, Store, SubSession,
};
use crate::tool::ChildCall;
use crate::tool::companion::{COMPANION_PREFIX, CompanionOp, valid_child_name};
use records::{
    child_view, companion_records, notices, persistent, persistent_children, turn_key, turn_outcome,
};
use serde_json::{Value, json};
use std::cell::RefCell;
use std::rc::Rc;

/// The companion calls of agents with persistent children.
#[derive(Default)]
struct Companions {
    /// The turns this instance started, as `{child}#{call}` (a later process starts
    /// them again: each order is idempotent).
    started: RefCell<Vec<String>>,
}

impl<S: Store> WaitKind<S> {
    /// The companion calls on persistent children
    /// ([`AgentBuilder::persistent_child`](crate::agent::AgentBuilder::persistent_child)),
    /// as sessions reached through the runner's [`Children`](super::Children).
    pub fn persistent_children() -> Self {
        Self(Rc::new(Companions::default()))
    }
}

/// The companion operation of a call of tool `tool_name` in `agent`.
fn op_of(agent: &Agent, tool_name: &str) -> Option<CompanionOp> {
    agent.tool(tool_name).and_then(|t| t.companion_op())
}

/// The name a companion call's arguments give.
fn name_in(arguments: &Value) -> Option<&str> {
    arguments.get("name").and_then(Value::as_str)
}

/// The persistent child a pending companion call of session `head_id` waits on: a
/// spawn's, a message's or a wait's.
fn waited_child(head_id: &str, p: &PendingCall) -> Option<String> {
    let op = p.tool_name.strip_prefix(COMPANION_PREFIX)?;
    if p.kind != PendingKind::Child || !matches!(op, "spawnAgent" | "sendMessage" | "waitForResult")
    {
        return None;
    }
    let name = p.arguments.get("name")?.as_str()?;
    Some(persistent_child_id(head_id, name))
}

/// Whether a spawn pending before `p` names the same child.
fn spawned_before(agent: &Agent, pending: &[PendingCall], p: &PendingCall, name: &str) -> bool {
    pending
        .iter()
        .take_while(|q| q.tool_call_id != p.tool_call_id)
        .any(|q| {
            op_of(agent, &q.tool_name) == Some(CompanionOp::Spawn)
                && name_in(&q.arguments) == Some(name)
        })
}

/// An answer that needs no child turn.
fn done(result: Value) -> Answer {
    Answer::CompanionResult { result }
}

impl<S: Store> Waits<S> for Companions {
    fn runs(&self, call: &ChildCall) -> bool {
        matches!(call, ChildCall::Companion(_))
    }

    fn notices<'a>(
        &'a self,
        rt: &'a Runner<S>,
        live: &'a mut Live,
        agent: &'a Agent,
    ) -> Fut<'a, Result<Vec<Message>, RunError>> {
        Box::pin(notices(rt, live, agent))
    }

    /// Names the children the step's spawn calls start without a name:
    /// `{agentType}-{n}`, the first `n` from 1 that no child of the parent (or earlier
    /// spawn of the step) has. The name goes into the call's arguments, so the
    /// transcript, the pending call and every later step see it.
    fn complete_calls<'a>(
        &'a self,
        rt: &'a Runner<S>,
        live: &'a Live,
        agent: &'a Agent,
        calls: &'a mut [ToolCall],
    ) -> Fut<'a, Result<(), RunError>> {
        Box::pin(async move {
            let unnamed = |c: &ToolCall| {
                op_of(agent, &c.name) == Some(CompanionOp::Spawn) && name_in(&c.arguments).is_none()
            };
            if agent.persistent_children().is_empty() || !calls.iter().any(unnamed) {
                return Ok(());
            }
            let records = records::records(rt, live).await?;
            let mut taken: Vec<String> = persistent(&records)
                .filter_map(|r| r.name.clone())
                .collect();
            taken.extend(
                calls
                    .iter()
                    .filter(|c| op_of(agent, &c.name) == Some(CompanionOp::Spawn))
                    .filter_map(|c| name_in(&c.arguments).map(str::to_string)),
            );
            for call in calls.iter_mut().filter(|c| unnamed(c)) {
                let Some(kind) = call.arguments.get("agentType").and_then(Value::as_str) else {
                    continue; // the schema check refuses it
                };
                // Agent names may hold `_` and capitals; child names may not.
                let base: String = kind
                    .chars()
                    .map(|c| match c.to_ascii_lowercase() {
                        c @ ('a'..='z' | '0'..='9') => c,
                        _ => '-',
                    })
                    .take(30)
                    .collect();
                let name = (1..)
                    .map(|n| format!("{base}-{n}"))
                    .find(|n| !taken.contains(n))
                    .unwrap_or_default();
                if let Some(args) = call.arguments.as_object_mut() {
                    args.insert("name".into(), name.clone().into());
                }
                taken.push(name);
            }
            Ok(())
        })
    }

    /// Settles the unanswered companion calls: orders sent (once per instance; each is
    /// idempotent), and the answers that need no child turn stored.
    fn settle<'a>(
        &'a self,
        rt: &'a Runner<S>,
        live: &'a mut Live,
        agent: &'a Agent,
        open: Vec<PendingCall>,
    ) -> Fut<'a, Result<Option<u64>, RunError>> {
        Box::pin(async move {
            if agent.persistent_children().is_empty() {
                return Ok(None);
            }
            let open: Vec<(PendingCall, CompanionOp)> = open
                .into_iter()
                .filter_map(|p| {
                    let op = op_of(agent, &p.tool_name)?;
                    Some((p, op))
                })
                .collect();
            if open.is_empty() {
                return Ok(None);
            }
            let records = records::records(rt, live).await?;
            let now = rt.host.now_ms();
            for (p, op) in open {
                if p.deadline.is_some_and(|d| d <= now) {
                    let name = name_in(&p.arguments).unwrap_or_default();
                    let timeout = Answer::ChildFailed {
                        code: "subagent_timeout".into(),
                        error: format!(
                            "The child '{name}' did not end its turn in time; it goes on: wait for it again, or message or terminate it."
                        ),
                    };
                    rt.store_child_answer(live, &p.tool_call_id, timeout)?;
                    continue;
                }
                let answer = self.settle_one(rt, live, agent, &records, &p, op).await?;
                if let Some(answer) = answer {
                    rt.store_child_answer(live, &p.tool_call_id, answer)?;
                }
            }
            Ok(None)
        })
    }

    fn end_call(
        &self,
        call: &ToolCall,
        answer: &Answer,
        output: Option<&str>,
        state: &Value,
        emitter: &Emitter,
    ) -> Option<(Message, Option<PatchOp>)> {
        let result = match answer {
            Answer::CompanionResult { result } => result.clone(),
            Answer::ChildOutput { output } => json!({
                "name": name_in(&call.arguments),
                "status": "completed",
                "output": output,
            }),
            Answer::ChildFailed { code, error } => {
                return Some((end_with_error(call, code, error, emitter), None));
            }
            _ => {
                let err = crate::error::ToolError::TimedOut;
                return Some((end_without_running(call, &err, emitter), None));
            }
        };
        Some(end_with_result(call, result, output, state, emitter))
    }

    fn records<'a>(
        &'a self,
        rt: &'a Runner<S>,
        live: &'a Live,
        agent: &'a Agent,
        now: u64,
    ) -> Fut<'a, Result<Vec<SubSession>, RunError>> {
        Box::pin(async move {
            if agent.persistent_children().is_empty() {
                return Ok(Vec::new());
            }
            let records = records::records(rt, live).await?;
            Ok(companion_records(live, agent, &records, now))
        })
    }

    fn asked<'a>(
        &'a self,
        rt: &'a Runner<S>,
        head: &'a SessionHead,
    ) -> Fut<'a, Result<Vec<String>, RunError>> {
        Box::pin(async move {
            let mut asked: Vec<String> = head
                .pending
                .iter()
                .filter(|p| !rt.has_answer(&head.id, &p.tool_call_id))
                .filter_map(|p| waited_child(&head.id, p))
                .collect();
            asked.extend(persistent_children(rt, head, true).await?);
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
            // An aborted parent ends its helpers, waited on or not.
            if matches!(order, ChildOrder::Abort { .. }) {
                match persistent_children(rt, head, false).await {
                    Ok(helpers) => rt.order_all(&head.id, &helpers, order.clone()).await,
                    Err(e) => {
                        let fields = [("error", crate::host::LogValue::Str(&e.to_string()))];
                        let level = crate::host::Level::Warn;
                        rt.host.log(level, "subagent_order_failed", &fields);
                    }
                }
            }
            let waited: Vec<String> = head
                .pending
                .iter()
                .filter_map(|p| waited_child(&head.id, p))
                .collect();
            rt.order_all(&head.id, &waited, order.clone()).await;
        })
    }

    /// A persistent child of `live` reports that a turn ended: the outcome is kept
    /// under the turn's key, and answers the blocking call that started the turn and the
    /// waits on it. A report of a turn the parent no longer looks at changes nothing.
    fn report<'a>(
        &'a self,
        rt: &'a Runner<S>,
        live: &'a mut Live,
        report: &'a ChildEnded,
    ) -> Fut<'a, Option<Result<bool, RunError>>> {
        Box::pin(async move {
            let prefix = format!("{}-agent-", live.head.id);
            if !report.child_id.starts_with(&prefix) {
                return None;
            }
            Some(turn_ended(rt, live, report).await)
        })
    }
}

impl Companions {
    /// One companion call: its answer now, or `None` while it waits on a turn.
    async fn settle_one<S: Store>(
        &self,
        rt: &Runner<S>,
        live: &Live,
        agent: &Agent,
        records: &[SubSession],
        p: &PendingCall,
        op: CompanionOp,
    ) -> Result<Option<Answer>, RunError> {
        let parent = &live.head.id;
        if op == CompanionOp::List {
            let mut children = Vec::new();
            for r in persistent(records) {
                children.push(child_view(rt, parent, r)?);
            }
            return Ok(Some(done(json!({ "children": children }))));
        }
        let name = name_in(&p.arguments).unwrap_or_default();
        let record = persistent(records).find(|r| r.name.as_deref() == Some(name));
        let invalid = |reason: String| {
            Ok(Some(Answer::ChildFailed {
                code: "tool_input_invalid".into(),
                error: reason,
            }))
        };
        let child_id = persistent_child_id(parent, name);
        let kind = match (op, record) {
            (CompanionOp::Spawn, Some(_)) => {
                return invalid(format!(
                    "A child named '{name}' exists already: send it a message instead."
                ));
            }
            (CompanionOp::Spawn, None) if spawned_before(agent, &live.head.pending, p, name) => {
                return invalid(format!(
                    "Another call of this step starts a child named '{name}'."
                ));
            }
            (CompanionOp::Spawn, None) => {
                let kind = p.arguments.get("agentType").and_then(Value::as_str);
                match kind.and_then(|k| agent.persistent_child(k)) {
                    Some(kind) => kind,
                    None => return invalid("Unknown agentType.".into()),
                }
            }
            (_, None) => {
                let known: Vec<&str> = persistent(records)
                    .filter_map(|r| r.name.as_deref())
                    .collect();
                return invalid(format!(
                    "There is no child named '{name}'. Children: {}.",
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                ));
            }
            (_, Some(r)) if r.status == ChildStatus::Terminated => {
                return invalid(format!("The child '{name}' was terminated."));
            }
            (_, Some(r)) => match agent.persistent_child(&r.agent) {
                Some(kind) => kind,
                None => {
                    return invalid(format!(
                        "The child '{name}' is of a kind this agent no longer has."
                    ));
                }
            },
        };
        if !valid_child_name(name) || !crate::auth::valid_session_id(&child_id) {
            return invalid(format!("'{name}' cannot name a child of this session."));
        }
        match op {
            CompanionOp::Spawn | CompanionOp::Send => {
                let started = format!("{child_id}#{}", p.tool_call_id);
                if !self.started.borrow().contains(&started) {
                    let message = p
                        .arguments
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    let order = if op == CompanionOp::Spawn {
                        ChildOrder::Start {
                            agent: kind.agent().name().to_string(),
                            message: message.to_string(),
                            parent: rt.parent_ref(live, &p.tool_call_id),
                            owner: live.head.owner.clone(),
                            trace: live.head.run.trace.as_ref().map(|t| t.context()),
                        }
                    } else {
                        ChildOrder::Message {
                            message: message.to_string(),
                            tool_call_id: p.tool_call_id.clone(),
                        }
                    };
                    if let Err(e) = rt.children.send(&child_id, order).await {
                        return Ok(Some(Answer::ChildFailed {
                            code: "subagent_dispatch_failed".into(),
                            error: format!("The child '{name}' could not be reached: {e}"),
                        }));
                    }
                    self.started.borrow_mut().push(started);
                }
                Ok(match kind.mode() {
                    ChildMode::Blocking => None,
                    ChildMode::NonBlocking => Some(done(
                        json!({ "name": name, "sessionId": child_id, "status": "running" }),
                    )),
                })
            }
            CompanionOp::Terminate => {
                let reason = p.arguments.get("reason").and_then(Value::as_str);
                let reason = reason.unwrap_or("Terminated by its parent.").to_string();
                if let Err(e) = rt
                    .children
                    .send(&child_id, ChildOrder::Abort { reason })
                    .await
                {
                    return Ok(Some(Answer::ChildFailed {
                        code: "subagent_dispatch_failed".into(),
                        error: format!("The child '{name}' could not be reached: {e}"),
                    }));
                }
                Ok(Some(done(json!({ "name": name, "status": "terminated" }))))
            }
            CompanionOp::Status => {
                let view = record.map(|r| child_view(rt, parent, r)).transpose()?;
                Ok(view.map(done))
            }
            CompanionOp::Wait => {
                let outcome = record.map(|r| turn_outcome(rt, parent, r)).transpose()?;
                Ok(outcome.flatten())
            }
            CompanionOp::List => Ok(None),
        }
    }
}

/// A persistent child of `live` reports that a turn ended (see [`Waits::report`]).
/// `Ok(true)` when the parent has work to do now.
async fn turn_ended<S: Store>(
    rt: &Runner<S>,
    live: &mut Live,
    report: &ChildEnded,
) -> Result<bool, RunError> {
    let parent = live.head.id.clone();
    let child = Some(report.child_id.as_str());
    let records = rt.store.subsessions(&parent).await?;
    let current = records
        .iter()
        .find(|r| r.child_id == report.child_id && r.tool_call_id == report.tool_call_id);
    let notice = current.is_some_and(|r| r.mode == Some(ChildMode::NonBlocking));
    let current = current.is_some();
    let waiting: Vec<&PendingCall> = live
        .head
        .pending
        .iter()
        .filter(|p| {
            let on_child = waited_child(&parent, p).as_deref() == child;
            let wait = p.tool_name.ends_with("waitForResult");
            on_child && (p.tool_call_id == report.tool_call_id || (wait && current))
        })
        .collect();
    if waiting.is_empty() && !current {
        return Ok(false);
    }
    let suspension = &rt.journal.suspension;
    suspension.answer(&parent, &turn_key(&report.tool_call_id), &report.answer)?;
    let mut stored = false;
    for p in waiting {
        let outcome = suspension.answer(&parent, &p.tool_call_id, &report.answer)?;
        stored |= outcome == AnswerOutcome::Stored;
    }
    // A notice waits for the parent's next step; a parent whose run has finished
    // starts one for it when it is configured to.
    let finished = matches!(
        live.head.status,
        SessionStatus::Completed | SessionStatus::Failed
    );
    if !stored && notice && finished && rt.agent(&live.head.agent)?.wakes_on_children() {
        rt.start_run(live, Vec::new(), None, (None, None), None)
            .await?;
        return Ok(true);
    }
    Ok(stored)
}
