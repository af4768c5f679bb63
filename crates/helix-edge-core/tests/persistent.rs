//! Persistent children in the pure core: an agent that declares kinds of persistent
//! child gets the companion tools; a spawn starts `{parent}-agent-{name}` (named by the
//! runtime when the model gives no name), a blocking spawn or message suspends the
//! parent until the child's turn ends, the child keeps its transcript between turns,
//! status, list and wait read the parent's records and the turns' outcomes, a
//! termination ends the child for good, a non-blocking spawn answers at once; a parent
//! that restarts while it waits resumes without starting the child again.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

mod support;

use helix_edge_core::agent::{Agent, Agents, ChildMode, PersistentChild};
use helix_edge_core::host::ManualHost;
use helix_edge_core::journal::MemoryJournal;
use helix_edge_core::message::Message;
use helix_edge_core::model::OneModel;
use helix_edge_core::runner::{
    ChildOrder, CreateSession, Progress, Routed, Runner, RunnerConfig, Submission, WaitKind,
    ended_report,
};
use helix_edge_core::scripted::ScriptedModel;
use helix_edge_core::store::{ChildStatus, MemoryStore, SessionStatus, Store};
use serde_json::{Value, json};
use std::cell::RefCell;
use std::rc::Rc;
use support::block;
use support::children::{LocalChildren, R};

const ROOT: &str = "root";

fn lead(mode: ChildMode) -> Agent {
    lead_with(mode, false)
}

fn lead_with(mode: ChildMode, wake: bool) -> Agent {
    let builder = Agent::builder("lead")
        .system_prompt("You lead a researcher.")
        .persistent_child(
            PersistentChild::new(support::agents::researcher().unwrap(), mode)
                .description("Researches topics, remembering earlier ones."),
        );
    let builder = if wake {
        builder.wake_on_child_results()
    } else {
        builder
    };
    builder.build().unwrap()
}

struct Tree {
    store: Rc<MemoryStore>,
    host: Rc<ManualHost>,
    model: Rc<ScriptedModel>,
    parent_journal: Rc<MemoryJournal>,
    parent: R,
    child: Rc<R>,
    children: Rc<LocalChildren>,
    mode: ChildMode,
    wake: bool,
    reported: RefCell<Vec<(String, u64)>>,
}

impl Tree {
    fn new(mode: ChildMode) -> Self {
        Self::with(mode, false)
    }

    fn with(mode: ChildMode, wake: bool) -> Self {
        let store = Rc::new(MemoryStore::yielding());
        let host = Rc::new(ManualHost::new(1_795_000_000_000, ""));
        let model = Rc::new(ScriptedModel::new());
        let child = Rc::new(Self::runner(
            &store,
            &host,
            &model,
            (mode, wake),
            Rc::new(MemoryJournal::new()),
            "child",
        ));
        let children = Rc::new(LocalChildren::new(child.clone(), "unstartable"));
        let parent_journal = Rc::new(MemoryJournal::new());
        let parent = Self::runner(
            &store,
            &host,
            &model,
            (mode, wake),
            parent_journal.clone(),
            "parent",
        )
        .with_children(children.clone())
        .with_waits([WaitKind::subagents(), WaitKind::persistent_children()]);
        Self {
            store,
            host,
            model,
            parent_journal,
            parent,
            child,
            children,
            mode,
            wake,
            reported: RefCell::new(Vec::new()),
        }
    }

    fn runner(
        store: &Rc<MemoryStore>,
        host: &Rc<ManualHost>,
        model: &Rc<ScriptedModel>,
        (mode, wake): (ChildMode, bool),
        journal: Rc<MemoryJournal>,
        instance: &str,
    ) -> R {
        let agents = Agents::new().with(lead_with(mode, wake)).unwrap();
        Runner::new(
            store.clone(),
            agents,
            Rc::new(OneModel(model.clone())),
            journal,
            host.clone(),
            RunnerConfig::new(instance),
        )
    }

