//! The store conformance suite: the [`Store`] contract as executable checks, written
//! once and run against every backend (natively against [`MemoryStore`](super::MemoryStore),
//! in workerd against D1). Checks return errors instead of panicking, so that the suite
//! can run inside a worker and report.

use super::{
    CallWait, CheckpointRecord, CheckpointStatus, ChildStatus, Commit, NewSession, PendingCall,
    PendingKind, RunRecord, SessionHead, SessionStatus, StateChange, Store, StoreError,
    WaitOutcome,
};
use crate::chunk::RunStatus;
use crate::message::Message;
use crate::model::{StopReason, Usage};
use crate::state::PatchOp;
use serde_json::json;

/// The outcome of one check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckResult {
    /// The check's name.
    pub name: &'static str,
    /// `Err(why)` when the backend broke the contract.
    pub outcome: Result<(), String>,
}

macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

fn head(id: &str) -> SessionHead {
    SessionHead {
        id: id.into(),
        agent: "assistant".into(),
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
            nudges: 0,
            deferred_output: None,
            input_at: 0,
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
    }
}

fn new_session(id: &str) -> NewSession {
    NewSession {
        head: head(id),
        state: json!({"notes": []}),
        messages: vec![Message::user("hello")],
        checkpoint: first_checkpoint(id),
    }
}

/// A checkpoint with every optional field set, so that a backend which drops one fails.
fn first_checkpoint(id: &str) -> CheckpointRecord {
    CheckpointRecord {
        id: format!("{id}-k0"),
        step_count: 0,
        message_count: 1,
        timestamp: 1_000,
        status: CheckpointStatus::Active,
        run_id: format!("{id}-run1"),
        usage: Some(Usage {
            input_tokens: 12,
            output_tokens: 3,
            cache_read_tokens: 8,
            cache_write_tokens: 0,
        }),
        stop_reason: Some(StopReason::ToolUse),
        waits: vec![CallWait {
            tool_call_id: "call_1".into(),
            tool_name: "delete_file".into(),
            kind: PendingKind::Approval,
            waited_ms: 1_500,
            outcome: WaitOutcome::Approved,
        }],
    }
}

fn e(err: StoreError) -> String {
    format!("unexpected store error: {err}")
}

/// A commit appending one assistant message and one note, with a checkpoint.
fn step_commit(h: &SessionHead, text: &str, ckpt: &str) -> Commit {
    let mut head = h.clone();
    head.step_count += 1;
    head.run.step_count += 1;
    head.message_count += 1;
    head.checkpoint_id = Some(ckpt.into());
    Commit {
        truncate_messages_to: None,
        messages: vec![Message::assistant_text(text)],
        state: StateChange::Patch(vec![PatchOp::Add {
            path: "/notes/-".into(),
            value: json!({"text": text}),
        }]),
        checkpoint: Some(CheckpointRecord {
            id: ckpt.into(),
            step_count: head.step_count,
            message_count: head.message_count,
            timestamp: 2_000,
            status: CheckpointStatus::Active,
            run_id: head.run.run_id.clone(),
            usage: None,
            stop_reason: None,
            waits: Vec::new(),
        }),
        clear_interrupt: false,
        subsessions: Vec::new(),
        head,
    }
}

async fn loaded<S: Store>(store: &S, id: &str) -> Result<super::Loaded, String> {
    store
        .load(id)
        .await
        .map_err(e)?
        .ok_or_else(|| format!("session {id} vanished"))
}

async fn create_then_load_round_trips<S: Store>(store: &S, id: &str) -> Result<(), String> {
    ensure!(
        store.load(id).await.map_err(e)?.is_none(),
        "an unknown session must load as None"
    );
    store.create(new_session(id)).await.map_err(e)?;
    let l = loaded(store, id).await?;
    ensure!(
        l.head.version == 1,
        "a new session has version 1, got {}",
        l.head.version
    );
    ensure!(l.head == head(id), "head did not round-trip: {:?}", l.head);
    ensure!(l.state == json!({"notes": []}), "state did not round-trip");
    ensure!(l.interrupt.is_none(), "a new session has no interrupt");
    let msgs = store.messages(id, 0, 10).await.map_err(e)?;
    ensure!(
        msgs == vec![Message::user("hello")],
        "transcript did not round-trip: {msgs:?}"
    );
    let runs = store.runs(id).await.map_err(e)?;
    ensure!(
        runs.len() == 1 && runs[0] == head(id).run,
        "the first run is recorded: {runs:?}"
    );
    let ckpts = store.checkpoints(id).await.map_err(e)?;
    ensure!(
        ckpts == vec![first_checkpoint(id)],
        "the initial checkpoint: {ckpts:?}"
    );
    let (_, state) = store
        .checkpoint_state(id, &ckpts[0].id)
        .await
        .map_err(e)?
        .ok_or("initial state")?;
    ensure!(
        state == json!({"notes": []}),
        "the initial checkpoint holds the initial state"
    );
    Ok(())
}

