//! The checks, one function each: `Ok` when the backend keeps the contract.

use super::fixtures::*;
use crate::message::Message;
use crate::state::PatchOp;
use crate::store::{ChildStatus, Commit, PendingCall, PendingKind, StateChange, Store, StoreError};
use serde_json::json;

pub(super) async fn create_then_load_round_trips<S: Store>(
    store: &S,
    id: &str,
) -> Result<(), String> {
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

pub(super) async fn concurrent_creators_exactly_one_wins<S: Store>(
    store: &S,
    id: &str,
) -> Result<(), String> {
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

pub(super) async fn commit_applies_everything_and_bumps_the_version<S: Store>(
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

pub(super) async fn a_stale_commit_is_rejected_and_changes_nothing<S: Store>(
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

pub(super) async fn a_commit_whose_patch_fails_changes_nothing<S: Store>(
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

pub(super) async fn messages_paginate<S: Store>(store: &S, id: &str) -> Result<(), String> {
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

pub(super) async fn pending_calls_round_trip<S: Store>(store: &S, id: &str) -> Result<(), String> {
    store.create(new_session(id)).await.map_err(e)?;
    let mut h = loaded(store, id).await?.head;
    h.pending = vec![PendingCall {
        tool_call_id: "c1".into(),
        tool_name: "delete_file".into(),
        arguments: json!({"path": "/tmp/x"}),
        kind: PendingKind::Approval,
        deadline: Some(42),
        since: 7,
        output_path: Some("/check".into()),
        approvers: None,
        request: None,
    }];
    h.pending.push(PendingCall {
        tool_call_id: "c2".into(),
        kind: PendingKind::Elicitation,
        deadline: None,
        output_path: None,
        request: Some(
            json!({"server": "files", "message": "Which?", "requestedSchema": {"type": "object"}}),
        ),
        ..h.pending[0].clone()
    });
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

pub(super) async fn an_interrupt_is_durable_until_a_commit_clears_it<S: Store>(
    store: &S,
    id: &str,
) -> Result<(), String> {
    store.create(new_session(id)).await.map_err(e)?;
    store
        .request_interrupt(
            id,
            crate::store::InterruptRequest::because(Some("stop".into())),
        )
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

pub(super) async fn a_checkpoint_restores_state_and_transcript<S: Store>(
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
    let kept: Vec<String> = store
        .checkpoints(id)
        .await
        .map_err(e)?
        .into_iter()
        .map(|c| c.id)
        .collect();
    ensure!(
        kept.contains(&k1) && !kept.contains(&format!("{id}-k2")),
        "the rollback drops the checkpoints past what it keeps (their messages are gone): {kept:?}"
    );
    ensure!(
        store
            .checkpoint_state(id, &format!("{id}-k2"))
            .await
            .map_err(e)?
            .is_none(),
        "an abandoned checkpoint is not found"
    );
    Ok(())
}

pub(super) async fn unknown_sessions_are_not_found<S: Store>(
    store: &S,
    id: &str,
) -> Result<(), String> {
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
            store
                .request_interrupt(id, crate::store::InterruptRequest::default())
                .await,
            Err(StoreError::NotFound(_))
        ),
        "interrupt: NotFound"
    );
    Ok(())
}

pub(super) async fn subsessions_are_recorded_and_updated<S: Store>(
    store: &S,
    id: &str,
) -> Result<(), String> {
    let child = format!("{id}.sub-1");
    store.create(new_session(id)).await.map_err(e)?;
    ensure!(
        store.subsessions(id).await.map_err(e)?.is_empty(),
        "a new session has no children"
    );
    let record = |status: ChildStatus, at: u64| crate::store::SubSession {
        child_id: child.clone(),
        agent: "researcher".into(),
        tool_call_id: "c1".into(),
        status,
        created_at: at,
        updated_at: at,
        name: None,
        mode: None,
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
    // A persistent child: its name and mode are kept, each turn's call recorded.
    let persistent = |call: &str, status, at| crate::store::SubSession {
        child_id: format!("{id}-agent-scout"),
        tool_call_id: call.into(),
        name: Some("scout".into()),
        mode: Some(crate::store::ChildMode::NonBlocking),
        ..record(status, at)
    };
    let l = loaded(store, id).await?;
    let mut commit = step_commit(&l.head, "z", &format!("{id}-k3"));
    commit.subsessions = vec![persistent("c2", ChildStatus::Running, 4_000)];
    store.commit(id, 3, commit).await.map_err(e)?;
    let l = loaded(store, id).await?;
    let mut commit = step_commit(&l.head, "w", &format!("{id}-k4"));
    commit.subsessions = vec![persistent("c3", ChildStatus::Completed, 5_000)];
    store.commit(id, 4, commit).await.map_err(e)?;
    let listed = store.subsessions(id).await.map_err(e)?;
    let expected = crate::store::SubSession {
        created_at: 4_000,
        ..persistent("c3", ChildStatus::Completed, 5_000)
    };
    ensure!(
        listed.len() == 2 && listed[1] == expected,
        "a persistent child's record keeps its name and mode and takes each turn's call: {listed:?}"
    );
    Ok(())
}

pub(super) async fn a_deleted_session_is_gone_and_others_stay<S: Store>(
    store: &S,
    id: &str,
) -> Result<(), String> {
    let other = format!("{id}-other");
    store.create(new_session(id)).await.map_err(e)?;
    store.create(new_session(&other)).await.map_err(e)?;
    let mut commit = step_commit(&head(id), "x", &format!("{id}-k1"));
    commit.subsessions = vec![crate::store::SubSession {
        child_id: format!("{id}.sub-1"),
        agent: "researcher".into(),
        tool_call_id: "c1".into(),
        status: ChildStatus::Running,
        created_at: 2_000,
        updated_at: 2_000,
        name: None,
        mode: None,
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
