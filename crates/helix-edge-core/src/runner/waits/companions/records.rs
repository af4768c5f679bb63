//! What a parent knows of its persistent children: their records (stored, and updated by
//! the commit sent ahead), each turn's outcome kept under `{call}#turn`, the views
//! `listChildren` and `getChildStatus` answer with, the notices of non-blocking turns
//! that ended, and the records a resumption writes.

use super::{name_in, op_of};
use crate::agent::{Agent, persistent_child_id};
use crate::message::Message;
use crate::runner::{Live, RunError, Runner};
use crate::store::{Answer, ChildMode, ChildStatus, SessionHead, Store, SubSession};
use crate::tool::companion::CompanionOp;
use serde_json::{Value, json};

/// The answer id under which the outcome of the turn started by `call_id` is kept.
pub(super) fn turn_key(call_id: &str) -> String {
    format!("{call_id}#turn")
}

/// The persistent children among a parent's records.
pub(super) fn persistent(records: &[SubSession]) -> impl Iterator<Item = &SubSession> {
    records.iter().filter(|r| r.name.is_some())
}

/// The parent's records of its children as `live` shows them: stored, and updated by
/// the commit sent ahead, if any (its records have not landed yet).
pub(super) async fn records<S: Store>(
    rt: &Runner<S>,
    live: &Live,
) -> Result<Vec<SubSession>, RunError> {
    let mut records = rt.store.subsessions(&live.head.id).await?;
    if let Some(ahead) = &live.ahead {
        crate::store::upsert_subsessions(&mut records, ahead.commit.subsessions.clone());
    }
    Ok(records)
}

/// The outcome of a persistent child's current turn, once it ended.
pub(super) fn turn_outcome<S: Store>(
    rt: &Runner<S>,
    parent: &str,
    r: &SubSession,
) -> Result<Option<Answer>, RunError> {
    let turn = turn_key(&r.tool_call_id);
    Ok(rt.journal.suspension.find_answer(parent, &turn)?)
}

/// A persistent child as `listChildren` and `getChildStatus` show it: its record, and
/// the outcome of its current turn once that ended.
pub(super) fn child_view<S: Store>(
    rt: &Runner<S>,
    parent: &str,
    r: &SubSession,
) -> Result<Value, RunError> {
    let mut view = json!({
        "name": r.name,
        "agentType": r.agent,
        "mode": r.mode.map(ChildMode::as_str),
        "sessionId": r.child_id,
        "status": r.status.as_str(),
    });
    if r.status == ChildStatus::Terminated {
        return Ok(view);
    }
    match turn_outcome(rt, parent, r)? {
        Some(Answer::ChildOutput { output }) => {
            view["status"] = "completed".into();
            view["output"] = output;
        }
        Some(Answer::ChildFailed { error, .. }) => {
            view["status"] = "failed".into();
            view["error"] = error.into();
        }
        _ => view["status"] = "running".into(),
    }
    Ok(view)
}

/// The persistent children of `head` that were not terminated, by id; with
/// `running_free`, only the non-blocking ones whose turn is running (those the parent
/// does not wait on, whose approvals and client calls still surface at the root).
pub(super) async fn persistent_children<S: Store>(
    rt: &Runner<S>,
    head: &SessionHead,
    running_free: bool,
) -> Result<Vec<String>, RunError> {
    let agent = rt.agents.get(&head.agent);
    if agent.is_none_or(|a| a.persistent_children().is_empty()) {
        return Ok(Vec::new());
    }
    let records = rt.store.subsessions(&head.id).await?;
    let ids = persistent(&records)
        .filter(|r| r.status != ChildStatus::Terminated)
        .filter(|r| {
            !running_free
                || (r.mode == Some(ChildMode::NonBlocking) && r.status == ChildStatus::Running)
        })
        .map(|r| r.child_id.clone())
        .collect();
    Ok(ids)
}