async fn concurrent_creators_exactly_one_wins<S: Store>(store: &S, id: &str) -> Result<(), String> {
    let (a, b) = futures::join!(store.create(new_session(id)), store.create(new_session(id)));
    let wins = [a.is_ok(), b.is_ok()].iter().filter(|w| **w).count();
    ensure!(wins == 1, "exactly one creator must win, {wins} did");
    let loser = if a.is_err() { a } else { b };
    ensure!(
        matches!(loser, Err(StoreError::Exists(_))),
        "the loser gets Exists, got {loser:?}"
    );
    Ok(())
}

async fn commit_applies_everything_and_bumps_the_version<S: Store>(
    store: &S,
    id: &str,
) -> Result<(), String> {
    store.create(new_session(id)).await.map_err(e)?;
    let h = loaded(store, id).await?.head;
    let v = store
        .commit(id, 1, step_commit(&h, "a", &format!("{id}-k1")))
        .await
        .map_err(e)?;
    ensure!(v == 2, "the version goes 1 -> 2, got {v}");
    let l = loaded(store, id).await?;
    ensure!(
        l.head.version == 2 && l.head.step_count == 1,
        "head not updated: {:?}",
        l.head
    );
    ensure!(
        l.state == json!({"notes": [{"text": "a"}]}),
        "patch not applied: {}",
        l.state
    );
    let msgs = store.messages(id, 0, 10).await.map_err(e)?;
    ensure!(
        msgs.len() == 2 && msgs[1] == Message::assistant_text("a"),
        "message not appended"
    );
    let ckpts = store.checkpoints(id).await.map_err(e)?;
    ensure!(
        ckpts.len() == 2 && ckpts[1].id == format!("{id}-k1"),
        "checkpoint not recorded: {ckpts:?}"
    );
    let runs = store.runs(id).await.map_err(e)?;
    ensure!(
        runs.len() == 1 && runs[0].step_count == 1,
        "run not updated in place: {runs:?}"
    );
    Ok(())
}

async fn a_stale_commit_is_rejected_and_changes_nothing<S: Store>(
    store: &S,
    id: &str,
) -> Result<(), String> {
    store.create(new_session(id)).await.map_err(e)?;
    let h = loaded(store, id).await?.head;
    store
        .commit(id, 1, step_commit(&h, "first", &format!("{id}-k1")))
        .await
        .map_err(e)?;
    let before = loaded(store, id).await?;
    let stale = store
        .commit(id, 1, step_commit(&h, "second", &format!("{id}-k2")))
        .await;
    ensure!(
        matches!(stale, Err(StoreError::Stale { expected: 1 })),
        "expected Stale, got {stale:?}"
    );
    let after = loaded(store, id).await?;
    ensure!(after == before, "a stale commit changed the session");
    let count = store.messages(id, 0, 10).await.map_err(e)?.len();
    ensure!(count == 2, "a stale commit appended messages ({count})");
    ensure!(
        store.checkpoints(id).await.map_err(e)?.len() == 2,
        "a stale commit added a checkpoint"
    );
    Ok(())
}

async fn a_commit_whose_patch_fails_changes_nothing<S: Store>(
    store: &S,
    id: &str,
) -> Result<(), String> {
    store.create(new_session(id)).await.map_err(e)?;
    let h = loaded(store, id).await?.head;
    let mut bad = step_commit(&h, "x", &format!("{id}-k1"));
    bad.state = StateChange::Patch(vec![PatchOp::Remove {
        path: "/missing".into(),
    }]);
    ensure!(
        store.commit(id, 1, bad).await.is_err(),
        "a commit with a failing patch must fail"
    );
    let l = loaded(store, id).await?;
    ensure!(
        l.head.version == 1 && l.state == json!({"notes": []}),
        "the failed commit left changes"
    );
    ensure!(
        store.messages(id, 0, 10).await.map_err(e)?.len() == 1,
        "the failed commit appended messages"
    );
    Ok(())
}

