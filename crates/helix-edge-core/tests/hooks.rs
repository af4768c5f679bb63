//! Lifecycle hooks fire in one canonical order: `before_tool` as each call starts; then,
//! once the step's calls are all done, per call in the model's order (not the order
//! they finished in) `on_state_change`, `on_message` and `after_tool`. Approved, denied
//! and timed-out calls of a resumed step fire the same sequence after
//! `on_agent_resumed`; a suspension fires `on_agent_suspended` with the calls it waits on.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

mod support;

use helix_edge_core::agent::{Agent, Agents, Hooks};
use helix_edge_core::error::ToolError;
use helix_edge_core::message::{Message, ToolCall};
use helix_edge_core::runner::{Progress, Submission};
use helix_edge_core::state::PatchOp;
use helix_edge_core::store::SessionStatus;
use helix_edge_core::tool::Tool;
use serde_json::{Value, json};
use std::cell::RefCell;
use std::rc::Rc;
use support::agents::{AddNote, AskUser, DeleteFile};
use support::*;

#[derive(Default, Clone)]
struct Log(Rc<RefCell<Vec<String>>>);

impl Log {
    fn push(&self, line: String) {
        self.0.borrow_mut().push(line);
    }
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut self.0.borrow_mut())
    }
}

impl Hooks for Log {
    fn before_tool(&self, c: &ToolCall) {
        self.push(format!("before {}", c.name));
    }
    fn on_state_change(&self, c: &ToolCall, w: &[PatchOp]) {
        self.push(format!("state {} {}", c.name, w.len()));
    }
    fn on_message(&self, m: &Message) {
        self.push(match m {
            Message::Tool { tool_name, .. } => format!("message {tool_name}"),
            Message::User { .. } => "message user".into(),
            _ => "message assistant".into(),
        });
    }
    fn after_tool(&self, c: &ToolCall, result: &Message) {
        let ok = matches!(
            result,
            Message::Tool {
                is_error: false,
                ..
            }
        );
        self.push(format!(
            "after {} {}",
            c.name,
            if ok { "ok" } else { "error" }
        ));
    }
    fn on_agent_suspended(&self, ids: &[String]) {
        self.push(format!("suspended {}", ids.len()));
    }
    fn on_agent_resumed(&self) {
        self.push("resumed".into());
    }
}

/// A world whose only agent, `hooked`, logs every hook: a slow tool that finishes
/// after the fast one, a note tool, an approval-gated tool and a client tool.
fn world(log: &Log) -> World {
    let agent = Agent::builder("hooked")
        .initial_state(json!({"notes": []}))
        .tool(support::agents::add_note_tool())
        .tool(Tool::new("slow", "d", |i: AddNote, ctx| async move {
            for _ in 0..5 {
                yield_now().await;
            }
            ctx.append("/notes", json!({"text": i.text}))?;
            Ok::<_, ToolError>(json!({"slow": true}))
        }))
        .tool(Tool::new("fast", "d", |_: Value, _| async {
            Ok::<_, ToolError>(json!({"fast": true}))
        }))
        .tool(
            Tool::new("delete_file", "d", |i: DeleteFile, _| async move {
                Ok::<_, ToolError>(json!({"deleted": i.path}))
            })
            .approval_always(),
        )
        .tool(
            Tool::client::<AskUser>("ask_user", "d")
                .deadline(std::time::Duration::from_millis(CLIENT_DEADLINE_MS)),
        )
        .hooks(log.clone())
        .build()
        .unwrap();
    let mut w = World::new();
    w.agents = Agents::new().with(agent).unwrap();
    w
}

#[test]
fn one_call_fires_before_state_message_after() {
    let log = Log::default();
    let w = world(&log);
    let r = w.runner("p1");
    w.model
        .calls(vec![w.model.call("add_note", json!({"text": "x"}))])
        .text("ok");
    w.create(&r, "hooked", "x");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    assert_eq!(
        log.take(),
        [
            "message assistant",
            "before add_note",
            "state add_note 1",
            "message add_note",
            "after add_note ok",
            "message assistant"
        ]
    );
}

#[test]
fn parallel_calls_fire_their_result_hooks_in_call_order_not_completion_order() {
    let log = Log::default();
    let w = world(&log);
    let r = w.runner("p1");
    let slow = w.model.call("slow", json!({"text": "s"}));
    let fast = w.model.call("fast", json!({}));
    let missing = w.model.call("missing", json!({}));
    w.model.calls(vec![slow, fast, missing]).text("ok");
    w.create(&r, "hooked", "x");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    // `fast` really finished first: its tool_end is streamed before slow's.
    let ends: Vec<String> = w
        .chunks()
        .into_iter()
        .filter_map(|c| match c {
            helix_edge_core::chunk::ChunkBody::ToolEnd { tool_name, .. } => Some(tool_name),
            _ => None,
        })
        .collect();
    assert_eq!(ends, ["fast", "slow", "missing"]);
    assert_eq!(
        log.take(),
        [
            "message assistant",
            "before slow",
            "before fast",
            "state slow 1",
            "message slow",
            "after slow ok",
            "message fast",
            "after fast ok",
            "message missing",
            "after missing error",
            "message assistant"
        ]
    );
}

#[test]
fn approved_denied_and_timed_out_calls_fire_the_same_sequence_after_resuming() {
    let log = Log::default();
    let w = world(&log);
    let r = w.runner("p1");
    let yes = w.model.call("delete_file", json!({"path": "/a"}));
    let no = w.model.call("delete_file", json!({"path": "/b"}));
    let ask = w.model.call("ask_user", json!({"question": "?"}));
    w.model
        .calls(vec![yes.clone(), no.clone(), ask.clone()])
        .text("done");
    w.create(&r, "hooked", "x");
    assert!(matches!(drive(&r), Progress::Suspended { .. }));
    assert_eq!(log.take(), ["message assistant", "suspended 3"]);

    for (call, approved) in [(&yes, true), (&no, false)] {
        let answer = Submission::Approval {
            tool_call_id: call.id.clone(),
            approved,
            reason: None,
        };
        block(r.submit(SESSION, answer)).unwrap();
    }
    assert!(
        matches!(drive(&r), Progress::Suspended { .. }),
        "the client call is still open"
    );
    assert!(log.take().is_empty(), "nothing fires while a call is open");
    w.host.advance(CLIENT_DEADLINE_MS);
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    assert_eq!(
        log.take(),
        [
            "resumed",
            "before delete_file",
            "message delete_file",
            "after delete_file ok",
            "message delete_file",
            "after delete_file error",
            "message ask_user",
            "after ask_user error",
            "message assistant"
        ]
    );
}