    /// The parent's process restarts: a new runner on the same store and journal.
    fn restart_parent(&mut self) {
        let (store, host, model) = (&self.store, &self.host, &self.model);
        let journal = self.parent_journal.clone();
        self.parent = Self::runner(
            store,
            host,
            model,
            (self.mode, self.wake),
            journal,
            "parent-2",
        )
        .with_children(self.children.clone())
        .with_waits([WaitKind::subagents(), WaitKind::persistent_children()]);
    }

    fn drive_parent(&self) -> Progress {
        block(self.parent.drive(ROOT, 100)).unwrap()
    }

    /// Drives a child, then delivers its report to the parent (once per ending).
    fn drive_child(&self, id: &str) -> (Progress, bool) {
        let progress = block(self.child.drive(id, 100)).unwrap();
        let delivered = self
            .reported
            .borrow()
            .iter()
            .rev()
            .find(|(c, _)| c == id)
            .map(|(_, v)| *v);
        let head = block(self.store.load(id)).unwrap().unwrap().head;
        let mut woke = false;
        if let Some((parent, report)) = ended_report(&head, delivered) {
            assert_eq!(parent, ROOT);
            self.reported
                .borrow_mut()
                .push((id.to_string(), report.version));
            woke = block(self.parent.child_ended(ROOT, report)).unwrap();
        }
        (progress, woke)
    }

    fn status(&self, id: &str) -> SessionStatus {
        block(self.store.load(id)).unwrap().unwrap().head.status
    }

    /// The tool results in `id`'s transcript, in order.
    fn results(&self, id: &str) -> Vec<(String, Value, bool)> {
        block(self.store.messages(id, 0, 500))
            .unwrap()
            .into_iter()
            .filter_map(|m| match m {
                Message::Tool {
                    tool_name,
                    content,
                    is_error,
                    ..
                } => Some((tool_name, content, is_error)),
                _ => None,
            })
            .collect()
    }

    fn last_result(&self) -> (String, Value, bool) {
        self.results(ROOT).pop().unwrap()
    }

    fn starts(&self) -> usize {
        let orders = self.children.orders.borrow();
        orders
            .iter()
            .filter(|(_, o)| matches!(o, ChildOrder::Start { .. }))
            .count()
    }
}

const CHILD: &str = "root-agent-researcher-1";

/// A lead that started a non-blocking helper with `message` and finished its run.
fn background(wake: bool, message: &str) -> Tree {
    let t = Tree::with(ChildMode::NonBlocking, wake);
    spawn(
        &t.model,
        json!({ "agentType": "researcher", "message": message }),
    );
    t.model.text("Started it.");
    block(t.parent.create(CreateSession::new(ROOT, "lead", "go"))).unwrap();
    assert_eq!(t.drive_parent(), Progress::Idle(SessionStatus::Completed));
    t
}

fn spawn(model: &ScriptedModel, args: Value) {
    model.calls(vec![model.call("companion__spawnAgent", args)]);
}

#[test]
fn companion_tools_are_injected_and_reserved() {
    let names = |mode| {
        lead(mode)
            .tools()
            .iter()
            .map(|t| t.name().to_string())
            .collect::<Vec<_>>()
    };
    let blocking = names(ChildMode::Blocking);
    assert_eq!(
        blocking,
        [
            "companion__spawnAgent",
            "companion__sendMessage",
            "companion__listChildren",
            "companion__getChildStatus",
            "companion__terminateChild",
            "companion__waitForResult"
        ]
    );
    assert!(
        !names(ChildMode::NonBlocking).contains(&"companion__waitForResult".to_string()),
        "waitForResult only with a blocking kind of child"
    );
    let spawn = lead(ChildMode::Blocking);
    let schema = spawn.tools()[0].input_schema();
    assert_eq!(
        schema["properties"]["agentType"]["enum"],
        json!(["researcher"])
    );
    assert_eq!(schema["required"], json!(["agentType", "message"]));
    let reserved = Agent::builder("x")
        .tool(helix_edge_core::tool::Tool::client_raw(
            "companion__mine",
            "d",
            json!({"type": "object"}),
        ))
        .build()
        .unwrap_err();
    assert_eq!(
        reserved.to_string(),
        "Tool name 'companion__mine' is reserved"
    );
}