async fn messages_paginate<S: Store>(store: &S, id: &str) -> Result<(), String> {
    store.create(new_session(id)).await.map_err(e)?;
    let mut h = loaded(store, id).await?.head;
    for i in 0..4 {
        let v = store
            .commit(
                id,
                h.version,
                step_commit(&h, &format!("m{i}"), &format!("{id}-page{i}")),
            )
            .await;
        h = loaded(store, id).await?.head;
        ensure!(v.map_err(e)? == h.version, "commit returns the new version");
    }
    let page = store.messages(id, 1, 2).await.map_err(e)?;
    ensure!(
        page == vec![Message::assistant_text("m0"), Message::assistant_text("m1")],
        "page 1..3 wrong: {page:?}"
    );
    ensure!(
        store.messages(id, 4, 10).await.map_err(e)?.len() == 1,
        "the last page is short"
    );
    ensure!(
        store.messages(id, 9, 10).await.map_err(e)?.is_empty(),
        "past the end is empty"
    );
    Ok(())
}

async fn pending_calls_round_trip<S: Store>(store: &S, id: &str) -> Result<(), String> {
    store.create(new_session(id)).await.map_err(e)?;
    let mut h = loaded(store, id).await?.head;
    h.pending = vec![PendingCall {
        tool_call_id: "c1".into(),
        tool_name: "delete_file".into(),
        arguments: json!({"path": "/tmp/x"}),
        kind: PendingKind::Approval,
        deadline: Some(42),
        since: 7,
    }];
    let commit = Commit {
        head: h.clone(),
        truncate_messages_to: None,
        messages: vec![],
        state: StateChange::None,
        checkpoint: None,
        clear_interrupt: false,
        subsessions: Vec::new(),
    };
    store.commit(id, 1, commit).await.map_err(e)?;
    let l = loaded(store, id).await?;
    ensure!(
        l.head.pending == h.pending,
        "pending calls round-trip: {:?}",
        l.head.pending
    );
    Ok(())
}

async fn an_interrupt_is_durable_until_a_commit_clears_it<S: Store>(
    store: &S,
    id: &str,
) -> Result<(), String> {
    store.create(new_session(id)).await.map_err(e)?;
    store
        .request_interrupt(id, Some("stop".into()))
        .await
        .map_err(e)?;
    let l = loaded(store, id).await?;
    ensure!(
        l.interrupt.as_ref().and_then(|i| i.reason.as_deref()) == Some("stop"),
        "interrupt not stored"
    );
    let mut commit = step_commit(&l.head, "a", &format!("{id}-k1"));
    store.commit(id, 1, commit.clone()).await.map_err(e)?;
    ensure!(
        loaded(store, id).await?.interrupt.is_some(),
        "a commit that does not clear keeps the flag"
    );
    commit.head = loaded(store, id).await?.head;
    commit.head.message_count += 1;
    commit.clear_interrupt = true;
    commit.checkpoint = None;
    store.commit(id, 2, commit).await.map_err(e)?;
    ensure!(
        loaded(store, id).await?.interrupt.is_none(),
        "clear_interrupt clears the flag"
    );
    Ok(())
}

