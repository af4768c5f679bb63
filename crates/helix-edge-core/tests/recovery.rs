//! Crashes and restarts of the core: a process that dies anywhere in a step, a fresh
//! runner that shares nothing but the store, bounded crash loops, retries.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

mod support;

use helix_edge_core::chunk::{ChunkBody, StreamEvent};
use helix_edge_core::error::ProviderError;
use helix_edge_core::message::Message;
use helix_edge_core::runner::{Progress, RunError, Runner, Submission};
use helix_edge_core::store::{
    CheckpointRecord, Commit, Loaded, MemoryStore, NewSession, RunRecord, SessionStatus, Store,
    StoreError,
};
use serde_json::{Value, json};
use std::cell::Cell;
use std::rc::Rc;
use support::*;

fn initial() -> Value {
    json!({"notes": []})
}

fn resyncs(w: &World) -> Vec<u64> {
    w.chunks()
        .into_iter()
        .filter_map(|c| match c {
            ChunkBody::StreamResync { from_sequence, .. } => Some(from_sequence),
            _ => None,
        })
        .collect()
}

/// Every text delta streamed so far, joined.
fn streamed_text(w: &World) -> String {
    w.chunks()
        .into_iter()
        .filter_map(|c| match c {
            ChunkBody::TextDelta { delta } => Some(delta),
            _ => None,
        })
        .collect()
}

/// Sequence number (1-based) of the first event matching `pred`.
fn seq_of(w: &World, pred: impl Fn(&ChunkBody) -> bool) -> u64 {
    let events = w.journal.events();
    let i = events
        .iter()
        .position(|e| matches!(e, StreamEvent::Chunk(c) if pred(&c.body)))
        .unwrap();
    i as u64 + 1
}

#[test]
fn a_crash_while_the_model_streams_redoes_only_the_torn_step() {
    let w = World::new();
    let r1 = w.runner("p1");
    w.model
        .calls(vec![w.model.call("add_note", json!({"text": "kept"}))])
        .hang("half an ans");
    w.create(&r1, "tester", "x");
    drive_and_crash(&r1);
    assert_eq!(
        w.session().head.step_count,
        1,
        "step 1 committed before the crash"
    );

    w.model.text("the whole answer");
    let r2 = w.runner("p2");
    assert_eq!(drive(&r2), Progress::Idle(SessionStatus::Completed));
    assert_eq!(
        w.model.seen().len(),
        3,
        "step 1's model call is not repeated"
    );
    let torn = seq_of(
        &w,
        |c| matches!(c, ChunkBody::TextDelta { delta } if delta.starts_with("half")),
    );
    assert_eq!(
        resyncs(&w),
        [torn],
        "the stream is told to drop the torn step's chunks"
    );
    assert_eq!(w.session().state, json!({"notes": [{"text": "kept"}]}));
    assert_consistent(&w, &initial());
}

#[test]
fn a_crash_during_parallel_tools_commits_nothing_of_that_step() {
    let w = World::new();
    let r1 = w.runner("p1");
    let calls = vec![
        w.model.call("add_note", json!({"text": "a"})),
        w.model.call("flaky_note", json!({"text": "b"})),
    ];
    w.model.calls(calls.clone());
    w.create(&r1, "tester", "x");
    drive_and_crash(&r1);
    assert_eq!(
        w.session().state,
        initial(),
        "no write of the torn step is committed"
    );
    assert_eq!(w.session().head.version, 1);

    let again = vec![
        w.model.call("add_note", json!({"text": "a"})),
        w.model.call("flaky_note", json!({"text": "b"})),
    ];
    w.model.calls(again).text("done");
    let r2 = w.runner("p2");
    assert_eq!(drive(&r2), Progress::Idle(SessionStatus::Completed));
    assert_eq!(
        w.session().state,
        json!({"notes": [{"text": "a"}, {"text": "b"}]})
    );
    assert_eq!(resyncs(&w).len(), 1);
    assert_consistent(&w, &initial());
}