#[test]
fn a_blocking_child_keeps_its_memory_across_turns_and_the_parent_waits_on_each() {
    let t = Tree::new(ChildMode::Blocking);
    spawn(
        &t.model,
        json!({ "agentType": "researcher", "message": "alpha" }),
    );
    block(
        t.parent
            .create(CreateSession::new(ROOT, "lead", "research alpha")),
    )
    .unwrap();
    assert!(matches!(t.drive_parent(), Progress::Suspended { .. }));
    // Named by the runtime, started once, with the call as its parent call.
    assert_eq!(t.starts(), 1);
    let child = block(t.store.load(CHILD)).unwrap().unwrap().head;
    assert_eq!(child.agent, "researcher");
    assert_eq!(child.parent.as_ref().unwrap().session_id, ROOT);

    t.model.output(json!({ "summary": "A" }));
    let (progress, woke) = t.drive_child(CHILD);
    assert_eq!(progress, Progress::Idle(SessionStatus::Completed));
    assert!(woke, "the report answers the parent's call");
    t.model.calls(vec![t.model.call(
        "companion__sendMessage",
        json!({ "name": "researcher-1", "message": "and beta?" }),
    )]);
    assert!(matches!(t.drive_parent(), Progress::Suspended { .. }));
    let results = t.results(ROOT);
    assert_eq!(
        results[0],
        (
            "companion__spawnAgent".into(),
            json!({ "name": "researcher-1", "status": "completed", "output": { "summary": "A" } }),
            false
        )
    );
    // The second turn runs in the same child session, after the first.
    assert_eq!(t.status(CHILD), SessionStatus::Active);
    let transcript = block(t.store.messages(CHILD, 0, 50)).unwrap();
    assert_eq!(transcript[0], Message::user("alpha"));
    assert!(transcript.contains(&Message::user("and beta?")));
    assert!(transcript.len() > 2, "the first turn is still there");

    t.model.output(json!({ "summary": "B" }));
    assert!(t.drive_child(CHILD).1);
    t.model.calls(vec![
        t.model.call("companion__listChildren", json!({})),
        t.model.call(
            "companion__getChildStatus",
            json!({ "name": "researcher-1" }),
        ),
        t.model.call(
            "companion__waitForResult",
            json!({ "name": "researcher-1" }),
        ),
    ]);
    t.model.text("Both done.");
    assert_eq!(t.drive_parent(), Progress::Idle(SessionStatus::Completed));
    let results = t.results(ROOT);
    let view = json!({
        "name": "researcher-1",
        "agentType": "researcher",
        "mode": "blocking",
        "sessionId": CHILD,
        "status": "completed",
        "output": { "summary": "B" },
    });
    assert_eq!(results[1].1["output"], json!({ "summary": "B" }));
    assert_eq!(results[2].1, json!({ "children": [view] }));
    assert_eq!(results[3].1, view);
    assert_eq!(
        results[4].1,
        json!({ "name": "researcher-1", "status": "completed", "output": { "summary": "B" } }),
        "a wait on a turn that ended answers at once"
    );
    let records = block(t.store.subsessions(ROOT)).unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(
        (
            records[0].name.as_deref(),
            records[0].mode,
            records[0].status
        ),
        (
            Some("researcher-1"),
            Some(ChildMode::Blocking),
            ChildStatus::Completed
        )
    );
    assert_eq!(t.starts(), 1);
}

