//! Response bodies: the session, its runs and its checkpoints as the API shows them.

use super::MessagesQuery;
use crate::agent::{Agent, Agents};
use crate::error::ErrorInfo;
use crate::message::Message;
use crate::model::StopReason;
use crate::model::Usage;
use crate::store::{
    CallWait, CheckpointRecord, CheckpointStatus, ForkOrigin, Loaded, Owner, PendingCall,
    PendingKind, PendingView, RunRecord, SessionStatus,
};
use crate::tool::{Approval, Tool};
use serde::Serialize;
use serde_json::Value;

/// Body of the 201 that answers a create (or a fork): the session, its first run, where
/// its stream is, and — with an API token configured — a session token for it (also in
/// the stream's URL, since `EventSource` cannot set headers).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CreatedView {
    session_id: String,
    run_id: String,
    status: SessionStatus,
    stream_url: String,
    session_token: Option<String>,
}

impl CreatedView {
    /// The view of `created`, with a session token minted with `auth` at `now_secs`.
    pub fn new(
        created: crate::runner::Created,
        auth: &crate::auth::AuthConfig,
        now_secs: u64,
    ) -> Self {
        let id = created.session_id;
        let token = match auth {
            crate::auth::AuthConfig::Token(key) => {
                let expiry = now_secs + crate::auth::SESSION_TOKEN_TTL_SECS;
                crate::auth::session_token(key, &id, expiry)
            }
            _ => None,
        };
        let stream_url = match &token {
            Some(t) => format!("/v1/sessions/{id}/stream?token={t}"),
            None => format!("/v1/sessions/{id}/stream"),
        };
        Self {
            session_id: id,
            run_id: created.run_id,
            status: created.status,
            stream_url,
            session_token: token,
        }
    }
}

/// Body of `GET /v1/sessions/{id}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionView {
    session_id: String,
    agent: String,
    status: SessionStatus,
    step_count: u32,
    version: u64,
    state: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorInfo>,
    pending_tool_calls: Vec<PendingView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    suspended_reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    forked_from: Option<ForkOrigin>,
    /// The user who owns it, when a user created it (feature `users`).
    #[serde(skip_serializing_if = "Option::is_none")]
    owner: Option<Owner>,
    /// Whether `POST …/resume` would continue the session now.
    can_resume: bool,
    /// Why it can (`interrupted`) or cannot.
    resume_reason: ResumeReason,
    /// The newest stream event this view reflects: the stream read with `?after=` this
    /// sequence brings exactly the changes the view does not have yet.
    stream_sequence: u64,
}

/// Why a session can or cannot be resumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ResumeReason {
    /// It was interrupted: `resume` continues it.
    Interrupted,
    /// Its run is going on.
    Running,
    /// It waits for approvals or client results (`POST …/tool-results`).
    AwaitingToolResults,
    /// It waits for its sub-agents to end.
    AwaitingSubagents,
    /// Its run completed: send a message to go on, or fork it.
    Completed,
    /// Its run failed: retry it from a checkpoint.
    Failed,
    /// It was aborted for good.
    Aborted,
}

impl ResumeReason {
    fn of(status: SessionStatus, pending: &[PendingCall]) -> Self {
        match status {
            SessionStatus::Interrupted => Self::Interrupted,
            SessionStatus::Completed => Self::Completed,
            SessionStatus::Failed => Self::Failed,
            SessionStatus::Aborted => Self::Aborted,
            SessionStatus::Active if pending.iter().any(|p| p.kind != PendingKind::Child) => {
                Self::AwaitingToolResults
            }
            SessionStatus::Active if !pending.is_empty() => Self::AwaitingSubagents,
            SessionStatus::Active => Self::Running,
        }
    }
}