/// The notices the next step gives the model: one user message per non-blocking child
/// whose turn ended since the parent last heard of it. Their records, marked as heard
/// of, go into `live.notified` for the step's commit.
pub(super) async fn notices<S: Store>(
    rt: &Runner<S>,
    live: &mut Live,
    agent: &Agent,
) -> Result<Vec<Message>, RunError> {
    let non_blocking = agent.persistent_children().iter();
    if !non_blocking
        .clone()
        .any(|c| c.mode() == ChildMode::NonBlocking)
    {
        return Ok(Vec::new());
    }
    let records = records(rt, live).await?;
    let now = rt.host.now_ms();
    let mut notices = Vec::new();
    for r in persistent(&records) {
        if r.mode != Some(ChildMode::NonBlocking) || r.status != ChildStatus::Running {
            continue;
        }
        let (status, text) = match turn_outcome(rt, &live.head.id, r)? {
            Some(Answer::ChildOutput { output }) => (
                ChildStatus::Completed,
                format!("finished its turn. Output: {output}"),
            ),
            Some(Answer::ChildFailed { error, .. }) => {
                (ChildStatus::Failed, format!("failed: {error}"))
            }
            _ => continue,
        };
        let name = r.name.as_deref().unwrap_or_default();
        notices.push(Message::user(format!(
            "[Notice] The helper '{name}' {text}"
        )));
        live.notified.push(SubSession {
            status,
            updated_at: now,
            ..r.clone()
        });
    }
    Ok(notices)
}

/// The parent's records after its companion calls were answered (`records`: as
/// stored): a started child's record, a new turn's call, a termination, a turn seen to
/// end.
pub(super) fn companion_records(
    live: &Live,
    agent: &Agent,
    records: &[SubSession],
    now: u64,
) -> Vec<SubSession> {
    let mut updates: Vec<SubSession> = Vec::new();
    for p in &live.head.pending {
        let (Some(op), Some(name)) = (op_of(agent, &p.tool_name), name_in(&p.arguments)) else {
            continue;
        };
        let status = match live.answer(&p.tool_call_id) {
            Some(Answer::CompanionResult { .. }) if op == CompanionOp::Terminate => {
                ChildStatus::Terminated
            }
            Some(Answer::CompanionResult { .. }) => ChildStatus::Running,
            Some(Answer::ChildOutput { .. }) => ChildStatus::Completed,
            // The child goes on past a wait that timed out.
            Some(Answer::ChildFailed { code, .. }) if code == "subagent_timeout" => {
                ChildStatus::Running
            }
            Some(Answer::ChildFailed { code, .. })
                if !matches!(
                    code.as_str(),
                    "tool_input_invalid" | "subagent_dispatch_failed"
                ) =>
            {
                ChildStatus::Failed
            }
            _ => continue,
        };
        let child_id = persistent_child_id(&live.head.id, name);
        let known = updates
            .iter()
            .chain(records)
            .find(|r| r.child_id == child_id)
            .cloned();
        let record = match (op, known) {
            (CompanionOp::Spawn, _) => {
                let kind = p.arguments.get("agentType").and_then(Value::as_str);
                let Some(kind) = kind.and_then(|k| agent.persistent_child(k)) else {
                    continue;
                };
                SubSession {
                    child_id,
                    agent: kind.agent().name().to_string(),
                    tool_call_id: p.tool_call_id.clone(),
                    status,
                    created_at: now,
                    updated_at: now,
                    name: Some(name.to_string()),
                    mode: Some(kind.mode()),
                }
            }
            (CompanionOp::Send, Some(known)) => SubSession {
                tool_call_id: p.tool_call_id.clone(),
                status,
                updated_at: now,
                ..known
            },
            (CompanionOp::Terminate | CompanionOp::Wait, Some(known)) => SubSession {
                status,
                updated_at: now,
                ..known
            },
            _ => continue,
        };
        updates.retain(|r| r.child_id != record.child_id);
        updates.push(record);
    }
    updates
}