#[test]
fn companion_calls_that_cannot_be_carried_out_are_errors_the_model_sees() {
    let t = Tree::new(ChildMode::Blocking);
    spawn(
        &t.model,
        json!({ "agentType": "researcher", "name": "scout", "message": "alpha" }),
    );
    block(t.parent.create(CreateSession::new(ROOT, "lead", "go"))).unwrap();
    t.drive_parent();
    t.model.output(json!({ "summary": "A" }));
    t.drive_child("root-agent-scout");
    t.model.calls(vec![
        t.model.call(
            "companion__spawnAgent",
            json!({ "agentType": "researcher", "name": "scout", "message": "again" }),
        ),
        t.model.call(
            "companion__sendMessage",
            json!({ "name": "nobody", "message": "hi" }),
        ),
        t.model
            .call("companion__getChildStatus", json!({ "name": "Bad Name" })),
    ]);
    t.model.calls(vec![t.model.call(
        "companion__terminateChild",
        json!({ "name": "scout", "reason": "done" }),
    )]);
    t.model.calls(vec![t.model.call(
        "companion__sendMessage",
        json!({ "name": "scout", "message": "still there?" }),
    )]);
    t.model.text("Stopped.");
    assert_eq!(t.drive_parent(), Progress::Idle(SessionStatus::Completed));
    let results = t.results(ROOT);
    let error = |i: usize| (results[i].1["code"].clone(), results[i].2);
    assert_eq!(
        error(1),
        (json!("tool_input_invalid"), true),
        "{:?}",
        results[1]
    );
    assert!(results[1].1.to_string().contains("exists already"));
    assert!(results[2].1.to_string().contains("Children: scout"));
    assert_eq!(
        error(3),
        (json!("tool_input_invalid"), true),
        "the schema refuses the name"
    );
    assert_eq!(
        results[4].1,
        json!({ "name": "scout", "status": "terminated" })
    );
    assert_eq!(t.status("root-agent-scout"), SessionStatus::Aborted);
    assert!(results[5].1.to_string().contains("was terminated"));
    let records = block(t.store.subsessions(ROOT)).unwrap();
    assert_eq!(records[0].status, ChildStatus::Terminated);
}

#[test]
fn a_non_blocking_spawn_answers_at_once_and_its_turn_is_read_later() {
    let t = background(false, "alpha");
    assert_eq!(
        t.results(ROOT)[0].1,
        json!({ "name": "researcher-1", "sessionId": CHILD, "status": "running" })
    );
    assert_eq!(t.status(CHILD), SessionStatus::Active);
    t.model.output(json!({ "summary": "A" }));
    let (_, woke) = t.drive_child(CHILD);
    assert!(!woke, "a finished parent is not woken unless configured to");
    t.model.calls(vec![t.model.call(
        "companion__getChildStatus",
        json!({ "name": "researcher-1" }),
    )]);
    t.model.text("It found A.");
    block(t.parent.send_message(ROOT, "how did it go?".into())).unwrap();
    assert_eq!(t.drive_parent(), Progress::Idle(SessionStatus::Completed));
    let (_, status, _) = t.last_result();
    assert_eq!(
        (status["status"].clone(), status["output"].clone()),
        (json!("completed"), json!({ "summary": "A" }))
    );
}

#[test]
fn a_parent_restarted_while_it_waits_resumes_without_starting_the_child_again() {
    let mut t = Tree::new(ChildMode::Blocking);
    spawn(
        &t.model,
        json!({ "agentType": "researcher", "message": "alpha" }),
    );
    block(t.parent.create(CreateSession::new(ROOT, "lead", "go"))).unwrap();
    assert!(matches!(t.drive_parent(), Progress::Suspended { .. }));
    t.restart_parent();
    assert!(matches!(t.drive_parent(), Progress::Suspended { .. }));
    // The new process re-sends its start (idempotent): the child is the same session.
    assert_eq!(
        block(t.store.load(CHILD)).unwrap().unwrap().head.run.turn,
        1
    );
    t.model.output(json!({ "summary": "A" }));
    assert!(t.drive_child(CHILD).1);
    t.model.text("Done.");
    assert_eq!(t.drive_parent(), Progress::Idle(SessionStatus::Completed));
    assert_eq!(t.results(ROOT)[0].1["output"], json!({ "summary": "A" }));
    assert_eq!(t.results(CHILD).len(), 1, "the child ran its turn once");
}

/// The notice the model saw last, if any.
fn notice_seen(model: &ScriptedModel) -> Option<String> {
    let seen = model.seen();
    seen.last()?.messages.iter().rev().find_map(|m| match m {
        Message::User { content, .. } if content.to_string().contains("[Notice]") => {
            Some(content.to_string())
        }
        _ => None,
    })
}

