//! Live state: a tool's writes stream as `state_patch` chunks marked with its call the
//! moment it makes them, before its `tool_end` and its step's `step_committed`; the
//! commit streams only what turns the shown state into the committed one (nothing when
//! the writes committed as shown); a step that never commits (a crash here; an abort in
//! `recovery.rs`) has its live patches disowned by `stream_resync`. Every test ends with
//! the invariant: the patches no resync disowned replay to the stored state.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

mod support;

use helix_edge_core::chunk::ChunkBody;
use helix_edge_core::runner::Progress;
use helix_edge_core::state::{PatchOp, apply_all};
use helix_edge_core::store::SessionStatus;
use serde_json::{Value, json};
use support::*;

fn initial() -> Value {
    json!({"notes": []})
}

/// A short name per chunk, with the call for patches (`live:<id>` or `commit`).
fn outline(w: &World) -> Vec<String> {
    w.chunks()
        .into_iter()
        .filter_map(|c| match c {
            ChunkBody::ToolStart { tool_name, .. } => Some(format!("start:{tool_name}")),
            ChunkBody::ToolEnd { tool_name, .. } => Some(format!("end:{tool_name}")),
            ChunkBody::StatePatch { tool_call_id, .. } => Some(match tool_call_id {
                Some(id) => format!("live:{id}"),
                None => "commit".into(),
            }),
            ChunkBody::StepCommitted { .. } => Some("committed".into()),
            ChunkBody::StreamResync { .. } => Some("resync".into()),
            _ => None,
        })
        .collect()
}

/// The state a client has after each `step_committed`, applying every patch as it
/// comes (a stream without resyncs).
fn states_at_commits(w: &World) -> Vec<Value> {
    let mut state = initial();
    let mut out = Vec::new();
    for c in w.chunks() {
        match c {
            ChunkBody::StatePatch { patches, .. } => apply_all(&mut state, &patches).unwrap(),
            ChunkBody::StepCommitted { .. } => out.push(state.clone()),
            _ => {}
        }
    }
    out
}

#[test]
fn a_tools_write_streams_as_it_makes_it_marked_with_its_call() {
    let w = World::new();
    let r = w.runner("p1");
    let call = w.model.call("add_note", json!({"text": "a"}));
    w.model.calls(vec![call.clone()]).text("done");
    w.create(&r, "tester", "x");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    let live = format!("live:{}", call.id);
    assert_eq!(
        outline(&w),
        [
            "start:add_note",
            &live,
            "end:add_note",
            "committed",
            "committed"
        ],
        "the write before the call's end and the commit; nothing more at the commit"
    );
    let patch = w.chunks().into_iter().find_map(|c| match c {
        ChunkBody::StatePatch { patches, .. } => Some(patches),
        _ => None,
    });
    assert_eq!(
        patch.unwrap(),
        [PatchOp::Add {
            path: "/notes/-".into(),
            value: json!({"text": "a"}),
        }]
    );
    assert_eq!(w.session().state, json!({"notes": [{"text": "a"}]}));
    assert_consistent(&w, &initial());
}

#[test]
fn writes_committed_otherwise_than_shown_are_corrected_by_the_commit() {
    let w = World::new();
    let r = w.runner("p1");
    // The first call writes last: shown b, a; committed in call order, a, b.
    let (late, early) = (
        w.model.call("late_note", json!({"text": "a"})),
        w.model.call("add_note", json!({"text": "b"})),
    );
    w.model
        .calls(vec![late.clone(), early.clone()])
        .text("done");
    w.create(&r, "tester", "x");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    let outline = outline(&w);
    let live = |id: &str| {
        outline
            .iter()
            .position(|o| *o == format!("live:{id}"))
            .unwrap()
    };
    assert!(live(&early.id) < live(&late.id), "{outline:?}");
    let commit = outline.iter().position(|o| o == "commit").unwrap();
    assert!(
        live(&late.id) < commit && commit < outline.iter().position(|o| o == "committed").unwrap()
    );
    let committed = json!({"notes": [{"text": "a"}, {"text": "b"}]});
    assert_eq!(w.session().state, committed);
    assert_eq!(
        states_at_commits(&w)[0],
        committed,
        "the client's copy after the commit"
    );
    assert_consistent(&w, &initial());
}

#[test]
fn a_failed_calls_shown_writes_are_taken_back_at_commit() {
    let w = World::new();
    let r = w.runner("p1");
    let (kept, failed) = (
        w.model.call("add_note", json!({"text": "kept"})),
        w.model.call("note_then_fail", json!({"text": "dropped"})),
    );
    w.model.calls(vec![kept, failed.clone()]).text("done");
    w.create(&r, "tester", "x");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    assert!(
        outline(&w).contains(&format!("live:{}", failed.id)),
        "shown as it wrote"
    );
    assert!(
        outline(&w).contains(&"commit".to_string()),
        "taken back by the commit"
    );
    let committed = json!({"notes": [{"text": "kept"}]});
    assert_eq!(w.session().state, committed);
    assert_eq!(states_at_commits(&w)[0], committed);
    assert_consistent(&w, &initial());
}

#[test]
fn a_crash_mid_tool_disowns_the_steps_live_patches() {
    let w = World::new();
    let r1 = w.runner("p1");
    let calls = vec![w.model.call("flaky_note", json!({"text": "b"}))];
    w.model.calls(calls);
    w.create(&r1, "tester", "x");
    drive_and_crash(&r1);
    let torn_at = w.journal.events().len() as u64; // the live patch is the newest event
    assert!(
        outline(&w).iter().any(|o| o.starts_with("live:")),
        "{:?}",
        outline(&w)
    );
    assert_eq!(w.session().state, initial(), "nothing committed");

    w.model
        .calls(vec![w.model.call("flaky_note", json!({"text": "b"}))])
        .text("done");
    assert_eq!(
        drive(&w.runner("p2")),
        Progress::Idle(SessionStatus::Completed)
    );
    let resync = w.chunks().into_iter().find_map(|c| match c {
        ChunkBody::StreamResync { from_sequence, .. } => Some(from_sequence),
        _ => None,
    });
    assert!(
        resync.unwrap() <= torn_at,
        "the resync disowns the live patch"
    );
    assert_eq!(w.session().state, json!({"notes": [{"text": "b"}]}));
    assert_consistent(&w, &initial());
}
