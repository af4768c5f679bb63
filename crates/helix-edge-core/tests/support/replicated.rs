//! Sessions committed by a session object's store (on its own SQLite) and replicated
//! to a SQLite with the D1 schema the library ships ([`super::lite::Lite`]): the rows
//! the queries across sessions read, as a real session object leaves them.

#![allow(dead_code)] // Each test file uses its part.

use super::lite::Lite;
use super::record::LiteRecord;
use futures::executor::block_on;
use helix_edge_core::chunk::RunStatus;
use helix_edge_core::host::ManualHost;
use helix_edge_core::message::Message;
use helix_edge_core::model::Usage;
use helix_edge_core::sqlite::{Replica, SqliteStore};
use helix_edge_core::store::{
    CheckpointRecord, CheckpointStatus, Commit, NewSession, Owner, PendingCall, PendingKind,
    RunRecord, SessionHead, SessionStatus, StateChange, Store,
};
use serde_json::json;
use std::cell::Cell as Flag;
use std::rc::Rc;

pub fn head(id: &str, agent: &str) -> SessionHead {
    SessionHead {
        id: id.into(),
        agent: agent.into(),
        status: SessionStatus::Active,
        version: 1,
        commit_id: String::new(),
        step_count: 0,
        message_count: 1,
        run: RunRecord {
            run_id: format!("{id}-run1"),
            turn: 1,
            status: RunStatus::Running,
            step_count: 0,
            started_at: 1_000,
            completed_at: None,
            error: None,
            usage: Usage::default(),
            usage_by_model: Default::default(),
            nudges: 0,
            deferred_output: None,
            input_at: 0,
            options: None,
            trace: None,
        },
        pending: vec![],
        suspended_reason: None,
        output: None,
        error: None,
        checkpoint_id: None,
        created_at: 1_000,
        updated_at: 1_000,
        parent: None,
        forked_from: None,
        owner: None,
    }
}

pub fn call(id: &str, tool: &str, kind: PendingKind, since: u64) -> PendingCall {
    PendingCall {
        tool_call_id: id.into(),
        tool_name: tool.into(),
        arguments: json!({"path": format!("/{id}")}),
        kind,
        deadline: (kind == PendingKind::Client).then_some(since + 300_000),
        since,
        output_path: None,
        approvers: None,
        request: None,
    }
}

/// A session of `agent` whose run waits on `pending` (none: a session that does not
/// wait), committed and replicated to `d1`.
pub fn session(d1: &Rc<Lite>, id: &str, agent: &str, pending: Vec<PendingCall>) {
    owned_session(d1, id, agent, pending, None);
}

/// The same, owned by `owner`.
pub fn owned_session(
    d1: &Rc<Lite>,
    id: &str,
    agent: &str,
    pending: Vec<PendingCall>,
    owner: Option<Owner>,
) {
    used_session(d1, id, agent, pending, owner, Usage::default(), 1_000);
}

/// The same, its run started at `started_at` (ms) and having used `usage`.
pub fn used_session(
    d1: &Rc<Lite>,
    id: &str,
    agent: &str,
    pending: Vec<PendingCall>,
    owner: Option<Owner>,
    usage: Usage,
    started_at: u64,
) {
    let mut waiting = head(id, agent);
    waiting.pending = pending;
    waiting.owner = owner;
    waiting.run.usage = usage;
    // Its tokens all come from one model, named after the agent.
    waiting.run.usage_by_model = [(format!("{agent}-model"), usage)].into();
    waiting.run.started_at = started_at;
    replicated(d1, waiting);
}

/// A session created as `head(id, agent)` (with `waiting`'s owner), then committed as
/// `waiting`, and replicated to `d1`.
pub fn replicated(d1: &Rc<Lite>, waiting: SessionHead) {
    let (id, agent) = (waiting.id.clone(), waiting.agent.clone());
    let host = Rc::new(ManualHost::new(1_000, "t"));
    let record = LiteRecord {
        db: d1.clone(),
        down: Rc::new(Flag::new(false)),
    };
    let local = Lite::object();
    let replica = Rc::new(Replica::new(local.clone(), Some(record), host));
    let store = SqliteStore::new(local, replica.clone(), 1_000);
    let checkpoint = CheckpointRecord {
        id: format!("{id}-k0"),
        step_count: 0,
        message_count: 1,
        timestamp: 1_000,
        status: CheckpointStatus::Active,
        run_id: format!("{id}-run1"),
        usage: None,
        stop_reason: None,
        waits: vec![],
    };
    let new = NewSession {
        head: SessionHead {
            owner: waiting.owner.clone(),
            ..head(&id, &agent)
        },
        state: json!({}),
        messages: vec![Message::user("hello")],
        checkpoint,
    };
    block_on(store.create(new)).unwrap();
    let commit = Commit {
        head: waiting,
        truncate_messages_to: None,
        messages: vec![],
        state: StateChange::None,
        checkpoint: None,
        clear_interrupt: false,
        subsessions: Vec::new(),
    };
    block_on(store.commit(&id, 1, commit)).unwrap();
    block_on(replica.replicate());
}