#[test]
fn a_non_blocking_childs_ended_turn_is_a_notice_at_the_parents_next_step() {
    // Not configured to wake: the notice waits for the parent's next run.
    let t = background(false, "alpha");
    t.model.output(json!({ "summary": "A" }));
    assert!(!t.drive_child(CHILD).1);
    assert_eq!(t.status(ROOT), SessionStatus::Completed);
    t.model.text("It found A.");
    block(t.parent.send_message(ROOT, "anything new?".into())).unwrap();
    assert_eq!(t.drive_parent(), Progress::Idle(SessionStatus::Completed));
    let notice = notice_seen(&t.model).expect("the model was told");
    assert!(
        notice.contains("'researcher-1' finished its turn"),
        "{notice}"
    );
    assert!(notice.contains("summary"), "{notice}");
    // Told once: the record says the parent heard of it, and the notice is in the
    // transcript before the step's answer.
    t.model.text("Nothing more.");
    block(t.parent.send_message(ROOT, "and now?".into())).unwrap();
    t.drive_parent();
    let last = t.model.seen().pop().unwrap();
    let notices = last
        .messages
        .iter()
        .filter(|m| matches!(m, Message::User { content, .. } if content.to_string().contains("[Notice]")))
        .count();
    assert_eq!(notices, 1);
    let records = block(t.store.subsessions(ROOT)).unwrap();
    assert_eq!(records[0].status, ChildStatus::Completed);

    // Configured to wake: the notice starts a run of the finished parent.
    let t = background(true, "alpha");
    t.model.output(json!({ "summary": "A" }));
    assert!(t.drive_child(CHILD).1, "the parent has work to do");
    assert_eq!(t.status(ROOT), SessionStatus::Active);
    t.model.text("The researcher found A.");
    assert_eq!(t.drive_parent(), Progress::Idle(SessionStatus::Completed));
    assert!(notice_seen(&t.model).is_some());
    let head = block(t.store.load(ROOT)).unwrap().unwrap().head;
    assert_eq!(head.run.turn, 2);
}

#[test]
fn a_message_to_a_running_child_interrupts_its_turn_and_starts_the_next() {
    let t = Tree::new(ChildMode::NonBlocking);
    spawn(
        &t.model,
        json!({ "agentType": "researcher", "message": "alpha" }),
    );
    t.model.calls(vec![t.model.call(
        "companion__sendMessage",
        json!({ "name": "researcher-1", "message": "beta instead" }),
    )]);
    t.model.text("Redirected it.");
    block(t.parent.create(CreateSession::new(ROOT, "lead", "go"))).unwrap();
    assert_eq!(t.drive_parent(), Progress::Idle(SessionStatus::Completed));
    assert_eq!(
        t.last_result().1,
        json!({ "name": "researcher-1", "sessionId": CHILD, "status": "running" })
    );
    // The child had not taken a step: its first turn stops at once, the second runs.
    t.model.output(json!({ "summary": "B" }));
    let (progress, _) = t.drive_child(CHILD);
    assert_eq!(progress, Progress::Idle(SessionStatus::Completed));
    let head = block(t.store.load(CHILD)).unwrap().unwrap().head;
    assert_eq!(head.run.turn, 2);
    let runs = block(t.store.runs(CHILD)).unwrap();
    assert_eq!(runs.len(), 2);
    let seen = t.model.seen().pop().unwrap();
    assert!(seen.messages.contains(&Message::user("beta instead")));
    // The ended turn is the message's: the parent's next step hears of it.
    t.model.text("B it is.");
    block(t.parent.send_message(ROOT, "news?".into())).unwrap();
    t.drive_parent();
    let notice = notice_seen(&t.model).unwrap();
    assert!(notice.contains(r#"{"summary":"B"}"#), "{notice}");
}

#[test]
fn a_running_helpers_approvals_surface_at_the_root_and_end_with_the_parent() {
    let t = background(false, "delete /tmp/x");
    let delete = t.model.call("delete_file", json!({ "path": "/tmp/x" }));
    t.model.calls(vec![delete.clone()]);
    assert!(matches!(t.drive_child(CHILD).0, Progress::Suspended { .. }));
    // The root lists the helper's approval, and takes the answer for it.
    let root = block(t.store.load(ROOT)).unwrap().unwrap().head;
    let listed = block(t.parent.descendant_calls(&root)).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].tool_call_id, delete.id);
    let approve = Submission::Approval {
        tool_call_id: delete.id.clone(),
        approved: true,
        reason: None,
    };
    let Routed::Descendants { children, .. } =
        block(t.parent.submit(ROOT, approve.clone())).unwrap()
    else {
        panic!("the answer is passed down");
    };
    assert_eq!(children, [CHILD]);
    assert_eq!(block(t.child.submit(CHILD, approve)).unwrap(), Routed::Here);
    t.model.calls(vec![
        t.model.call("delete_file", json!({ "path": "/tmp/y" })),
    ]);
    assert!(matches!(t.drive_child(CHILD).0, Progress::Suspended { .. }));
    // The parent is aborted: its helpers end with it.
    block(t.parent.abort(ROOT, None)).unwrap();
    assert_eq!(t.status(CHILD), SessionStatus::Aborted);
}