#[test]
fn an_approved_call_claimed_by_a_dead_process_is_never_run_again() {
    let w = World::new();
    let r1 = w.runner("p1");
    let call = w.model.call("hang_after_note", json!({"text": "once"}));
    w.model.calls(vec![call.clone()]).text("moving on");
    w.create(&r1, "tester", "x");
    drive(&r1);
    block(r1.submit(
        SESSION,
        Submission::Approval {
            tool_call_id: call.id.clone(),
            approved: true,
            reason: None,
        },
    ))
    .unwrap();
    drive_and_crash(&r1);
    assert_eq!(w.exec.count("hang_after_note"), 1);
    assert_eq!(w.journal.claimed_by(&call.id).as_deref(), Some("p1"));

    let r2 = w.runner("p2");
    assert_eq!(drive(&r2), Progress::Idle(SessionStatus::Completed));
    assert_eq!(
        w.exec.count("hang_after_note"),
        1,
        "at most once per approval"
    );
    let codes: Vec<String> = w
        .messages()
        .iter()
        .filter_map(|m| match m {
            Message::Tool { content, .. } => content["code"].as_str().map(String::from),
            _ => None,
        })
        .collect();
    assert_eq!(codes, ["tool_interrupted"]);
    assert_eq!(
        w.session().state,
        initial(),
        "the dead process's write never landed"
    );
    assert_consistent(&w, &initial());
}

#[test]
fn a_crash_right_after_a_commit_loses_no_stream_event_and_invents_none() {
    let w = World::new();
    let (r1, dying) = watching_runner(&w, 0);
    dying.die_at_version.set(2);
    // Step 2's model call goes out with step 1's commit, so the dying process makes it
    // too (its answer is lost with the process): two answers for step 2.
    w.model
        .calls(vec![w.model.call("add_note", json!({"text": "durable"}))])
        .text("lost")
        .text("ok");
    w.create(&w.runner("p0"), "tester", "x");
    let out = run_until_stalled(r1.drive(SESSION, 100));
    assert!(out.is_none(), "died after the commit");
    assert_eq!(w.session().head.version, 2, "the commit landed");
    assert!(
        !w.chunks()
            .iter()
            .any(|c| matches!(c, ChunkBody::StepCommitted { .. })),
        "its batch was held back"
    );

    let r2 = w.runner("p2");
    assert_eq!(drive(&r2), Progress::Idle(SessionStatus::Completed));
    assert!(
        resyncs(&w).is_empty(),
        "nothing was torn: the staged events were released"
    );
    let patches: Vec<_> = w
        .chunks()
        .into_iter()
        .filter_map(|c| match c {
            ChunkBody::StatePatch { tool_call_id, .. } => Some(tool_call_id),
            _ => None,
        })
        .collect();
    assert!(
        matches!(&patches[..], [Some(_)]),
        "one patch, the tool's write streamed live (it committed as shown): {patches:?}"
    );
    let seen = w.model.seen();
    let step1 = seen.iter().filter(|s| s.messages.len() == 1).count();
    assert_eq!(step1, 1, "the committed step was not redone");
    assert_eq!(seen.len(), 3, "only the uncommitted step 2 was");
    assert_eq!(
        streamed_text(&w),
        "ok",
        "the dead process's uncommitted answer never reached the stream"
    );
    assert_consistent(&w, &initial());
}

#[test]
fn a_step_that_keeps_crashing_fails_the_run_after_bounded_attempts() {
    let w = World::new();
    w.model.hang("a").hang("b").hang("c").text("never reached");
    w.create(&w.runner("p0"), "tester", "x");
    for i in 1..=3 {
        drive_and_crash(&w.runner(&format!("p{i}")));
    }
    assert_eq!(
        drive(&w.runner("p4")),
        Progress::Idle(SessionStatus::Failed)
    );
    let s = w.session();
    assert_eq!(
        s.head.error.as_ref().unwrap().code,
        "framework_recovery_exhausted"
    );
    assert_eq!(w.model.seen().len(), 3, "no model call after the limit");
    assert_eq!(resyncs(&w).len(), 3);
    assert!(matches!(
        w.journal.events().last(),
        Some(StreamEvent::Fail { .. })
    ));
}

#[test]
fn a_brand_new_runner_that_shares_only_the_store_resumes_a_suspension() {
    let w = World::new();
    let r1 = w.runner("p1");
    let call = w.model.call("delete_file", json!({"path": "/tmp/x"}));
    w.model.calls(vec![call.clone()]).text("Deleted.");
    w.create(&r1, "tester", "delete /tmp/x");
    assert!(matches!(drive(&r1), Progress::Suspended { .. }));
    drop(r1);

    let (r2, journal2) = w.stranger("p2");
    block(r2.submit(
        SESSION,
        Submission::Approval {
            tool_call_id: call.id.clone(),
            approved: true,
            reason: None,
        },
    ))
    .unwrap();
    assert_eq!(
        block(r2.drive(SESSION, 100)).unwrap(),
        Progress::Idle(SessionStatus::Completed)
    );
    assert_eq!(w.exec.count("delete_file"), 1);
    assert!(matches!(
        journal2.events().last(),
        Some(StreamEvent::End { .. })
    ));
    assert_eq!(w.messages().len(), 4, "user, call, result, answer");
}

