//! Lifecycle hooks fire in one canonical order: `before_tool` as each call starts; then,
//! once the step's calls are all done, per call in the model's order (not the order
//! they finished in) `on_state_change`, `on_message` and `after_tool`. Approved, denied
//! and timed-out calls of a resumed step fire the same sequence after
//! `on_agent_resumed`; a suspension fires `on_agent_suspended` with its reason and the
//! calls it waits on. Hooks are told where they fire, write the state into the step's
//! commit (once, and again identically after a crash), and fail without losing it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

mod support;

use helix_edge_core::agent::{Agent, Agents, HookContext, HookFuture, Hooks, Suspension, done};
use helix_edge_core::error::ToolError;
use helix_edge_core::message::Message;
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
    fn before_tool<'a>(&'a self, ctx: &'a HookContext) -> HookFuture<'a> {
        self.push(format!("before {}", called(ctx)));
        done()
    }
    fn on_state_change<'a>(&'a self, ctx: &'a HookContext, w: &'a [PatchOp]) -> HookFuture<'a> {
        self.push(format!("state {} {}", called(ctx), w.len()));
        done()
    }
    fn on_message<'a>(&'a self, _: &'a HookContext, m: &'a Message) -> HookFuture<'a> {
        self.push(match m {
            Message::Tool { tool_name, .. } => format!("message {tool_name}"),
            Message::User { .. } => "message user".into(),
            _ => "message assistant".into(),
        });
        done()
    }
    fn after_tool<'a>(&'a self, ctx: &'a HookContext, result: &'a Message) -> HookFuture<'a> {
        let ok = matches!(
            result,
            Message::Tool {
                is_error: false,
                ..
            }
        );
        self.push(format!(
            "after {} {}",
            called(ctx),
            if ok { "ok" } else { "error" }
        ));
        done()
    }
    fn on_agent_suspended<'a>(&'a self, _: &'a HookContext, s: Suspension<'a>) -> HookFuture<'a> {
        self.push(format!("suspended {} {}", s.reason.as_str(), s.calls.len()));
        done()
    }
    fn on_agent_resumed<'a>(&'a self, _: &'a HookContext) -> HookFuture<'a> {
        self.push("resumed".into());
        done()
    }
}

/// The name of the hook's call.
fn called(ctx: &HookContext) -> &str {
    ctx.call.as_ref().map_or("-", |c| c.name.as_str())
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
    assert_eq!(log.take(), ["message assistant", "suspended client_tool 3"]);

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

/// Hooks that keep an audit in the state: each call's outcome (`after_tool`), why the
/// run waits (`on_agent_suspended`, cleared by `on_agent_resumed`); the first
/// `after_tool` of `hang_once` never returns (the process dies there).
#[derive(Default, Clone)]
struct Audit {
    seen: Log,
    hang_once: Rc<std::cell::Cell<bool>>,
    fail: bool,
}

impl Hooks for Audit {
    fn after_tool<'a>(&'a self, ctx: &'a HookContext, result: &'a Message) -> HookFuture<'a> {
        Box::pin(async move {
            let call = ctx.call.as_ref().ok_or("after_tool has its call")?;
            self.seen.push(format!(
                "{} {} {} {} {}",
                ctx.session_id, ctx.agent, ctx.step, call.id, ctx.run_id
            ));
            if self.hang_once.replace(false) {
                std::future::pending::<()>().await;
            }
            let ok = matches!(
                result,
                Message::Tool {
                    is_error: false,
                    ..
                }
            );
            ctx.append("/audit", json!({"call": call.name, "ok": ok}))?;
            if self.fail {
                return Err("the audit service is down".into());
            }
            Ok(())
        })
    }
    fn on_agent_suspended<'a>(&'a self, ctx: &'a HookContext, s: Suspension<'a>) -> HookFuture<'a> {
        Box::pin(async move {
            let ids: Vec<&str> = s.calls.iter().map(|c| c.tool_call_id.as_str()).collect();
            ctx.set(
                "/waiting",
                json!({"reason": s.reason.as_str(), "calls": ids}),
            )?;
            Ok(())
        })
    }
    fn on_agent_resumed<'a>(&'a self, ctx: &'a HookContext) -> HookFuture<'a> {
        Box::pin(async move {
            ctx.remove("/waiting")?;
            Ok(())
        })
    }
}

/// The fields of each `hook_failed` line logged so far.
fn hook_failures(w: &World) -> Vec<Value> {
    let logs = w.host.logs().into_iter();
    logs.filter(|(event, _)| event == "hook_failed")
        .map(|(_, fields)| fields)
        .collect()
}

