//! Sub-agents in the pure core: a parent's sub-agent calls become child sessions in the
//! same store (started through a local [`Children`]), the parent suspends awaiting them
//! and resumes from durable state once they report that they ended (as the platform
//! delivers reports after each slice); answers to calls pending in a child are
//! submitted to the root and passed down; timeouts, failed starts, failed children and
//! aborts map to tool errors the model sees.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

mod support;

use helix_edge_core::agent::{Agent, Agents, HookContext, HookFuture, Hooks, Suspension, done};
use helix_edge_core::chunk::{ChunkBody, StreamEvent, SuspendReason};
use helix_edge_core::error::{ProviderError, ToolError};
use helix_edge_core::host::ManualHost;
use helix_edge_core::journal::MemoryJournal;
use helix_edge_core::message::Message;
use helix_edge_core::model::OneModel;
use helix_edge_core::runner::{
    ChildOrder, CreateSession, Progress, Routed, RunError, Runner, RunnerConfig, Submission,
    WaitKind, child_session_id, ended_report,
};
use helix_edge_core::scripted::ScriptedModel;
use helix_edge_core::store::{
    ChildStatus, MemoryStore, PendingKind, SessionStatus, Store, StoreError,
};
use helix_edge_core::tool::Tool;
use serde_json::{Value, json};
use std::cell::RefCell;
use std::rc::Rc;
use support::agents::{Research, coordinator};
use support::block;
use support::children::{LocalChildren, R};

const ROOT: &str = "root";
const TIMEOUT_MS: u64 = 600_000;

struct Tree {
    store: Rc<MemoryStore>,
    host: Rc<ManualHost>,
    model: Rc<ScriptedModel>,
    parent_journal: Rc<MemoryJournal>,
    parent: R,
    child: Rc<R>,
    children: Rc<LocalChildren>,
    /// The versions at which each child's ending was reported to the parent.
    reported: RefCell<Vec<(String, u64)>>,
}

fn agents() -> Agents {
    // `planner` finishes through a finish_with tool: its sub-agents still run.
    let planner = Agent::builder("planner")
        .system_prompt("plan")
        .tool(Tool::subagent::<Research>(
            "research",
            support::agents::researcher().unwrap(),
        ))
        .tool(
            Tool::new("finish", "d", |_: Value, _| async {
                Ok::<_, ToolError>(json!({"done": true}))
            })
            .finish_with(),
        )
        .build()
        .unwrap();
    // `watched` tells its hooks why it suspends.
    let watched = Agent::builder("watched")
        .tool(Tool::subagent::<Research>(
            "research",
            support::agents::researcher().unwrap(),
        ))
        .hooks(Watch)
        .build()
        .unwrap();
    Agents::new()
        .with(coordinator().unwrap())
        .and_then(|a| a.with(planner))
        .and_then(|a| a.with(watched))
        .unwrap()
}

thread_local! {
    static SUSPENSIONS: RefCell<Vec<(String, Vec<PendingKind>)>> = const { RefCell::new(Vec::new()) };
}

/// Records each suspension's reason and the kinds of the calls it waits on.
struct Watch;

impl Hooks for Watch {
    fn on_agent_suspended<'a>(&'a self, _: &'a HookContext, s: Suspension<'a>) -> HookFuture<'a> {
        let kinds = s.calls.iter().map(|c| c.kind).collect();
        SUSPENSIONS.with(|all| all.borrow_mut().push((s.reason.as_str().into(), kinds)));
        done()
    }
}

#[test]
fn a_suspension_on_sub_agents_tells_the_hooks_it_awaits_children() {
    let t = Tree::new();
    let a = research(&t.model, "alpha");
    t.model.calls(vec![a.clone()]);
    t.start("watched", "research alpha");
    assert!(matches!(t.drive_parent(), Progress::Suspended { .. }));
    let told = SUSPENSIONS.with(|all| all.take());
    assert_eq!(
        told,
        [("awaiting_children".to_string(), vec![PendingKind::Child])]
    );
}