#[test]
fn retry_restores_a_checkpoint_and_runs_again() {
    let w = World::new();
    let r = w.runner("p1");
    w.model.fail(ProviderError::Unavailable { status: 503 });
    w.create(&r, "tester", "hello");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Failed));
    let s = w.session();
    assert_eq!(s.head.error.as_ref().unwrap().code, "provider_unavailable");
    assert!(s.head.error.as_ref().unwrap().retryable);

    w.model
        .calls(vec![w.model.call("add_note", json!({"text": "x"}))])
        .text("hi again");
    let run = block(r.retry(SESSION, None, None)).unwrap();
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    let s = w.session();
    assert_eq!(
        (s.head.run.run_id.as_str(), s.head.run.turn),
        (run.as_str(), 2)
    );
    assert_eq!(w.messages()[0], Message::user("hello"));
    assert_eq!(w.messages().len(), 4);

    // Restore the checkpoint after the first step: the note is undone on the stream too.
    let checkpoints = block(w.store.checkpoints(SESSION)).unwrap();
    let first_step = checkpoints
        .iter()
        .find(|c| c.step_count == 1 && c.run_id == run)
        .unwrap();
    assert_eq!(
        block(r.retry(SESSION, Some("nope"), None)),
        Err(RunError::CheckpointNotFound("nope".into()))
    );
    w.model.text("third time");
    block(r.retry(SESSION, Some(&first_step.id), None)).unwrap();
    drive(&r);
    assert_eq!(w.messages().len(), first_step.message_count as usize + 1);
    assert_consistent(&w, &initial());
}

#[test]
fn a_suspended_checkpoint_cannot_be_restored() {
    let w = World::new();
    let r = w.runner("p1");
    w.model
        .calls(vec![w.model.call("delete_file", json!({"path": "/x"}))]);
    w.create(&r, "tester", "x");
    drive(&r);
    block(r.abort(SESSION, None)).unwrap();
    let suspended = block(w.store.checkpoints(SESSION))
        .unwrap()
        .into_iter()
        .find(|c| !c.restorable())
        .unwrap();
    assert_eq!(
        block(r.retry(SESSION, Some(&suspended.id), None)),
        Err(RunError::Aborted)
    );
}

#[test]
fn an_abort_during_a_step_signals_its_tools_and_the_step_never_commits() {
    let w = World::new();
    let r = w.runner("p1");
    let calls = vec![
        w.model.call("add_note", json!({"text": "lost"})),
        w.model.call("wait_for_abort", json!({})),
    ];
    w.model.calls(calls).text("never");
    w.create(&r, "tester", "x");
    let tool_started = || {
        w.chunks().iter().any(|c| matches!(c, ChunkBody::ToolStart { tool_name, .. } if tool_name == "wait_for_abort"))
    };
    let abort_once_the_tool_runs = async {
        while !tool_started() {
            yield_now().await;
        }
        r.abort(SESSION, None).await
    };
    let (progress, aborted) =
        block(async { futures::join!(r.drive(SESSION, 100), abort_once_the_tool_runs) });
    aborted.unwrap();
    assert_eq!(progress.unwrap(), Progress::Idle(SessionStatus::Aborted));
    let s = w.session();
    assert_eq!(s.head.status, SessionStatus::Aborted);
    assert_eq!(s.state, initial(), "the aborted step's writes never landed");
    assert_eq!(s.head.step_count, 0);
    assert_eq!(w.model.remaining(), 1, "no model call after the abort");
    // `add_note` ran before `wait_for_abort` started: its write was streamed live, and
    // the abort's batch disowns it.
    let live_at = (1u64..)
        .zip(w.journal.events())
        .find_map(|(seq, e)| match e {
            StreamEvent::Chunk(c) if matches!(c.body, ChunkBody::StatePatch { .. }) => Some(seq),
            _ => None,
        })
        .expect("the write was streamed live");
    assert!(
        matches!(resyncs(&w)[..], [from] if from <= live_at),
        "the abort's resync disowns the live patch: {:?}",
        resyncs(&w)
    );
    assert_consistent(&w, &initial());
}

