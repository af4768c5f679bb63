//! Going back to a checkpoint: a retry with a replacement message (the user edits their
//! last message) and a fork into a new session that continues on its own, each announced
//! by `stream_resync` with its reason; the stream's patches still replay to the state.
//! Both take rich input: a message with its files and annotations, kept as given.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

mod support;

use helix_edge_core::attachment::Attachment;
use helix_edge_core::chunk::{ChunkBody, ResyncReason, StreamEvent};
use helix_edge_core::message::Message;
use helix_edge_core::runner::{Progress, RunError};
use helix_edge_core::store::{CheckpointStatus, SessionStatus, Store};
use serde_json::json;
use support::*;

/// Each `stream_resync` with the sequence it has in the stream.
fn resyncs(w: &World) -> Vec<(u64, ResyncReason, u64, u64)> {
    w.journal
        .events()
        .into_iter()
        .enumerate()
        .filter_map(|(i, e)| match e {
            StreamEvent::Chunk(c) => match c.body {
                ChunkBody::StreamResync {
                    reason,
                    from_sequence,
                    message_count,
                    ..
                } => Some((i as u64 + 1, reason, from_sequence, message_count)),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

fn texts(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .map(|m| match m {
            Message::User { content, .. } => format!("user: {content}"),
            Message::Assistant { content, .. } => format!("assistant: {content}"),
            Message::Tool { tool_name, .. } => format!("tool: {tool_name}"),
            Message::System { content, .. } => format!("system: {content}"),
        })
        .collect()
}

#[test]
fn a_retry_with_a_message_replaces_the_first_runs_input() {
    let w = World::new();
    let r = w.runner("p1");
    w.model
        .calls(vec![w.model.call("add_note", json!({"text": "n"}))])
        .text("first answer");
    w.create(&r, "tester", "original question");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));

    w.model.text("second answer");
    block(r.retry(SESSION, None, Some("edited question".into()))).unwrap();
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    assert_eq!(
        texts(&w.messages()),
        ["user: edited question", "assistant: second answer"]
    );
    assert_eq!(
        w.session().state,
        json!({"notes": []}),
        "the note is rolled back"
    );
    assert_eq!(
        texts(&w.model.seen().last().unwrap().messages),
        ["user: edited question"]
    );
    let [(seq, reason, from, count)] = resyncs(&w)[..] else {
        panic!("one resync: {:?}", resyncs(&w))
    };
    assert_eq!(reason, ResyncReason::Rollback);
    assert_eq!(from, seq, "a rollback discards nothing");
    assert_eq!(count, 0, "nothing of the checkpoint's transcript is kept");
    assert_consistent(&w, &json!({"notes": []}));
}

#[test]
fn a_retry_with_a_message_after_a_follow_up_replaces_only_the_follow_up() {
    let w = World::new();
    let r = w.runner("p1");
    w.model.text("a1");
    w.create(&r, "tester", "q1");
    drive(&r);
    w.model
        .calls(vec![w.model.call("add_note", json!({"text": "from q2"}))])
        .text("a2");
    block(r.send_message(SESSION, "q2".into())).unwrap();
    drive(&r);
    assert_eq!(w.session().state["notes"].as_array().unwrap().len(), 1);

    w.model.text("a2 again");
    block(r.retry(SESSION, None, Some("q2 edited".into()))).unwrap();
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    assert_eq!(
        texts(&w.messages()),
        [
            "user: q1",
            "assistant: a1",
            "user: q2 edited",
            "assistant: a2 again"
        ]
    );
    assert_eq!(w.session().state, json!({"notes": []}));
    assert_consistent(&w, &json!({"notes": []}));

    // Without a message, the latest checkpoint is where the run ended: nothing to
    // continue, so the retry is refused and nothing changes (no model is asked to
    // answer its own final answer).
    let before = (w.messages(), w.session().state);
    let ended = block(r.retry(SESSION, None, None)).unwrap_err();
    assert!(matches!(ended, RunError::RunEnded(_)), "{ended:?}");
    assert_eq!((w.messages(), w.session().state), before);
    // From a checkpoint inside a run (the first run's start), a retry without a message
    // reruns from there.
    let checkpoints = block(w.store.checkpoints(SESSION)).unwrap();
    let start = checkpoints
        .iter()
        .find(|c| c.status == CheckpointStatus::Active)
        .unwrap();
    w.model.text("a1 again");
    block(r.retry(SESSION, Some(&start.id), None)).unwrap();
    drive(&r);
    assert_eq!(texts(&w.messages()), ["user: q1", "assistant: a1 again"]);
    assert_consistent(&w, &json!({"notes": []}));
}

#[test]
fn a_fork_of_a_finished_session_is_an_idle_copy_until_a_message_comes() {
    let w = World::new();
    let r = w.runner("p1");
    w.model
        .calls(vec![
            w.model.call("add_note", json!({"text": "a"})),
            w.model.call("add_note", json!({"text": "b"})),
        ])
        .text("noted");
    w.create(&r, "tester", "note a and b");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    let asked = w.model.seen().len();

    let request = block(r.fork_request(SESSION, None, "copy".into(), None)).unwrap();
    assert!(request.idle, "the run ended at the latest checkpoint");
    let created = block(r.create(request)).unwrap();
    assert_eq!(created.status, SessionStatus::Completed);
    assert_eq!(
        block(r.drive("copy", 10)).unwrap(),
        Progress::Idle(SessionStatus::Completed)
    );
    assert_eq!(w.model.seen().len(), asked, "no model call for the copy");
    let copy = block(w.store.load("copy")).unwrap().unwrap();
    assert_eq!(copy.head.status, SessionStatus::Completed);
    assert_eq!(copy.state, json!({"notes": [{"text": "a"}, {"text": "b"}]}));
    let copied = block(w.store.messages("copy", 0, 100)).unwrap();
    assert_eq!(
        copied,
        w.messages(),
        "the transcript as it was, nothing added"
    );

    // A message runs it, as a follow-up runs a finished session.
    w.model.text("and more");
    block(r.send_message("copy", "anything else?".into())).unwrap();
    assert_eq!(
        block(r.drive("copy", 10)).unwrap(),
        Progress::Idle(SessionStatus::Completed)
    );
    let after = block(w.store.messages("copy", 0, 100)).unwrap();
    assert_eq!(texts(&after).last().unwrap(), "assistant: and more");
    let last_request = w.model.seen().last().unwrap().messages.clone();
    assert!(matches!(last_request.last(), Some(Message::User { .. })));
}

#[test]
fn no_model_is_asked_to_answer_a_transcript_that_ends_with_its_own_answer() {
    let request_messages = [Message::user("q"), Message::assistant_text("a")];
    let settings = helix_edge_core::model::ModelSettings::default();
    let request = helix_edge_core::model::ModelRequest {
        system: String::new(),
        messages: &request_messages,
        tools: Vec::new(),
        settings: &settings,
        options: None,
        session_id: SESSION,
        abort: helix_edge_core::abort::AbortSignal::new(),
    };
    assert_eq!(
        request.check(),
        Err(helix_edge_core::error::ProviderError::NothingToAnswer)
    );
    let ok = helix_edge_core::model::ModelRequest {
        messages: &request_messages[..1],
        ..request
    };
    assert_eq!(ok.check(), Ok(()));
}

#[test]
fn a_fork_copies_a_checkpoint_into_a_session_that_continues_on_its_own() {
    let w = World::new();
    let r = w.runner("p1");
    w.model
        .calls(vec![w.model.call("add_note", json!({"text": "kept"}))])
        .calls(vec![
            w.model.call("add_note", json!({"text": "source only"})),
        ])
        .text("source done");
    w.create(&r, "tester", "go");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    let checkpoints = block(w.store.checkpoints(SESSION)).unwrap();
    let after_first = &checkpoints[1];
    assert_eq!(after_first.message_count, 3);

    let request =
        block(r.fork_request(SESSION, Some(&after_first.id), "fork1".into(), None)).unwrap();
    assert_eq!(request.history.len(), 3);
    block(r.create(request)).unwrap();
    let fork = block(w.store.load("fork1")).unwrap().unwrap();
    assert_eq!(fork.state, json!({"notes": [{"text": "kept"}]}));
    assert_eq!(fork.head.message_count, 3);
    let origin = fork.head.forked_from.clone().unwrap();
    assert_eq!(
        (origin.session_id.as_str(), origin.checkpoint_id.as_str()),
        (SESSION, after_first.id.as_str())
    );
    let [(seq, reason, from, count)] = resyncs(&w)[..] else {
        panic!("one resync")
    };
    assert_eq!((reason, from, count), (ResyncReason::Branch, seq, 3));

    w.model.text("fork answer");
    assert_eq!(
        block(r.drive("fork1", 10)).unwrap(),
        Progress::Idle(SessionStatus::Completed)
    );
    let forked = block(w.store.messages("fork1", 0, 100)).unwrap();
    assert_eq!(
        texts(&forked),
        [
            "user: go",
            "assistant: ",
            "tool: add_note",
            "assistant: fork answer"
        ]
    );
    assert_eq!(
        w.session().state["notes"].as_array().unwrap().len(),
        2,
        "the source is untouched"
    );

    // With a message, the fork answers it; its id must be free.
    let request =
        block(r.fork_request(SESSION, None, "fork2".into(), Some("and then?".into()))).unwrap();
    assert_eq!(
        request.history.len(),
        0,
        "back to before the latest run's input"
    );
    assert_eq!(request.input, vec![Message::user("and then?")]);
    let taken = block(r.fork_request(SESSION, None, "fork1".into(), None)).unwrap();
    assert!(matches!(block(r.create(taken)), Err(RunError::Store(_))));
}

/// A rollback abandons the checkpoints past what it keeps of the transcript: their
/// messages are gone (replaced by the new branch's), so they are no longer listed, and
/// going back to one is `checkpoint_not_found` (it used to fail in the store, or fork a
/// transcript of the new branch with the old branch's state).
#[test]
fn a_rollback_drops_the_checkpoints_of_the_branch_it_abandons() {
    let w = World::new();
    let r = w.runner("p1");
    w.model
        .calls(vec![w.model.call("add_note", json!({"text": "old"}))])
        .text("first answer");
    w.create(&r, "tester", "original question");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    let before = block(w.store.checkpoints(SESSION)).unwrap();
    let abandoned: Vec<_> = before.iter().filter(|c| c.message_count > 0).collect();
    assert_eq!(
        abandoned.len(),
        3,
        "the create's and the two steps' (each holds the replaced input): {before:?}"
    );

    w.model
        .calls(vec![w.model.call("add_note", json!({"text": "new"}))])
        .text("second answer");
    block(r.retry(SESSION, None, Some("edited question".into()))).unwrap();
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    let after = block(w.store.checkpoints(SESSION)).unwrap();
    for gone in &abandoned {
        assert!(
            after.iter().all(|c| c.id != gone.id),
            "{} is not listed",
            gone.id
        );
        let retry = block(r.retry(SESSION, Some(&gone.id), None));
        assert!(
            matches!(retry, Err(RunError::CheckpointNotFound(_))),
            "{retry:?}"
        );
        let fork = block(r.fork_request(SESSION, Some(&gone.id), "copy".into(), None));
        assert!(
            matches!(fork, Err(RunError::CheckpointNotFound(_))),
            "{fork:?}"
        );
    }
    assert_eq!(
        after.len(),
        3,
        "the new branch's start (at the edited question) and its two steps: {after:?}"
    );
    assert_eq!(
        (after[0].message_count, after[0].step_count, after[0].status),
        (1, 0, CheckpointStatus::Active)
    );
    // The new branch's checkpoints restore as they were.
    let latest = after.last().unwrap().id.clone();
    let fork = block(r.fork_request(SESSION, Some(&latest), "copy".into(), None)).unwrap();
    assert_eq!(
        texts(&[fork.history.clone(), fork.input.clone()].concat()),
        [
            "user: edited question",
            "assistant: ",
            "tool: add_note",
            "assistant: second answer"
        ]
    );
    // Edited again, with no checkpoint named: back to before the edited question.
    let again = block(r.fork_request(SESSION, None, "again".into(), Some("third".into()))).unwrap();
    assert_eq!(
        texts(&[again.history, again.input].concat()),
        ["user: third"]
    );
    assert_consistent(&w, &json!({"notes": []}));
}

#[test]
fn a_retry_and_a_fork_keep_a_rich_message_whole() {
    let w = World::new();
    let r = w.runner("p1");
    w.model.text("first answer");
    w.create(&r, "tester", "original question");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    let rich = Message::User {
        content: "what is in this picture?".into(),
        attachments: vec![Attachment::image("image/png", "iVBORw0KGgo=").named("cat.png")],
        metadata: json!({ "source": "camera" }).as_object().cloned(),
    };

    // A retry: the transcript holds it as given, and the model gets its picture.
    w.model.text("a cat");
    block(r.retry_with(SESSION, None, vec![rich.clone()])).unwrap();
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    assert_eq!(w.messages()[0], rich);
    assert_eq!(w.model.seen().last().unwrap().messages[0], rich);

    // A fork: the new session's request carries it as given.
    let request =
        block(r.fork_request_with(SESSION, None, "copy".into(), vec![rich.clone()])).unwrap();
    assert_eq!(request.input, vec![rich]);
    assert!(!request.idle);
}