async fn a_checkpoint_restores_state_and_transcript<S: Store>(
    store: &S,
    id: &str,
) -> Result<(), String> {
    store.create(new_session(id)).await.map_err(e)?;
    let h = loaded(store, id).await?.head;
    let k1 = format!("{id}-k1");
    store
        .commit(id, 1, step_commit(&h, "a", &k1))
        .await
        .map_err(e)?;
    let h = loaded(store, id).await?.head;
    store
        .commit(id, 2, step_commit(&h, "b", &format!("{id}-k2")))
        .await
        .map_err(e)?;
    let (ckpt, state) = store
        .checkpoint_state(id, &k1)
        .await
        .map_err(e)?
        .ok_or("the first checkpoint is missing")?;
    ensure!(
        state == json!({"notes": [{"text": "a"}]}),
        "checkpoint state is the state after its commit: {state}"
    );
    ensure!(
        ckpt.message_count == 2,
        "checkpoint message count: {}",
        ckpt.message_count
    );
    ensure!(
        store
            .checkpoint_state(id, "nope")
            .await
            .map_err(e)?
            .is_none(),
        "unknown checkpoint is None"
    );

    let mut head = loaded(store, id).await?.head;
    head.message_count = ckpt.message_count + 1;
    head.run.run_id = format!("{id}-run2");
    head.run.turn = 2;
    let restore = Commit {
        head,
        truncate_messages_to: Some(ckpt.message_count),
        messages: vec![Message::user("again")],
        state: StateChange::Replace(state.clone()),
        checkpoint: None,
        clear_interrupt: false,
        subsessions: Vec::new(),
    };
    store.commit(id, 3, restore).await.map_err(e)?;
    let l = loaded(store, id).await?;
    ensure!(l.state == state, "state restored");
    let msgs = store.messages(id, 0, 10).await.map_err(e)?;
    ensure!(
        msgs.len() == 3 && msgs[2] == Message::user("again"),
        "transcript truncated then appended: {msgs:?}"
    );
    let runs = store.runs(id).await.map_err(e)?;
    ensure!(
        runs.len() == 2 && runs[1].turn == 2,
        "a second run is recorded: {runs:?}"
    );
    Ok(())
}

async fn unknown_sessions_are_not_found<S: Store>(store: &S, id: &str) -> Result<(), String> {
    let commit = step_commit(&head(id), "x", "k");
    ensure!(
        matches!(
            store.commit(id, 1, commit).await,
            Err(StoreError::NotFound(_))
        ),
        "commit: NotFound"
    );
    ensure!(
        matches!(
            store.request_interrupt(id, None).await,
            Err(StoreError::NotFound(_))
        ),
        "interrupt: NotFound"
    );
    Ok(())
}

async fn subsessions_are_recorded_and_updated<S: Store>(store: &S, id: &str) -> Result<(), String> {
    let child = format!("{id}.sub-1");
    store.create(new_session(id)).await.map_err(e)?;
    ensure!(
        store.subsessions(id).await.map_err(e)?.is_empty(),
        "a new session has no children"
    );
    let record = |status: ChildStatus, at: u64| super::SubSession {
        child_id: child.clone(),
        agent: "researcher".into(),
        tool_call_id: "c1".into(),
        status,
        created_at: at,
        updated_at: at,
    };
    let mut commit = step_commit(&head(id), "x", &format!("{id}-k1"));
    commit.subsessions = vec![record(ChildStatus::Running, 2_000)];
    store.commit(id, 1, commit).await.map_err(e)?;
    let listed = store.subsessions(id).await.map_err(e)?;
    ensure!(
        listed == [record(ChildStatus::Running, 2_000)],
        "the reference is recorded: {listed:?}"
    );
    let l = loaded(store, id).await?;
    let mut commit = step_commit(&l.head, "y", &format!("{id}-k2"));
    commit.subsessions = vec![record(ChildStatus::TimedOut, 3_000)];
    store.commit(id, 2, commit).await.map_err(e)?;
    let listed = store.subsessions(id).await.map_err(e)?;
    ensure!(
        listed.len() == 1,
        "an update replaces the reference: {listed:?}"
    );
    let r = &listed[0];
    ensure!(
        r.status == ChildStatus::TimedOut && r.created_at == 2_000 && r.updated_at == 3_000,
        "status and update time change, creation time stays: {r:?}"
    );
    Ok(())
}

/// The records of a session that is gone: none, or `NotFound`.
fn gone<T>(read: Result<Vec<T>, StoreError>) -> Result<Vec<T>, String> {
    match read {
        Err(StoreError::NotFound(_)) => Ok(Vec::new()),
        other => other.map_err(e),
    }
}