#[test]
fn two_spawns_of_one_name_in_a_step_start_one_child() {
    let t = Tree::new(ChildMode::NonBlocking);
    let twin = |message: &str| {
        t.model.call(
            "companion__spawnAgent",
            json!({ "agentType": "researcher", "name": "twin", "message": message }),
        )
    };
    t.model.calls(vec![twin("one"), twin("two")]);
    t.model.text("Started.");
    block(t.parent.create(CreateSession::new(ROOT, "lead", "go"))).unwrap();
    assert_eq!(t.drive_parent(), Progress::Idle(SessionStatus::Completed));
    let results = t.results(ROOT);
    assert_eq!(results[0].1["status"], json!("running"));
    assert_eq!(results[1].1["code"], json!("tool_input_invalid"));
    assert!(
        results[1]
            .1
            .to_string()
            .contains("Another call of this step")
    );
    assert_eq!(t.starts(), 1);
    let first = block(t.store.messages("root-agent-twin", 0, 1)).unwrap();
    assert_eq!(first, vec![Message::user("one")]);
}

#[test]
fn a_message_to_a_helper_waiting_on_an_approval_starts_when_that_turn_ends() {
    let t = background(false, "delete /tmp/x");
    let delete = t.model.call("delete_file", json!({ "path": "/tmp/x" }));
    t.model.calls(vec![delete.clone()]);
    assert!(matches!(t.drive_child(CHILD).0, Progress::Suspended { .. }));
    // Two messages while the helper waits: the first is queued, the second refused.
    let send = |message: &str| {
        t.model.call(
            "companion__sendMessage",
            json!({ "name": "researcher-1", "message": message }),
        )
    };
    t.model.calls(vec![send("beta next")]);
    t.model.calls(vec![send("gamma too")]);
    t.model.text("Queued.");
    block(t.parent.send_message(ROOT, "go on".into())).unwrap();
    assert_eq!(t.drive_parent(), Progress::Idle(SessionStatus::Completed));
    let results = t.results(ROOT);
    assert_eq!(results[1].1["status"], json!("running"), "{:?}", results[1]);
    assert_eq!(results[2].1["code"], json!("subagent_dispatch_failed"));
    assert!(results[2].1.to_string().contains("another message waits"));
    assert_eq!(t.status(CHILD), SessionStatus::Active);
    // The approval is answered: the turn finishes, then the queued one runs.
    let approve = Submission::Approval {
        tool_call_id: delete.id.clone(),
        approved: true,
        reason: None,
    };
    assert_eq!(block(t.child.submit(CHILD, approve)).unwrap(), Routed::Here);
    t.model.output(json!({ "summary": "deleted" }));
    t.model.output(json!({ "summary": "beta" }));
    let (progress, _) = t.drive_child(CHILD);
    assert_eq!(progress, Progress::Idle(SessionStatus::Completed));
    let runs = block(t.store.runs(CHILD)).unwrap();
    assert_eq!(runs.len(), 2, "{runs:?}");
    let transcript = block(t.store.messages(CHILD, 0, 50)).unwrap();
    assert!(transcript.contains(&Message::user("beta next")));
    assert!(!transcript.contains(&Message::user("gamma too")));
    let deletes = t
        .results(CHILD)
        .iter()
        .filter(|(name, _, _)| name == "delete_file")
        .count();
    assert_eq!(
        deletes, 1,
        "the approved call ran once, with nothing left unanswered"
    );
}