impl From<Loaded> for SessionView {
    fn from(l: Loaded) -> Self {
        let h = l.head;
        // A run waiting on people says on what: approvals only, or a client's answer
        // (a client tool, an MCP server's question or sign-in) among them.
        let approvals_only = h
            .pending
            .iter()
            .filter(|p| p.kind != PendingKind::Child)
            .all(|p| p.kind == PendingKind::Approval);
        let suspended_reason = h.suspended_reason.map(|r| match r {
            crate::chunk::SuspendReason::ClientTool if approvals_only => {
                "suspended_approval".to_string()
            }
            crate::chunk::SuspendReason::ClientTool => "suspended_client_tool".to_string(),
            crate::chunk::SuspendReason::AwaitingChildren => {
                "suspended_awaiting_children".to_string()
            }
        });
        let resume_reason = ResumeReason::of(h.status, &h.pending);
        Self {
            can_resume: resume_reason == ResumeReason::Interrupted,
            resume_reason,
            pending_tool_calls: h
                .pending
                .iter()
                .filter(|p| p.kind != PendingKind::Child)
                .map(PendingView::from)
                .collect(),
            session_id: h.id,
            agent: h.agent,
            status: h.status,
            step_count: h.step_count,
            version: h.version,
            state: l.state,
            output: h.output,
            error: h.error,
            suspended_reason,
            forked_from: h.forked_from,
            owner: h.owner,
            stream_sequence: 0,
        }
    }
}

impl SessionView {
    /// Sets the stream sequence the view reflects (read in the same turn as the state).
    pub fn at_sequence(mut self, sequence: u64) -> Self {
        self.stream_sequence = sequence;
        self
    }

    /// Adds the calls pending in descendant sessions (sub-agents): the client answers
    /// them at this, the root, session.
    pub fn with_descendant_calls(mut self, calls: Vec<PendingCall>) -> Self {
        if !calls.is_empty() && self.resume_reason == ResumeReason::AwaitingSubagents {
            self.resume_reason = ResumeReason::AwaitingToolResults;
        }
        self.pending_tool_calls
            .extend(calls.iter().map(PendingView::from));
        self
    }
}

/// One run as `GET /v1/sessions/{id}/runs` shows it: its totals, and per model step
/// and per answered call what its checkpoints recorded.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunView {
    run_id: String,
    turn: u32,
    status: crate::chunk::RunStatus,
    step_count: u32,
    started_at: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    completed_at: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorInfo>,
    usage: Usage,
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    usage_by_model: std::collections::BTreeMap<String, Usage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    trace_id: Option<String>,
    steps: Vec<StepView>,
    waits: Vec<CallWait>,
}

/// One model step of a run: its tokens and why the model stopped.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StepView {
    step: u32,
    checkpoint_id: String,
    usage: Usage,
    #[serde(skip_serializing_if = "Option::is_none")]
    stop_reason: Option<StopReason>,
}

impl RunView {
    /// The run with the steps and waits its checkpoints (of every run, in order)
    /// recorded.
    pub fn new(r: RunRecord, checkpoints: &[CheckpointRecord]) -> Self {
        let own = checkpoints.iter().filter(|c| c.run_id == r.run_id);
        let steps = own
            .clone()
            .filter_map(|c| {
                Some(StepView {
                    step: c.step_count,
                    checkpoint_id: c.id.clone(),
                    usage: c.usage?,
                    stop_reason: c.stop_reason,
                })
            })
            .collect();
        let waits = own.flat_map(|c| c.waits.iter().cloned()).collect();
        Self {
            run_id: r.run_id,
            turn: r.turn,
            status: r.status,
            step_count: r.step_count,
            started_at: r.started_at,
            completed_at: r.completed_at,
            error: r.error,
            usage: r.usage,
            usage_by_model: r.usage_by_model,
            trace_id: r.trace.map(|t| t.trace_id),
            steps,
            waits,
        }
    }
}