impl Tree {
    fn new() -> Self {
        let store = Rc::new(MemoryStore::yielding());
        let host = Rc::new(ManualHost::new(1_795_000_000_000, ""));
        let model = Rc::new(ScriptedModel::new());
        let runner = |journal: Rc<MemoryJournal>, instance: &str| {
            Runner::new(
                store.clone(),
                agents(),
                Rc::new(OneModel(model.clone())),
                journal,
                host.clone(),
                RunnerConfig::new(instance),
            )
        };
        let child = Rc::new(runner(Rc::new(MemoryJournal::new()), "child"));
        let children = Rc::new(LocalChildren::new(child.clone(), "unstartable"));
        let parent_journal = Rc::new(MemoryJournal::new());
        let parent = runner(parent_journal.clone(), "parent")
            .with_children(children.clone())
            .with_waits([WaitKind::subagents()]);
        Self {
            store,
            host,
            model,
            parent_journal,
            parent,
            child,
            children,
            reported: RefCell::new(Vec::new()),
        }
    }

    fn start(&self, agent: &str, message: &str) {
        block(self.parent.create(CreateSession::new(ROOT, agent, message))).unwrap();
    }

    fn drive_parent(&self) -> Progress {
        block(self.parent.drive(ROOT, 100)).unwrap()
    }

    /// Drives a child, then delivers its report to the parent as the platform does
    /// after every slice (once per ending).
    fn drive_child(&self, id: &str) -> Progress {
        let progress = block(self.child.drive(id, 100)).unwrap();
        let delivered = self
            .reported
            .borrow()
            .iter()
            .find(|(c, _)| c == id)
            .map(|(_, v)| *v);
        if let Some((parent, report)) = ended_report(&self.head(id), delivered) {
            assert_eq!(parent, ROOT);
            self.reported
                .borrow_mut()
                .push((id.to_string(), report.version));
            block(self.parent.child_ended(ROOT, report)).unwrap();
        }
        progress
    }

    fn head(&self, id: &str) -> helix_edge_core::store::SessionHead {
        block(self.store.load(id)).unwrap().unwrap().head
    }

    fn chunks(&self) -> Vec<ChunkBody> {
        self.parent_journal
            .events()
            .into_iter()
            .filter_map(|e| match e {
                StreamEvent::Chunk(c) => Some(c.body),
                _ => None,
            })
            .collect()
    }

    fn tool_messages(&self, id: &str) -> Vec<(String, Value, bool)> {
        block(self.store.messages(id, 0, 100))
            .unwrap()
            .into_iter()
            .filter_map(|m| match m {
                Message::Tool {
                    tool_call_id,
                    content,
                    is_error,
                    ..
                } => Some((tool_call_id, content, is_error)),
                _ => None,
            })
            .collect()
    }

    fn approve(&self, at: &str, call: &str) -> Result<Routed, RunError> {
        let runner = if at == ROOT {
            &self.parent
        } else {
            &*self.child
        };
        block(runner.submit(at, approval(call)))
    }

    /// Answers at the root as the platform does: stored there, or passed down to each
    /// child the root waits on until one takes it (then the route is recorded).
    fn approve_at_root(&self, call: &str) -> Result<String, RunError> {
        match block(self.parent.submit(ROOT, approval(call)))? {
            Routed::Here => Ok(ROOT.into()),
            Routed::Descendants {
                children,
                otherwise,
            } => {
                for child in children {
                    match block(self.child.submit(&child, approval(call))) {
                        Err(RunError::ToolCallNotFound(_)) => continue,
                        Ok(Routed::Here) => {
                            self.parent.record_route(call, &child)?;
                            return Ok(child);
                        }
                        other => return other.map(|_| child),
                    }
                }
                Err(otherwise)
            }
        }
    }
}

fn approval(call: &str) -> Submission {
    Submission::Approval {
        tool_call_id: call.into(),
        approved: true,
        reason: None,
    }
}

fn research(model: &ScriptedModel, topic: &str) -> helix_edge_core::message::ToolCall {
    model.call("research", json!({ "topic": topic }))
}

