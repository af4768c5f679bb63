//! Persistent children in the runner: the companion calls of an agent with persistent
//! children ([`crate::agent::PersistentChild`]). Every companion call is recorded as a
//! pending child call before anything reaches a child, like a sub-agent call, and then
//! settled from durable state alone:
//! - a spawn (its name chosen in the step when the model gave none) starts the child
//!   `{parent}-agent-{name}` with the call as its parent call, a message starts the
//!   child's next turn: both idempotent, so a retried order after a crash finds the turn
//!   it started;
//! - a blocking spawn or message, and a wait, are answered by the child's report that the
//!   turn ended; everything else is answered at once (a non-blocking start, the list, a
//!   status, a termination);
//! - each turn's outcome is kept under the id `{call}#turn` of the call that started it,
//!   so a status or a wait read later finds it, and the parent's record of the child
//!   (its [`SubSession`], with `name` and `mode`) names the turn's call.

use super::{Live, RunError, Runner};
use crate::agent::{Agent, persistent_child_id};
use crate::message::{Message, ToolCall};
use crate::store::{
    Answer, ChildMode, ChildStatus, PendingCall, PendingKind, SessionStatus, Store, SubSession,
};
use crate::tool::companion::{CompanionOp, valid_child_name};
use serde_json::{Value, json};

/// The answer id under which the outcome of the turn started by `call_id` is kept.
pub(crate) fn turn_key(call_id: &str) -> String {
    format!("{call_id}#turn")
}

/// The companion operation of a call of tool `tool_name` in `agent`.
fn op_of(agent: &Agent, tool_name: &str) -> Option<CompanionOp> {
    agent.tool(tool_name).and_then(|t| t.companion_op())
}

/// The name a companion call's arguments give.
fn name_in(arguments: &Value) -> Option<&str> {
    arguments.get("name").and_then(Value::as_str)
}

/// The persistent children among a parent's records.
fn persistent(records: &[SubSession]) -> impl Iterator<Item = &SubSession> {
    records.iter().filter(|r| r.name.is_some())
}

impl<S: Store> Runner<S> {
    /// The parent's records of its children as `live` shows them: stored, and updated by
    /// the commit sent ahead, if any (its records have not landed yet).
    pub(crate) async fn records(&self, live: &Live) -> Result<Vec<SubSession>, RunError> {
        let mut records = self.store.subsessions(&live.head.id).await?;
        if let Some(ahead) = &live.ahead {
            crate::store::upsert_subsessions(&mut records, ahead.subsessions().to_vec());
        }
        Ok(records)
    }

    /// Names the children the step's spawn calls start without a name:
    /// `{agentType}-{n}`, the first `n` from 1 that no child of the parent (or earlier
    /// spawn of the step) has. The name goes into the call's arguments, so the
    /// transcript, the pending call and every later step see it.
    pub(crate) async fn name_children(
        &self,
        live: &Live,
        agent: &Agent,
        calls: &mut [ToolCall],
    ) -> Result<(), RunError> {
        if agent.persistent_children().is_empty() {
            return Ok(());
        }
        let unnamed = |c: &ToolCall| {
            op_of(agent, &c.name) == Some(CompanionOp::Spawn) && name_in(&c.arguments).is_none()
        };
        if !calls.iter().any(unnamed) {
            return Ok(());
        }
        let records = self.records(live).await?;
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
    }

    /// Settles the unanswered companion calls of `live`: orders sent (once per instance;
    /// each is idempotent), and the answers that need no child turn stored. Answers go
    /// into `live.answers`.
    pub(crate) async fn settle_companions(
        &self,
        live: &mut Live,
        agent: &Agent,
    ) -> Result<(), RunError> {
        if agent.persistent_children().is_empty() {
            return Ok(());
        }
        let open: Vec<(PendingCall, CompanionOp)> = live
            .head
            .pending
            .iter()
            .filter(|p| p.kind == PendingKind::Child && live.answer(&p.tool_call_id).is_none())
            .filter_map(|p| Some((p.clone(), op_of(agent, &p.tool_name)?)))
            .collect();
        if open.is_empty() {
            return Ok(());
        }
        let records = self.records(live).await?;
        let now = self.host.now_ms();
        for (p, op) in open {
            if p.deadline.is_some_and(|d| d <= now) {
                let name = name_in(&p.arguments).unwrap_or_default();
                let timeout = Answer::ChildFailed {
                    code: "subagent_timeout".into(),
                    error: format!(
                        "The child '{name}' did not end its turn in time; it goes on: wait for it again, or message or terminate it."
                    ),
                };
                self.store_child_answer(live, &p.tool_call_id, timeout)?;
                continue;
            }
            let answer = match self.settle_companion(live, agent, &records, &p, op).await? {
                Some(answer) => answer,
                None => continue,
            };
            self.store_child_answer(live, &p.tool_call_id, answer)?;
        }
        Ok(())
    }