#[test]
fn a_failed_create_or_commit_leaves_nothing_staged_behind() {
    let w = World::new();
    let r = w.runner("p1");
    w.model.text("hello");
    w.create(&r, "tester", "first");
    let duplicate = block(r.create(create_request("tester", "second")));
    assert!(duplicate.is_err());
    // A fresh process recovers the journal against the durable version (>= 1).
    assert_eq!(
        drive(&w.runner("p2")),
        Progress::Idle(SessionStatus::Completed)
    );
    let starts = w
        .chunks()
        .iter()
        .filter(|c| matches!(c, ChunkBody::RunStarted { .. }))
        .count();
    assert_eq!(
        starts, 1,
        "the losing creator's run_started never reaches the winner's stream"
    );
}

#[test]
fn a_rival_write_in_the_same_process_never_steals_another_commits_events() {
    let w = World::new();
    let r = w.runner("p1");
    w.model
        .calls(vec![w.model.call("add_note", json!({"text": "kept"}))])
        .text("done");
    w.create(&r, "tester", "x");
    let duplicate = r.create(create_request("tester", "again"));
    let (progress, dup) = block(async { futures::join!(r.drive(SESSION, 100), duplicate) });
    assert!(dup.is_err());
    assert_eq!(progress.unwrap(), Progress::Idle(SessionStatus::Completed));
    assert_eq!(
        patch_paths(&w),
        ["/notes/-"],
        "the drive's state patch was released"
    );
    assert!(matches!(
        w.journal.events().last(),
        Some(StreamEvent::End { .. })
    ));
    let starts = w
        .chunks()
        .iter()
        .filter(|c| matches!(c, ChunkBody::RunStarted { .. }))
        .count();
    assert_eq!(starts, 1);
    assert_consistent(&w, &initial());
}

/// A store that records how many model calls were made by the time each commit landed,
/// can refuse one commit (by new version) after a round trip, as D1 might, and can die
/// right after a chosen commit lands (before the runner hears back), to test the window
/// between the commit and the stream.
struct Watching {
    inner: Rc<MemoryStore>,
    model: Rc<helix_edge_core::scripted::ScriptedModel>,
    calls_when_landed: std::cell::RefCell<Vec<(u64, usize)>>,
    refuse_version: Cell<u64>,
    die_at_version: Cell<u64>,
}

impl Store for Watching {
    async fn create(&self, s: NewSession) -> Result<(), StoreError> {
        self.inner.create(s).await
    }
    async fn load(&self, id: &str) -> Result<Option<Loaded>, StoreError> {
        self.inner.load(id).await
    }
    async fn messages(&self, id: &str, o: u64, l: u64) -> Result<Vec<Message>, StoreError> {
        self.inner.messages(id, o, l).await
    }
    async fn commit(&self, id: &str, v: u64, c: Commit) -> Result<u64, StoreError> {
        if v + 1 == self.refuse_version.replace(0) {
            yield_now().await;
            return Err(StoreError::Backend(
                "injected: the write did not go through".into(),
            ));
        }
        let out = self.inner.commit(id, v, c).await?;
        let calls = self.model.seen().len();
        self.calls_when_landed.borrow_mut().push((out, calls));
        if out == self.die_at_version.get() {
            futures::future::pending::<()>().await;
        }
        Ok(out)
    }
    async fn request_interrupt(
        &self,
        id: &str,
        r: helix_edge_core::store::InterruptRequest,
    ) -> Result<(), StoreError> {
        self.inner.request_interrupt(id, r).await
    }
    async fn runs(&self, id: &str) -> Result<Vec<RunRecord>, StoreError> {
        self.inner.runs(id).await
    }
    async fn checkpoints(&self, id: &str) -> Result<Vec<CheckpointRecord>, StoreError> {
        self.inner.checkpoints(id).await
    }
    async fn checkpoint_state(
        &self,
        id: &str,
        c: &str,
    ) -> Result<Option<(CheckpointRecord, Value)>, StoreError> {
        self.inner.checkpoint_state(id, c).await
    }
    async fn subsessions(
        &self,
        id: &str,
    ) -> Result<Vec<helix_edge_core::store::SubSession>, StoreError> {
        self.inner.subsessions(id).await
    }
    async fn delete(&self, id: &str) -> Result<(), StoreError> {
        self.inner.delete(id).await
    }
}