#[test]
fn two_parallel_children_complete_and_their_outputs_become_the_results() {
    let t = Tree::new();
    let (a, b) = (research(&t.model, "alpha"), research(&t.model, "beta"));
    t.model.calls(vec![a.clone(), b.clone()]);
    t.start("coordinator", "research alpha and beta");
    let started = t.host_now();
    assert_eq!(
        t.drive_parent(),
        Progress::Suspended {
            next_deadline: Some(started + TIMEOUT_MS)
        }
    );
    let head = t.head(ROOT);
    assert_eq!(head.suspended_reason, Some(SuspendReason::AwaitingChildren));
    assert!(head.pending.iter().all(|p| p.kind == PendingKind::Child));
    let loaded = block(t.store.load(ROOT)).unwrap().unwrap();
    let view = serde_json::to_value(helix_edge_core::api::SessionView::from(loaded)).unwrap();
    assert_eq!(
        (&view["canResume"], &view["resumeReason"]),
        (&json!(false), &json!("awaiting_subagents"))
    );
    let (ca, cb) = (child_session_id(ROOT, &a.id), child_session_id(ROOT, &b.id));
    // Siblings were started together, each with its input as its first message and
    // none of the parent's state.
    for (id, topic) in [(&ca, "alpha"), (&cb, "beta")] {
        let child = t.head(id);
        assert_eq!(child.agent, "researcher");
        assert_eq!(child.parent.as_ref().unwrap().session_id, ROOT);
        assert_eq!(child.parent.as_ref().unwrap().root_id, ROOT);
        let first = block(t.store.messages(id, 0, 1)).unwrap();
        assert_eq!(
            first,
            vec![Message::user(json!({ "topic": topic }).to_string())]
        );
        assert_eq!(block(t.store.load(id)).unwrap().unwrap().state, json!({}));
        // Its run continues the parent run's trace, under the parent run's span.
        let (theirs, ours) = (child.run.trace.unwrap(), head.run.trace.clone().unwrap());
        assert_eq!(theirs.trace_id, ours.trace_id);
        assert_eq!(theirs.parent_span_id, Some(ours.span_id));
    }
    let chunks = t.chunks();
    let starts: Vec<_> = chunks
        .iter()
        .filter_map(|c| match c {
            ChunkBody::SubagentStart { sub_session_id, .. } => Some(sub_session_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(starts, vec![ca.clone(), cb.clone()]);
    assert!(chunks.iter().any(|c| matches!(
        c,
        ChunkBody::RunSuspended { reason: SuspendReason::AwaitingChildren, tool_call_ids } if tool_call_ids.len() == 2
    )));

    t.model.output(json!({"summary": "A"}));
    assert_eq!(t.drive_child(&ca), Progress::Idle(SessionStatus::Completed));
    assert!(
        matches!(t.drive_parent(), Progress::Suspended { .. }),
        "one child is still running"
    );
    t.model.output(json!({"summary": "B"})).text("Both done.");
    assert_eq!(t.drive_child(&cb), Progress::Idle(SessionStatus::Completed));
    assert_eq!(t.drive_parent(), Progress::Idle(SessionStatus::Completed));

    let results = t.tool_messages(ROOT);
    assert_eq!(
        results,
        vec![
            (a.id.clone(), json!({"summary": "A"}), false),
            (b.id.clone(), json!({"summary": "B"}), false),
        ]
    );
    let ends: Vec<_> = t
        .chunks()
        .into_iter()
        .filter_map(|c| match c {
            ChunkBody::SubagentEnd {
                sub_session_id,
                result,
                ..
            } => Some((sub_session_id, result)),
            _ => None,
        })
        .collect();
    assert_eq!(
        ends,
        vec![
            (ca.clone(), Some(json!({"summary": "A"}))),
            (cb.clone(), Some(json!({"summary": "B"}))),
        ]
    );
    let records = block(t.store.subsessions(ROOT)).unwrap();
    assert!(
        records.iter().all(|c| c.status == ChildStatus::Completed),
        "{records:?}"
    );
    assert_eq!(t.model.remaining(), 0);
}

#[test]
fn an_approval_inside_a_child_is_answered_at_the_root_and_routed_to_it() {
    let t = Tree::new();
    let r = research(&t.model, "delete /tmp/x");
    t.model.calls(vec![r.clone()]);
    t.start("coordinator", "go");
    t.drive_parent();
    let child = child_session_id(ROOT, &r.id);
    let delete = t.model.call("delete_file", json!({"path": "/tmp/x"}));
    t.model.calls(vec![delete.clone()]);
    assert!(matches!(t.drive_child(&child), Progress::Suspended { .. }));

    // The root shows the child's call as its own pending work.
    let calls = block(t.parent.descendant_calls(&t.head(ROOT))).unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].tool_call_id, delete.id);
    assert_eq!(calls[0].kind, PendingKind::Approval);

    // Answers go to the root, which passes them to the children it waits on; the owner
    // stores the first one, and the root remembers where it went.
    assert!(matches!(
        t.approve(ROOT, &delete.id),
        Ok(Routed::Descendants { children, .. }) if children == [child.clone()]
    ));
    assert_eq!(t.approve_at_root(&delete.id), Ok(child.clone()));
    assert!(matches!(
        t.approve_at_root(&delete.id),
        Err(RunError::AlreadyResolved(_))
    ));
    assert!(matches!(
        t.approve(&child, &delete.id),
        Err(RunError::AlreadyResolved(_))
    ));
    // The root's own sub-agent call takes no answer.
    assert!(matches!(
        t.approve_at_root(&r.id),
        Err(RunError::KindMismatch { .. })
    ));

    t.model.output(json!({"summary": "deleted"})).text("Done.");
    assert_eq!(
        t.drive_child(&child),
        Progress::Idle(SessionStatus::Completed)
    );
    let child_results = t.tool_messages(&child);
    assert_eq!(child_results[0].1, json!({"deleted": "/tmp/x"}), "ran once");
    assert_eq!(t.drive_parent(), Progress::Idle(SessionStatus::Completed));
    assert_eq!(
        t.tool_messages(ROOT),
        vec![(r.id.clone(), json!({"summary": "deleted"}), false)]
    );
    // Once the child resumed, a late answer at the root is a second answer.
    assert!(matches!(
        t.approve_at_root(&delete.id),
        Err(RunError::AlreadyResolved(_))
    ));
    assert!(matches!(
        t.approve_at_root("nope"),
        Err(RunError::ToolCallNotFound(_))
    ));
}

#[test]
fn a_failing_child_becomes_a_tool_error_and_the_parent_continues() {
    let t = Tree::new();
    let (ok, bad) = (research(&t.model, "fine"), research(&t.model, "broken"));
    t.model.calls(vec![ok.clone(), bad.clone()]);
    t.start("coordinator", "go");
    t.drive_parent();
    t.model.output(json!({"summary": "fine"}));
    t.drive_child(&child_session_id(ROOT, &ok.id));
    t.model.fail(ProviderError::Auth { status: 401 });
    assert_eq!(
        t.drive_child(&child_session_id(ROOT, &bad.id)),
        Progress::Idle(SessionStatus::Failed)
    );
    t.model.text("One of them failed.");
    assert_eq!(t.drive_parent(), Progress::Idle(SessionStatus::Completed));
    let results = t.tool_messages(ROOT);
    assert_eq!(
        results[0],
        (ok.id.clone(), json!({"summary": "fine"}), false)
    );
    assert_eq!(results[1].0, bad.id);
    assert!(results[1].2, "the failed child is a tool error");
    assert_eq!(results[1].1["code"], "subagent_failed");
    // The model saw the error on its next step.
    let seen = t.model.seen();
    let last = seen.last().unwrap();
    assert!(last.messages.iter().any(|m| matches!(
        m,
        Message::Tool { tool_call_id, is_error: true, .. } if *tool_call_id == bad.id
    )));
}

#[test]
fn a_child_call_id_equal_to_the_parents_own_child_call_routes_to_the_child() {
    let t = Tree::new();
    let r = research(&t.model, "delete /tmp/x");
    t.model.calls(vec![r.clone()]);
    t.start("coordinator", "go");
    t.drive_parent();
    let child = child_session_id(ROOT, &r.id);
    // The child's model reuses the parent's call id (demo and mock models do).
    let delete = helix_edge_core::message::ToolCall {
        id: r.id.clone(),
        name: "delete_file".into(),
        arguments: json!({"path": "/tmp/x"}),
    };
    t.model.calls(vec![delete]);
    t.drive_child(&child);
    assert_eq!(t.approve_at_root(&r.id), Ok(child.clone()));
}

#[test]
fn a_child_that_cannot_be_started_fails_its_call_only() {
    let t = Tree::new();
    let (ok, bad) = (
        research(&t.model, "fine"),
        research(&t.model, "unstartable"),
    );
    t.model.calls(vec![ok.clone(), bad.clone()]);
    t.start("coordinator", "go");
    assert!(matches!(t.drive_parent(), Progress::Suspended { .. }));
    t.model.output(json!({"summary": "fine"})).text("Done.");
    t.drive_child(&child_session_id(ROOT, &ok.id));
    assert_eq!(t.drive_parent(), Progress::Idle(SessionStatus::Completed));
    let results = t.tool_messages(ROOT);
    assert_eq!(results[0].1, json!({"summary": "fine"}));
    assert_eq!(results[1].1["code"], "subagent_dispatch_failed");
    assert!(
        results[1].1["error"]
            .as_str()
            .unwrap()
            .contains("unreachable")
    );
}

#[test]
fn a_child_past_its_timeout_is_aborted_and_reported_as_a_timeout() {
    let t = Tree::new();
    let r = research(&t.model, "slow");
    t.model.calls(vec![r.clone()]);
    t.start("coordinator", "go");
    let Progress::Suspended {
        next_deadline: Some(deadline),
    } = t.drive_parent()
    else {
        panic!("suspended with the child's deadline")
    };
    t.host.advance(TIMEOUT_MS - 1);
    assert!(matches!(t.drive_parent(), Progress::Suspended { .. }));
    t.host.advance(1);
    assert_eq!(t.host_now(), deadline);
    t.model.text("It timed out.");
    assert_eq!(t.drive_parent(), Progress::Idle(SessionStatus::Completed));
    let child = child_session_id(ROOT, &r.id);
    assert_eq!(t.head(&child).status, SessionStatus::Aborted);
    let results = t.tool_messages(ROOT);
    assert_eq!(results[0].1["code"], "subagent_timeout");
    let records = block(t.store.subsessions(ROOT)).unwrap();
    assert_eq!(records[0].status, ChildStatus::TimedOut);
}

#[test]
fn aborting_or_interrupting_the_parent_reaches_its_running_children() {
    let t = Tree::new();
    let r = research(&t.model, "long");
    t.model.calls(vec![r.clone()]);
    t.start("coordinator", "go");
    t.drive_parent();
    let child = child_session_id(ROOT, &r.id);

    block(t.parent.interrupt(ROOT, Some("pause".into()))).unwrap();
    assert_eq!(
        t.drive_child(&child),
        Progress::Idle(SessionStatus::Interrupted)
    );
    assert_eq!(t.drive_parent(), Progress::Idle(SessionStatus::Interrupted));
    block(t.parent.resume(ROOT)).unwrap();
    assert_eq!(t.head(&child).status, SessionStatus::Active, "resumed too");

    block(t.parent.abort(ROOT, Some("stop".into()))).unwrap();
    assert_eq!(t.head(ROOT).status, SessionStatus::Aborted);
    assert_eq!(t.head(&child).status, SessionStatus::Aborted);
    let orders: Vec<_> = t
        .children
        .orders
        .borrow()
        .iter()
        .map(|(_, o)| o.clone())
        .collect();
    assert!(orders.contains(&ChildOrder::Abort {
        reason: "stop".into()
    }));
}

#[test]
fn a_fresh_parent_runner_finishes_the_flow_from_durable_state() {
    let t = Tree::new();
    let r = research(&t.model, "restart");
    t.model.calls(vec![r.clone()]);
    t.start("coordinator", "go");
    t.drive_parent();
    let child = child_session_id(ROOT, &r.id);
    // The parent's process is gone; a new one knows only durable state (the store and
    // the object's journal). It starts the running child again: the start finds it.
    let fresh = || {
        Runner::new(
            t.store.clone(),
            agents(),
            Rc::new(OneModel(t.model.clone())),
            t.parent_journal.clone(),
            t.host.clone(),
            RunnerConfig::new("fresh"),
        )
        .with_children(t.children.clone())
        .with_waits([WaitKind::subagents()])
    };
    assert!(matches!(
        block(fresh().drive(ROOT, 100)).unwrap(),
        Progress::Suspended { .. }
    ));
    let starts = || {
        let orders = t.children.orders.borrow();
        orders
            .iter()
            .filter(|(_, o)| matches!(o, ChildOrder::Start { .. }))
            .count()
    };
    assert_eq!(starts(), 2, "sent again by the new process");
    assert_eq!(t.head(&child).version, 1, "the child was not created twice");
    t.model
        .output(json!({"summary": "after restart"}))
        .text("Done.");
    t.drive_child(&child);
    assert_eq!(
        block(fresh().drive(ROOT, 100)).unwrap(),
        Progress::Idle(SessionStatus::Completed)
    );
    assert_eq!(
        t.tool_messages(ROOT)[0].1,
        json!({"summary": "after restart"})
    );
    assert_eq!(starts(), 2, "an ended child is not started again");
}

#[test]
fn a_report_is_taken_once_and_only_for_a_call_the_parent_waits_on() {
    let t = Tree::new();
    let r = research(&t.model, "once");
    t.model.calls(vec![r.clone()]);
    t.start("coordinator", "go");
    t.drive_parent();
    let child = child_session_id(ROOT, &r.id);
    t.model.output(json!({"summary": "first"}));
    t.drive_child(&child);
    let mut report = ended_report(&t.head(&child), None).unwrap().1;
    assert!(
        !block(t.parent.child_ended(ROOT, report.clone())).unwrap(),
        "a repeated report changes nothing"
    );
    report.tool_call_id = "someone-else".into();
    assert!(!block(t.parent.child_ended(ROOT, report)).unwrap());
    t.model.text("ok");
    assert_eq!(t.drive_parent(), Progress::Idle(SessionStatus::Completed));
    assert_eq!(t.tool_messages(ROOT)[0].1, json!({"summary": "first"}));
}

#[test]
fn sub_agent_calls_with_bad_input_never_start() {
    let t = Tree::new();
    let bad = t.model.call("research", json!({"subject": "wrong field"}));
    t.model.calls(vec![bad.clone()]).text("ok");
    t.start("coordinator", "go");
    assert_eq!(t.drive_parent(), Progress::Idle(SessionStatus::Completed));
    assert_eq!(t.tool_messages(ROOT)[0].1["code"], "tool_input_invalid");
    assert!(
        t.children.orders.borrow().is_empty(),
        "no child was started"
    );
}

#[test]
fn sub_agents_called_with_the_finishing_call_run_and_the_run_completes_after_them() {
    let t = Tree::new();
    let r = research(&t.model, "late");
    let finish = t.model.call("finish", json!({}));
    t.model.calls(vec![r.clone(), finish]);
    t.start("planner", "go");
    assert!(
        matches!(t.drive_parent(), Progress::Suspended { .. }),
        "the run waits for its sub-agent instead of completing"
    );
    let head = t.head(ROOT);
    assert_eq!(head.run.deferred_output, Some(json!({"done": true})));
    assert_eq!(head.output, None, "no output before the sub-agent ends");
    assert_eq!(t.children.orders.borrow().len(), 1, "the child was started");

    let child = child_session_id(ROOT, &r.id);
    t.model.output(json!({"summary": "late findings"}));
    assert_eq!(
        t.drive_child(&child),
        Progress::Idle(SessionStatus::Completed)
    );
    assert_eq!(t.drive_parent(), Progress::Idle(SessionStatus::Completed));
    let head = t.head(ROOT);
    assert_eq!(head.output, Some(json!({"done": true})));
    assert_eq!(head.run.deferred_output, None);
    assert_eq!(t.model.remaining(), 0);
    assert_eq!(
        t.model.seen().len(),
        2,
        "no model call after the sub-agent: parent 1 + child 1"
    );
    let results = t.tool_messages(ROOT);
    let research = results.iter().find(|(id, ..)| *id == r.id).unwrap();
    assert_eq!(
        research.1,
        json!({"summary": "late findings"}),
        "its result is kept"
    );
    assert!(matches!(
        t.parent_journal.events().last(),
        Some(StreamEvent::End { output: Some(o) }) if *o == json!({"done": true})
    ));
}

impl Tree {
    fn host_now(&self) -> u64 {
        use helix_edge_core::host::Host;
        self.host.now_ms()
    }
}

#[test]
fn a_child_session_id_is_the_parent_id_and_a_sha256_of_the_call() {
    // From Python: hashlib.sha256(b"parent\0call_1").hexdigest()[:20].
    assert_eq!(
        child_session_id("parent", "call_1"),
        "parent.sub-050e22e42ba5ddc7be47"
    );
}

#[test]
fn deleting_the_root_deletes_its_children_first_and_a_child_alone_is_refused() {
    let t = Tree::new();
    let (a, b) = (research(&t.model, "alpha"), research(&t.model, "beta"));
    t.model.calls(vec![a.clone(), b.clone()]);
    t.start("coordinator", "research alpha and beta");
    t.drive_parent();
    let (ca, cb) = (child_session_id(ROOT, &a.id), child_session_id(ROOT, &b.id));
    assert!(
        block(t.store.load(&ca)).unwrap().is_some(),
        "the children run"
    );

    assert_eq!(
        block(t.parent.delete(&ca, false)),
        Err(RunError::SubAgentSession(ROOT.into())),
        "a child goes only with its root"
    );
    assert!(block(t.store.load(&ca)).unwrap().is_some());

    block(t.parent.delete(ROOT, false)).unwrap();
    for id in [ROOT, ca.as_str(), cb.as_str()] {
        assert!(block(t.store.load(id)).unwrap().is_none(), "{id} is gone");
        assert!(block(t.store.runs(id)).unwrap_or_default().is_empty());
    }
    assert!(block(t.store.subsessions(ROOT)).unwrap().is_empty());
    assert_eq!(
        block(t.parent.delete(ROOT, false)),
        Err(RunError::Store(StoreError::NotFound(ROOT.into()))),
        "a second delete finds nothing"
    );
}

#[test]
fn agents_name_their_first_sub_agent_tool_for_workers_built_without_sub_agents() {
    assert_eq!(agents().subagent_tool(), Some("research"));
    let researcher = support::agents::researcher().expect("researcher");
    let without = Agents::new().with(researcher).expect("agents");
    assert_eq!(without.subagent_tool(), None);
}

#[test]
fn a_child_belongs_to_its_roots_owner() {
    let t = Tree::new();
    let owner = helix_edge_core::store::Owner {
        subject: "ann".into(),
        tenant: Some("acme".into()),
    };
    let call = research(&t.model, "alpha");
    t.model.calls(vec![call.clone()]);
    let create = CreateSession {
        owner: Some(owner.clone()),
        ..CreateSession::new(ROOT, "coordinator", "research alpha")
    };
    block(t.parent.create(create)).unwrap();
    t.drive_parent();
    assert_eq!(t.head(ROOT).owner.as_ref(), Some(&owner));
    assert_eq!(t.head(&child_session_id(ROOT, &call.id)).owner, Some(owner));
}

#[test]
fn a_session_the_parent_did_not_create_is_never_adopted_as_its_child() {
    let t = Tree::new();
    let call = research(&t.model, "alpha");
    let id = child_session_id(ROOT, &call.id);
    // Someone with the API token made a session with the child's id beforehand.
    block(
        t.child
            .create(CreateSession::new(&id, "coordinator", "mine")),
    )
    .unwrap();
    let before = t.head(&id);
    t.model.calls(vec![call]);
    t.start("coordinator", "research alpha");
    t.model.text("The research could not start.");
    assert_eq!(t.drive_parent(), Progress::Idle(SessionStatus::Completed));
    let results = t.tool_messages(ROOT);
    assert_eq!(results[0].1["code"], "subagent_dispatch_failed");
    assert!(
        results[0].1["error"]
            .as_str()
            .unwrap()
            .contains("not adopted"),
        "{results:?}"
    );
    let after = t.head(&id);
    assert_eq!((after.parent, after.version), (None, before.version));
}

#[test]
fn a_user_may_not_choose_a_sub_agents_session_id() {
    let t = Tree::new();
    let user = helix_edge_core::store::Owner {
        subject: "ann".into(),
        tenant: None,
    };
    let taken = child_session_id("someone-elses", "call_1");
    let refused = block(t.parent.create(CreateSession {
        owner: Some(user.clone()),
        ..CreateSession::new(&taken, "coordinator", "go")
    }));
    assert!(
        matches!(&refused, Err(RunError::Invalid(why)) if why.contains("'.sub-'")),
        "{refused:?}"
    );
    assert!(
        block(t.store.load(&taken)).unwrap().is_none(),
        "nothing made"
    );
    block(t.parent.create(CreateSession {
        owner: Some(user),
        ..CreateSession::new("ann.notes", "coordinator", "go")
    }))
    .unwrap();
}