fn audited(audit: &Audit) -> World {
    let agent = Agent::builder("audited")
        .initial_state(json!({"notes": [], "audit": []}))
        .tool(support::agents::add_note_tool())
        .tool(support::agents::delete_file_tool())
        .hooks(audit.clone())
        .build()
        .unwrap();
    let mut w = World::new();
    w.agents = Agents::new().with(agent).unwrap();
    w
}

#[test]
fn hooks_are_told_where_they_fire_and_their_writes_are_committed_with_the_step() {
    let audit = Audit::default();
    let w = audited(&audit);
    let r = w.runner("p1");
    let note = w.model.call("add_note", json!({"text": "x"}));
    let delete = w.model.call("delete_file", json!({"path": "/a"}));
    w.model
        .calls(vec![note.clone(), delete.clone()])
        .text("done");
    w.create(&r, "audited", "x");
    assert!(matches!(drive(&r), Progress::Suspended { .. }));
    let session = w.session();
    assert_eq!(
        session.state,
        json!({
            "notes": [{"text": "x"}],
            "audit": [{"call": "add_note", "ok": true}],
            "waiting": {"reason": "client_tool", "calls": [delete.id]}
        }),
        "the step's commit holds the tool's, after_tool's and on_agent_suspended's writes"
    );
    let run_id = session.head.run.run_id.clone();
    assert_eq!(
        audit.seen.take(),
        [format!("{SESSION} audited 1 {} {run_id}", note.id)]
    );

    approve(&r, &delete.id, true);
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    assert_eq!(
        w.session().state,
        json!({
            "notes": [{"text": "x"}],
            "audit": [{"call": "add_note", "ok": true}, {"call": "delete_file", "ok": true}]
        }),
        "on_agent_resumed removed the wait; the resumed call was audited once"
    );
    assert_eq!(
        audit.seen.take(),
        [format!("{SESSION} audited 1 {} {run_id}", delete.id)],
        "the resumed call belongs to the step it was made in"
    );
    assert_consistent(&w, &json!({"notes": [], "audit": []}));
}

#[test]
fn a_crash_in_a_hook_commits_nothing_and_the_step_again_writes_the_same_once() {
    let audit = Audit {
        hang_once: Rc::new(std::cell::Cell::new(true)),
        ..Audit::default()
    };
    let w = audited(&audit);
    let r1 = w.runner("p1");
    w.model
        .calls(vec![w.model.call("add_note", json!({"text": "x"}))]);
    w.create(&r1, "audited", "x");
    drive_and_crash(&r1);
    assert_eq!(
        w.session().state,
        json!({"notes": [], "audit": []}),
        "nothing of the torn step is committed"
    );

    w.model
        .calls(vec![w.model.call("add_note", json!({"text": "x"}))])
        .text("done");
    let r2 = w.runner("p2");
    assert_eq!(drive(&r2), Progress::Idle(SessionStatus::Completed));
    assert_eq!(
        w.session().state,
        json!({"notes": [{"text": "x"}], "audit": [{"call": "add_note", "ok": true}]})
    );
    assert_consistent(&w, &json!({"notes": [], "audit": []}));
}

#[test]
fn a_failing_hook_is_logged_and_loses_nothing_but_its_own_writes() {
    let audit = Audit {
        fail: true,
        ..Audit::default()
    };
    let w = audited(&audit);
    let r = w.runner("p1");
    w.model
        .calls(vec![w.model.call("add_note", json!({"text": "x"}))])
        .text("done");
    w.create(&r, "audited", "x");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    assert_eq!(
        w.session().state,
        json!({"notes": [{"text": "x"}], "audit": []}),
        "the tool's write is committed, the failed hook's is not"
    );
    let failed = hook_failures(&w);
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["hook"], "after_tool");
    assert_eq!(failed[0]["error"], "the audit service is down");
    assert_consistent(&w, &json!({"notes": [], "audit": []}));
}

#[test]
fn a_hook_that_never_returns_fails_after_its_timeout_and_the_run_goes_on() {
    let audit = Audit {
        hang_once: Rc::new(std::cell::Cell::new(true)),
        ..Audit::default()
    };
    let w = audited(&audit);
    let r = w.runner("p1");
    w.model
        .calls(vec![w.model.call("add_note", json!({"text": "x"}))])
        .text("done");
    w.create(&r, "audited", "x");
    let limit = helix_edge_core::agent::HOOK_TIMEOUT.as_millis() as u64;
    let progress = drive_advancing(&w, &r, limit, 2);
    assert_eq!(progress, Progress::Idle(SessionStatus::Completed));
    assert_eq!(
        w.session().state,
        json!({"notes": [{"text": "x"}], "audit": []}),
        "the hook's writes are dropped, the tool's kept"
    );
    let failed = hook_failures(&w);
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["error"], "it took longer than 30 s");
}