    /// One companion call: its answer now, or `None` while it waits on a turn.
    async fn settle_companion(
        &self,
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
                children.push(self.child_view(parent, r)?);
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
                        super::ChildOrder::Start {
                            agent: kind.agent().name().to_string(),
                            message: message.to_string(),
                            parent: self.parent_ref(live, &p.tool_call_id),
                        }
                    } else {
                        super::ChildOrder::Message {
                            message: message.to_string(),
                            tool_call_id: p.tool_call_id.clone(),
                        }
                    };
                    if let Err(e) = self.children.send(&child_id, order).await {
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
                if let Err(e) = self
                    .children
                    .send(&child_id, super::ChildOrder::Abort { reason })
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
                let view = record.map(|r| self.child_view(parent, r)).transpose()?;
                Ok(view.map(done))
            }
            CompanionOp::Wait => {
                let outcome = record.map(|r| self.turn_outcome(parent, r)).transpose()?;
                Ok(outcome.flatten())
            }
            CompanionOp::List => Ok(None),
        }
    }

    /// A persistent child of `live` reports that a turn ended: the outcome is kept
    /// under the turn's key, and answers the blocking call that started the turn and the
    /// waits on it. A report of a turn the parent no longer looks at changes nothing.
    /// `Ok(true)` when the parent has work to do now.
    pub(crate) async fn persistent_turn_ended(
        &self,
        mut live: Live,
        report: super::ChildEnded,
    ) -> Result<bool, RunError> {
        let parent = &live.head.id;
        let child = Some(report.child_id.as_str());
        let records = self.store.subsessions(parent).await?;
        let current = records
            .iter()
            .find(|r| r.child_id == report.child_id && r.tool_call_id == report.tool_call_id);
        let notice = current.is_some_and(|r| r.mode == Some(ChildMode::NonBlocking));
        let current = current.is_some();
        let mut waiting = live.head.pending.iter().filter(|p| {
            let on_child = super::children::waited_child(parent, p).as_deref() == child;
            let wait = p.tool_name.ends_with("waitForResult");
            on_child && (p.tool_call_id == report.tool_call_id || (wait && current))
        });
        let waiting: Vec<&PendingCall> = waiting.by_ref().collect();
        if waiting.is_empty() && !current {
            return Ok(false);
        }
        let suspension = &self.journal.suspension;
        suspension.answer(parent, &turn_key(&report.tool_call_id), &report.answer)?;
        let mut stored = false;
        for p in waiting {
            let outcome = suspension.answer(parent, &p.tool_call_id, &report.answer)?;
            stored |= outcome == crate::store::AnswerOutcome::Stored;
        }
        // A notice waits for the parent's next step; a parent whose run has finished
        // starts one for it when it is configured to.
        let finished = matches!(
            live.head.status,
            SessionStatus::Completed | SessionStatus::Failed
        );
        if !stored && notice && finished && self.agent(&live.head.agent)?.wakes_on_children() {
            self.start_run(&mut live, Vec::new(), None).await?;
            return Ok(true);
        }
        Ok(stored)
    }

    /// Turns a companion call's answer into its tool result.
    pub(crate) fn end_companion_call(
        &self,
        call: &ToolCall,
        answer: &Answer,
        output_path: Option<&str>,
        state: &Value,
        emitter: &super::emit::Emitter,
    ) -> (crate::message::Message, Option<crate::state::PatchOp>) {
        let result = match answer {
            Answer::CompanionResult { result } => result.clone(),
            Answer::ChildOutput { output } => json!({
                "name": name_in(&call.arguments),
                "status": "completed",
                "output": output,
            }),
            Answer::ChildFailed { code, error } => {
                return (self.end_with_error(call, code, error, emitter), None);
            }
            _ => {
                let err = crate::error::ToolError::TimedOut;
                return (self.end_without_running(call, &err, emitter), None);
            }
        };
        self.end_with_result(call, result, output_path, state, emitter)
    }

    /// The notices the next step gives the model: one user message per non-blocking
    /// child whose turn ended since the parent last heard of it. Their records, marked
    /// as heard of, go into `live.notified` for the step's commit.
    pub(crate) async fn notices(
        &self,
        live: &mut Live,
        agent: &Agent,
    ) -> Result<Vec<crate::message::Message>, RunError> {
        live.notified.clear();
        let non_blocking = agent.persistent_children().iter();
        if !non_blocking
            .clone()
            .any(|c| c.mode() == ChildMode::NonBlocking)
        {
            return Ok(Vec::new());
        }
        let records = self.records(live).await?;
        let now = self.host.now_ms();
        let mut notices = Vec::new();
        for r in persistent(&records) {
            if r.mode != Some(ChildMode::NonBlocking) || r.status != ChildStatus::Running {
                continue;
            }
            let (status, text) = match self.turn_outcome(&live.head.id, r)? {
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

    /// The persistent children of `parent` that were not terminated, by id; with
    /// `running_free`, only the non-blocking ones whose turn is running (those the
    /// parent does not wait on, whose approvals and client calls still surface at the
    /// root).
    pub(crate) async fn persistent_children(
        &self,
        head: &crate::store::SessionHead,
        running_free: bool,
    ) -> Result<Vec<String>, RunError> {
        let agent = self.agents.get(&head.agent);
        if agent.is_none_or(|a| a.persistent_children().is_empty()) {
            return Ok(Vec::new());
        }
        let records = self.store.subsessions(&head.id).await?;
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

    /// The outcome of a persistent child's current turn, once it ended.
    fn turn_outcome(&self, parent: &str, r: &SubSession) -> Result<Option<Answer>, RunError> {
        let turn = turn_key(&r.tool_call_id);
        Ok(self.journal.suspension.find_answer(parent, &turn)?)
    }

    /// A persistent child as `listChildren` and `getChildStatus` show it: its record,
    /// and the outcome of its current turn once that ended.
    fn child_view(&self, parent: &str, r: &SubSession) -> Result<Value, RunError> {
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
        match self.turn_outcome(parent, r)? {
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

    /// The parent's records after its companion calls were answered (`records`: as
    /// stored): a started child's record, a new turn's call, a termination, a turn
    /// seen to end.
    pub(crate) fn companion_records(
        &self,
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