/// One checkpoint as `GET /v1/sessions/{id}/checkpoints` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointView {
    id: String,
    run_id: String,
    step_count: u32,
    timestamp: u64,
    status: CheckpointStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<Usage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stop_reason: Option<StopReason>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    waits: Vec<CallWait>,
}

impl From<CheckpointRecord> for CheckpointView {
    fn from(c: CheckpointRecord) -> Self {
        Self {
            id: c.id,
            run_id: c.run_id,
            step_count: c.step_count,
            timestamp: c.timestamp,
            status: c.status,
            usage: c.usage,
            stop_reason: c.stop_reason,
            waits: c.waits,
        }
    }
}

/// A page of a transcript (`GET …/messages`, and a checkpoint's): the messages of the
/// window `query` asked for, of `total`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MessagePage {
    messages: Vec<Message>,
    total: u64,
    offset: u64,
    limit: u64,
    has_more: bool,
}

impl MessagePage {
    /// `messages` (read at `query.offset`) of a transcript `total` long, without their
    /// reasoning unless `query` keeps it.
    pub fn new(mut messages: Vec<Message>, total: u64, query: &MessagesQuery) -> Self {
        if !query.include_thinking {
            messages.iter_mut().for_each(Message::strip_thinking);
        }
        let has_more = query.offset.saturating_add(messages.len() as u64) < total;
        Self {
            messages,
            total,
            offset: query.offset,
            limit: query.limit,
            has_more,
        }
    }
}

/// The session as it was at a checkpoint (`GET …/checkpoints/{checkpointId}`): the
/// checkpoint, the state there and a page of the transcript up to it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckpointAt {
    checkpoint: CheckpointView,
    state: Value,
    #[serde(flatten)]
    page: MessagePage,
}

impl CheckpointAt {
    /// The messages `query` asks for at `checkpoint`: where they start and how many to
    /// read (none past the checkpoint's transcript).
    pub fn window(checkpoint: &CheckpointRecord, query: &MessagesQuery) -> (u64, u64) {
        let left = checkpoint.message_count.saturating_sub(query.offset);
        (query.offset, query.limit.min(left))
    }

    /// `checkpoint` with its `state` and the `messages` of its [`window`](Self::window).
    pub fn new(
        checkpoint: CheckpointRecord,
        state: Value,
        messages: Vec<Message>,
        query: &MessagesQuery,
    ) -> Self {
        let page = MessagePage::new(messages, checkpoint.message_count, query);
        Self {
            checkpoint: checkpoint.into(),
            state,
            page,
        }
    }
}

/// Body of `GET /v1/agents`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentsView {
    agents: Vec<AgentView>,
}

/// One agent as `GET /v1/agents` lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
struct AgentView {
    name: String,
    description: String,
    tools: Vec<ToolView>,
    /// The state's JSON Schema, for an agent with typed state.
    #[serde(skip_serializing_if = "Option::is_none")]
    state_schema: Option<Value>,
    /// The output's JSON Schema, for an agent that owes structured output.
    #[serde(skip_serializing_if = "Option::is_none")]
    output_schema: Option<Value>,
    /// What capabilities show of it ([`AGENT_EXTRAS`]).
    #[serde(flatten)]
    extras: serde_json::Map<String, Value>,
    /// What to set before it runs, for an agent offered but not configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    needs: Option<String>,
}