async fn a_deleted_session_is_gone_and_others_stay<S: Store>(
    store: &S,
    id: &str,
) -> Result<(), String> {
    let other = format!("{id}-other");
    store.create(new_session(id)).await.map_err(e)?;
    store.create(new_session(&other)).await.map_err(e)?;
    let mut commit = step_commit(&head(id), "x", &format!("{id}-k1"));
    commit.subsessions = vec![super::SubSession {
        child_id: format!("{id}.sub-1"),
        agent: "researcher".into(),
        tool_call_id: "c1".into(),
        status: ChildStatus::Running,
        created_at: 2_000,
        updated_at: 2_000,
    }];
    store.commit(id, 1, commit).await.map_err(e)?;
    store.delete(id).await.map_err(e)?;
    ensure!(
        store.load(id).await.map_err(e)?.is_none(),
        "a deleted session does not load"
    );
    let (messages, runs) = (
        gone(store.messages(id, 0, 10).await)?,
        gone(store.runs(id).await)?,
    );
    let (checkpoints, children) = (
        gone(store.checkpoints(id).await)?,
        gone(store.subsessions(id).await)?,
    );
    ensure!(
        messages.is_empty() && runs.is_empty() && checkpoints.is_empty() && children.is_empty(),
        "nothing of it is left: {messages:?} {runs:?} {checkpoints:?} {children:?}"
    );
    store.delete(id).await.map_err(e)?;
    ensure!(
        loaded(store, &other).await?.head.version == 1,
        "another session is untouched"
    );
    store.create(new_session(id)).await.map_err(e)?;
    ensure!(
        loaded(store, id).await?.head.version == 1,
        "the id can be used again"
    );
    Ok(())
}

/// Runs every check against `store`, using session ids that start with `prefix` (so
/// that the suite can share a database with other data).
pub async fn run<S: Store>(store: &S, prefix: &str) -> Vec<CheckResult> {
    let id = |n: &str| format!("{prefix}-{n}");
    vec![
        CheckResult {
            name: "create_then_load_round_trips",
            outcome: create_then_load_round_trips(store, &id("create")).await,
        },
        CheckResult {
            name: "concurrent_creators_exactly_one_wins",
            outcome: concurrent_creators_exactly_one_wins(store, &id("race")).await,
        },
        CheckResult {
            name: "commit_applies_everything_and_bumps_the_version",
            outcome: commit_applies_everything_and_bumps_the_version(store, &id("commit")).await,
        },
        CheckResult {
            name: "a_stale_commit_is_rejected_and_changes_nothing",
            outcome: a_stale_commit_is_rejected_and_changes_nothing(store, &id("stale")).await,
        },
        CheckResult {
            name: "a_commit_whose_patch_fails_changes_nothing",
            outcome: a_commit_whose_patch_fails_changes_nothing(store, &id("badpatch")).await,
        },
        CheckResult {
            name: "messages_paginate",
            outcome: messages_paginate(store, &id("pages")).await,
        },
        CheckResult {
            name: "pending_calls_round_trip",
            outcome: pending_calls_round_trip(store, &id("pending")).await,
        },
        CheckResult {
            name: "an_interrupt_is_durable_until_a_commit_clears_it",
            outcome: an_interrupt_is_durable_until_a_commit_clears_it(store, &id("interrupt"))
                .await,
        },
        CheckResult {
            name: "a_checkpoint_restores_state_and_transcript",
            outcome: a_checkpoint_restores_state_and_transcript(store, &id("restore")).await,
        },
        CheckResult {
            name: "unknown_sessions_are_not_found",
            outcome: unknown_sessions_are_not_found(store, &id("unknown")).await,
        },
        CheckResult {
            name: "subsessions_are_recorded_and_updated",
            outcome: subsessions_are_recorded_and_updated(store, &id("children")).await,
        },
        CheckResult {
            name: "a_deleted_session_is_gone_and_others_stay",
            outcome: a_deleted_session_is_gone_and_others_stay(store, &id("delete")).await,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::run;
    use crate::store::MemoryStore;

    #[test]
    fn the_memory_store_passes_the_conformance_suite() {
        let store = MemoryStore::new();
        let results = futures::executor::block_on(run(&store, "t"));
        let failures: Vec<_> = results.iter().filter(|r| r.outcome.is_err()).collect();
        assert!(failures.is_empty(), "{failures:#?}");
        assert_eq!(results.len(), 12);
    }

    #[test]
    fn the_planned_d1_rows_pass_the_conformance_suite() {
        let store = crate::store::rows::PlannedStore::new();
        let results = futures::executor::block_on(run(&store, "t"));
        let failures: Vec<_> = results.iter().filter(|r| r.outcome.is_err()).collect();
        assert!(failures.is_empty(), "{failures:#?}");
        assert_eq!(results.len(), 12);
    }
}