fn watching_runner(w: &World, refuse_version: u64) -> (Runner<Rc<Watching>>, Rc<Watching>) {
    use helix_edge_core::model::OneModel;
    use helix_edge_core::runner::RunnerConfig;
    let store = Watching {
        inner: w.store.clone(),
        model: w.model.clone(),
        calls_when_landed: Default::default(),
        refuse_version: Cell::new(refuse_version),
        die_at_version: Cell::new(0),
    };
    let store = Rc::new(store);
    let runner = Runner::new(
        store.clone(),
        w.agents.clone(),
        Rc::new(OneModel(w.model.clone())),
        w.journal.clone(),
        w.host.clone(),
        RunnerConfig::new("p1"),
    );
    (runner, store)
}

#[test]
fn a_step_commit_goes_out_with_the_next_model_call_and_the_stream_keeps_its_order() {
    let w = World::new();
    w.model
        .calls(vec![w.model.call("add_note", json!({"text": "a"}))])
        .text("done");
    w.create(&w.runner("p0"), "tester", "x");
    let (runner, store) = watching_runner(&w, 0);
    let progress = block(runner.drive(SESSION, 100)).unwrap();
    assert_eq!(progress, Progress::Idle(SessionStatus::Completed));
    assert_eq!(
        store.calls_when_landed.borrow().as_slice(),
        [(2, 2), (3, 2)],
        "step 2's model call was out before step 1's commit landed"
    );
    let committed = seq_of(&w, |c| matches!(c, ChunkBody::StepCommitted { .. }));
    let answer = seq_of(&w, |c| matches!(c, ChunkBody::TextDelta { .. }));
    assert!(
        committed < answer,
        "step 2's deltas follow step 1's batch ({committed} < {answer})"
    );
    assert_consistent(&w, &initial());
}

#[test]
fn a_commit_that_fails_drops_the_model_answer_that_went_out_with_it() {
    let w = World::new();
    w.model
        .calls(vec![w.model.call("add_note", json!({"text": "a"}))])
        .text("lost")
        .calls(vec![w.model.call("add_note", json!({"text": "a"}))])
        .text("kept");
    w.create(&w.runner("p0"), "tester", "x");
    let (runner, _) = watching_runner(&w, 2);
    let failed = block(runner.drive(SESSION, 100));
    assert!(
        matches!(failed, Err(RunError::Store(StoreError::Backend(_)))),
        "{failed:?}"
    );
    assert_eq!(
        w.model.seen().len(),
        2,
        "step 2's call went out with the commit"
    );
    assert_eq!(w.session().head.version, 1, "nothing landed");
    let shown = |text: &str| streamed_text(&w).contains(text);
    assert!(
        !shown("lost"),
        "an answer to a transcript that never landed"
    );

    // The same runner goes on from durable state: step 1 again, then step 2.
    let progress = block(runner.drive(SESSION, 100)).unwrap();
    assert_eq!(progress, Progress::Idle(SessionStatus::Completed));
    assert!(shown("kept") && !shown("lost"), "{:?}", w.chunks());
    assert_eq!(w.model.seen().len(), 4);
    assert_eq!(w.session().head.step_count, 2);
    assert_consistent(&w, &initial());
}

#[test]
fn a_delete_during_a_step_signals_its_tools_and_nothing_lands_after_it() {
    let w = World::new();
    let r = w.runner("p1");
    let calls = vec![
        w.model.call("add_note", json!({"text": "lost"})),
        w.model.call("wait_for_abort", json!({})),
    ];
    w.model.calls(calls).text("never");
    w.create(&r, "tester", "x");
    let tool_started = || {
        w.chunks().iter().any(|c| matches!(c, ChunkBody::ToolStart { tool_name, .. } if tool_name == "wait_for_abort"))
    };
    let delete_once_the_tool_runs = async {
        while !tool_started() {
            yield_now().await;
        }
        r.delete(SESSION, false).await
    };
    let (progress, deleted) =
        block(async { futures::join!(r.drive(SESSION, 100), delete_once_the_tool_runs) });
    deleted.unwrap();
    assert_eq!(
        progress.unwrap(),
        Progress::Idle(SessionStatus::Aborted),
        "the drive stops as for an abort"
    );
    assert!(
        block(w.store.load(SESSION)).unwrap().is_none(),
        "nothing was recreated"
    );
    assert_eq!(w.model.remaining(), 1, "no model call after the delete");
}