/// A capability's part of an agent's view: a key and its value, if it has one.
type AgentExtra = fn(&Agent) -> Option<(&'static str, Value)>;

/// What capabilities add to an agent's view, one line per capability: with the feature
/// `mcp`, its MCP servers (`mcpServers`).
const AGENT_EXTRAS: &[AgentExtra] = &[
    #[cfg(feature = "mcp")]
    crate::mcp::agent_view,
];

/// One tool of an agent: who runs it and when it needs approval.
#[derive(Debug, Clone, PartialEq, Serialize)]
struct ToolView {
    name: String,
    description: String,
    approval: &'static str,
    executor: &'static str,
}

impl From<&Agents> for AgentsView {
    fn from(agents: &Agents) -> Self {
        let tool = |t: &Tool| ToolView {
            name: t.name().into(),
            description: t.description().into(),
            approval: match t.approval() {
                Approval::Never => "never",
                Approval::Always => "always",
                Approval::When(_) => "conditional",
            },
            executor: if t.is_client() { "client" } else { "server" },
        };
        let agent = |a: &Agent| AgentView {
            name: a.name().into(),
            description: a.description().into(),
            tools: a.tools().iter().map(tool).collect(),
            state_schema: a.state_schema().cloned(),
            output_schema: a.output_schema().cloned(),
            extras: {
                // Inserted one by one: collecting would sort first.
                let mut extras = serde_json::Map::new();
                for (key, value) in AGENT_EXTRAS.iter().filter_map(|extra| extra(a)) {
                    extras.insert(key.into(), value);
                }
                extras
            },
            needs: None,
        };
        let unconfigured = agents.unconfigured_agents().iter().map(|u| AgentView {
            name: u.name.clone(),
            description: u.description.clone(),
            tools: Vec::new(),
            state_schema: None,
            output_schema: None,
            extras: serde_json::Map::new(),
            needs: Some(u.needs.clone()),
        });
        Self {
            agents: agents.iter().map(agent).chain(unconfigured).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{AuthConfig, verify_session_token};
    use crate::runner::Created;

    fn created() -> Created {
        Created {
            session_id: "s1".into(),
            run_id: "run-1".into(),
            status: SessionStatus::Active,
        }
    }

    #[test]
    fn a_created_session_gets_a_token_for_itself_only_with_an_api_token() {
        let view = CreatedView::new(created(), &AuthConfig::Token("k".into()), 1_000);
        let body = serde_json::to_value(&view).unwrap();
        let token = body["sessionToken"].as_str().unwrap();
        assert_eq!(
            verify_session_token("k", token, 1_001).as_deref(),
            Some("s1")
        );
        assert_eq!(
            body["streamUrl"],
            format!("/v1/sessions/s1/stream?token={token}")
        );
        assert_eq!(
            (body["runId"].as_str(), body["status"].as_str()),
            (Some("run-1"), Some("active"))
        );
        let open = serde_json::to_value(CreatedView::new(created(), &AuthConfig::Open, 0)).unwrap();
        assert_eq!(open["sessionToken"], serde_json::Value::Null);
        assert_eq!(open["streamUrl"], "/v1/sessions/s1/stream");
    }

    #[test]
    fn a_checkpoint_is_read_within_its_own_transcript() {
        let checkpoint = CheckpointRecord {
            id: "ckpt_1".into(),
            step_count: 2,
            message_count: 3,
            timestamp: 5,
            status: CheckpointStatus::Suspended,
            run_id: "run-1".into(),
            usage: None,
            stop_reason: None,
            waits: Vec::new(),
        };
        let query = |offset, limit| MessagesQuery {
            offset,
            limit,
            include_thinking: true,
        };
        // Never past the checkpoint, however long the transcript grew since.
        assert_eq!(CheckpointAt::window(&checkpoint, &query(0, 50)), (0, 3));
        assert_eq!(CheckpointAt::window(&checkpoint, &query(1, 1)), (1, 1));
        assert_eq!(CheckpointAt::window(&checkpoint, &query(7, 50)), (7, 0));
        let said = vec![Message::user("b")];
        let view = CheckpointAt::new(checkpoint, serde_json::json!({"k": 1}), said, &query(1, 1));
        let json = serde_json::to_value(&view).unwrap();
        assert_eq!(json["checkpoint"]["id"], "ckpt_1");
        assert_eq!(json["state"], serde_json::json!({"k": 1}));
        assert_eq!(
            (&json["total"], &json["hasMore"]),
            (&3.into(), &true.into())
        );
    }
}
