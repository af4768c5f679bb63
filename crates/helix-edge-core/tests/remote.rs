//! Remote sub-agents in the pure core: a parent's remote sub-agent call becomes a session
//! of another deployment (here: a second runner over a store of its own, reached through
//! a [`Remotes`] that calls its API operations as the platform's HTTP client does). The
//! parent polls it, surfaces its approvals at the root and forwards their answers,
//! passes on interrupt and abort, finds the same session after a crash, and fails the
//! call with a classified error when the remote is down, answers garbage or is too slow.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

mod support;

use futures::future::LocalBoxFuture;
use helix_edge_core::agent::{Agent, Agents};
use helix_edge_core::api::ToolResultBody;
use helix_edge_core::auth::{Caller, Principal};
use helix_edge_core::chunk::SuspendReason;
use helix_edge_core::error::ToolError;
use helix_edge_core::host::{Host, ManualHost};
use helix_edge_core::journal::MemoryJournal;
use helix_edge_core::message::Message;
use helix_edge_core::model::OneModel;
use helix_edge_core::runner::waits::{
    MAX_FAILURES, MIN_POLL_MS, RemoteAnswer, RemoteError, RemoteOrder, RemoteView, Remotes,
};
use helix_edge_core::runner::{
    CreateSession, Progress, Routed, RunError, Runner, RunnerConfig, Submission, WaitKind,
    child_session_id,
};
use helix_edge_core::scripted::ScriptedModel;
use helix_edge_core::store::{
    ChildStatus, MemoryStore, Owner, PendingKind, SessionStatus, Store, StoreError,
};
use helix_edge_core::tool::{RemoteAgent, Tool};
use schemars::JsonSchema;
use serde_json::{Value, json};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;
use support::block;

const ROOT: &str = "root";
const TIMEOUT_MS: u64 = 120_000;

type R = Runner<Rc<MemoryStore>>;

/// Input of the remote tool.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct Task {
    /// What to do.
    task: String,
}

/// How the remote deployment misbehaves.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    None,
    Down,
    Garbage,
}

/// Another deployment: its own runner and store, reached through its API operations.
struct Deployment {
    runner: R,
    fault: Cell<Fault>,
    /// Every create request, with whether it created the session.
    creates: RefCell<Vec<(String, bool)>>,
    orders: RefCell<Vec<(String, RemoteOrder)>>,
    /// Every answer it was sent.
    answers: RefCell<Vec<ToolResultBody>>,
}

impl Deployment {
    fn check(&self) -> Result<(), RemoteError> {
        match self.fault.get() {
            Fault::None => Ok(()),
            Fault::Down => Err(RemoteError::Unavailable("connection refused".into())),
            Fault::Garbage => Err(RemoteError::Invalid("its session view is not JSON".into())),
        }
    }
}

impl Remotes for Deployment {
    fn start<'a>(
        &'a self,
        remote: &'a RemoteAgent,
        child_id: &'a str,
        message: &'a str,
    ) -> LocalBoxFuture<'a, Result<(), RemoteError>> {
        Box::pin(async move {
            self.check()?;
            let created = self
                .runner
                .create(CreateSession::new(child_id, remote.agent(), message))
                .await;
            let fresh = match created {
                Ok(_) => true,
                Err(RunError::Store(StoreError::Exists(_))) => false, // 409: found
                Err(e) => return Err(RemoteError::Rejected(e.to_string())),
            };
            self.creates.borrow_mut().push((child_id.into(), fresh));
            Ok(())
        })
    }

    fn view<'a>(
        &'a self,
        _: &'a RemoteAgent,
        child_id: &'a str,
    ) -> LocalBoxFuture<'a, Result<RemoteView, RemoteError>> {
        Box::pin(async move {
            self.check()?;
            let loaded = self.runner.store().load(child_id).await.unwrap();
            let Some(loaded) = loaded else {
                return Err(RemoteError::Rejected("HTTP 404".into()));
            };
            let view = helix_edge_core::api::SessionView::from(loaded);
            let mut view = RemoteView::parse(&serde_json::to_string(&view).unwrap())?;
            if view.status == SessionStatus::Completed && view.output.is_none() {
                let messages = self
                    .runner
                    .store()
                    .messages(child_id, 0, 100)
                    .await
                    .unwrap();
                let text = messages.iter().rev().find_map(|m| match m {
                    Message::Assistant { content, .. } => Some(content.clone()),
                    _ => None,
                });
                view.output = Some(json!({ "text": text }));
            }
            Ok(view)
        })
    }

    fn order<'a>(
        &'a self,
        _: &'a RemoteAgent,
        child_id: &'a str,
        order: RemoteOrder,
    ) -> LocalBoxFuture<'a, Result<(), RemoteError>> {
        Box::pin(async move {
            self.orders.borrow_mut().push((child_id.into(), order));
            self.check()?;
            let done = match order {
                RemoteOrder::Abort => self.runner.abort(child_id, None).await,
                RemoteOrder::Interrupt => self.runner.interrupt(child_id, None).await,
                RemoteOrder::Resume => self.runner.resume(child_id).await.map(drop),
            };
            match done {
                Ok(()) | Err(RunError::Busy(_) | RunError::NotResumable(_)) => Ok(()),
                Err(e) => Err(RemoteError::Rejected(e.to_string())),
            }
        })
    }

    fn answer<'a>(
        &'a self,
        _: &'a RemoteAgent,
        child_id: &'a str,
        body: &'a Value,
    ) -> LocalBoxFuture<'a, Result<RemoteAnswer, RemoteError>> {
        Box::pin(async move {
            self.check()?;
            let body: ToolResultBody = serde_json::from_value(body.clone()).unwrap();
            self.answers.borrow_mut().push(body.clone());
            let decided = body.decided_by();
            let submission = body.into_submission().unwrap();
            // The deployment's token: the API token there.
            let answered = self
                .runner
                .submit_on_behalf(child_id, submission, &Principal::Admin, decided)
                .await;
            Ok(match answered {
                Ok(_) => RemoteAnswer::Taken,
                Err(RunError::ToolCallNotFound(_)) => RemoteAnswer::NotThere,
                Err(e) => RemoteAnswer::Refused(e),
            })
        })
    }
}

struct Setup {
    host: Rc<ManualHost>,
    store: Rc<MemoryStore>,
    journal: Rc<MemoryJournal>,
    model: Rc<ScriptedModel>,
    remote_model: Rc<ScriptedModel>,
    remote: Rc<Deployment>,
    parent: R,
}

fn lead() -> Agent {
    let remote = RemoteAgent::new("assistant").url_var("HELPER_URL");
    Agent::builder("lead")
        .system_prompt("Delegate.")
        .tool(
            Tool::remote_subagent::<Task>("delegate", "Ask the remote assistant", remote)
                .timeout(Duration::from_millis(TIMEOUT_MS)),
        )
        .build()
        .unwrap()
}

impl Setup {
    fn new() -> Self {
        Self::with_remote(support::agents::assistant().unwrap())
    }

    /// A parent whose remote deployment's `assistant` is `assistant`.
    fn with_remote(assistant: Agent) -> Self {
        let host = Rc::new(ManualHost::new(1_795_000_000_000, ""));
        let remote_model = Rc::new(ScriptedModel::new());
        let remote_agents = Agents::new().with(assistant).unwrap();
        let remote = Rc::new(Deployment {
            runner: Runner::new(
                Rc::new(MemoryStore::new()),
                remote_agents,
                Rc::new(OneModel(remote_model.clone())),
                Rc::new(MemoryJournal::new()),
                host.clone(),
                RunnerConfig::new("remote"),
            ),
            fault: Cell::new(Fault::None),
            creates: RefCell::new(Vec::new()),
            orders: RefCell::new(Vec::new()),
            answers: RefCell::new(Vec::new()),
        });
        let store = Rc::new(MemoryStore::new());
        let journal = Rc::new(MemoryJournal::new());
        let model = Rc::new(ScriptedModel::new());
        let parent = Self::parent(&store, &journal, &model, &host, &remote, "parent");
        Self {
            host,
            store,
            journal,
            model,
            remote_model,
            remote,
            parent,
        }
    }

    fn parent(
        store: &Rc<MemoryStore>,
        journal: &Rc<MemoryJournal>,
        model: &Rc<ScriptedModel>,
        host: &Rc<ManualHost>,
        remote: &Rc<Deployment>,
        instance: &str,
    ) -> R {
        Runner::new(
            store.clone(),
            Agents::new().with(lead()).unwrap(),
            Rc::new(OneModel(model.clone())),
            journal.clone(),
            host.clone(),
            RunnerConfig::new(instance),
        )
        .with_waits([WaitKind::remote(remote.clone())])
    }

    /// A new process of the parent's deployment: same storage, nothing in memory.
    fn restart(&mut self) {
        self.parent = Self::parent(
            &self.store,
            &self.journal,
            &self.model,
            &self.host,
            &self.remote,
            "parent-2",
        );
    }

    /// The lead calls the remote tool once with `task`; returns the remote session's id.
    fn delegate(&self, task: &str) -> String {
        let call = self.model.call("delegate", json!({ "task": task }));
        self.model.calls(vec![call.clone()]);
        block(self.parent.create(CreateSession::new(ROOT, "lead", "go"))).unwrap();
        child_session_id(ROOT, &call.id)
    }

    fn drive(&self) -> Progress {
        block(self.parent.drive(ROOT, 100)).unwrap()
    }

    fn drive_remote(&self, id: &str) -> Progress {
        block(self.remote.runner.drive(id, 100)).unwrap()
    }

    fn head(&self) -> helix_edge_core::store::SessionHead {
        block(self.store.load(ROOT)).unwrap().unwrap().head
    }

    fn remote_status(&self, id: &str) -> SessionStatus {
        let loaded = block(self.remote.runner.store().load(id)).unwrap().unwrap();
        loaded.head.status
    }

    /// The tool results in the parent's transcript: (content, is_error).
    fn results(&self) -> Vec<(Value, bool)> {
        block(self.store.messages(ROOT, 0, 100))
            .unwrap()
            .into_iter()
            .filter_map(|m| match m {
                Message::Tool {
                    content, is_error, ..
                } => Some((content, is_error)),
                _ => None,
            })
            .collect()
    }

    fn now(&self) -> u64 {
        self.host.now_ms()
    }
}

fn approval(call: &str) -> Submission {
    Submission::Approval {
        tool_call_id: call.into(),
        approved: true,
        reason: None,
    }
}

#[test]
fn a_remote_session_runs_the_call_and_its_answer_becomes_the_result() {
    let s = Setup::new();
    let child = s.delegate("note milk");
    s.remote_model.calls(vec![
        s.remote_model.call("add_note", json!({"text": "milk"})),
    ]);
    s.remote_model.text("Noted: milk.");
    s.model.text("The remote noted it.");
    // The step suspends, starts the remote session and polls it a second later.
    let now = s.now();
    assert_eq!(
        s.drive(),
        Progress::Suspended {
            next_deadline: Some(now + MIN_POLL_MS)
        }
    );
    assert_eq!(
        s.head().suspended_reason,
        Some(SuspendReason::AwaitingChildren)
    );
    assert_eq!(*s.remote.creates.borrow(), vec![(child.clone(), true)]);
    let first = block(s.remote.runner.store().messages(&child, 0, 1)).unwrap();
    assert_eq!(
        first,
        vec![Message::user(json!({"task": "note milk"}).to_string())]
    );
    let records = block(s.store.subsessions(ROOT)).unwrap();
    assert_eq!(
        (records[0].child_id.as_str(), records[0].agent.as_str()),
        (child.as_str(), "assistant")
    );

    assert_eq!(
        s.drive_remote(&child),
        Progress::Idle(SessionStatus::Completed)
    );
    s.host.advance(MIN_POLL_MS);
    assert_eq!(s.drive(), Progress::Idle(SessionStatus::Completed));
    assert_eq!(s.results(), vec![(json!({"text": "Noted: milk."}), false)]);
    let records = block(s.store.subsessions(ROOT)).unwrap();
    assert_eq!(records[0].status, ChildStatus::Completed);
    // One session there, created once.
    assert_eq!(s.remote.creates.borrow().len(), 1);
}

#[test]
fn polls_back_off_while_the_remote_session_does_not_change() {
    let s = Setup::new();
    let child = s.delegate("delete /tmp/x");
    s.remote_model.calls(vec![
        s.remote_model
            .call("delete_file", json!({"path": "/tmp/x"})),
    ]);
    s.drive();
    s.drive_remote(&child); // suspended there, awaiting a human
    let mut waits = Vec::new();
    for _ in 0..6 {
        let Progress::Suspended {
            next_deadline: Some(at),
        } = s.drive()
        else {
            panic!("the parent waits");
        };
        waits.push(at - s.now());
        s.host.advance(at - s.now());
    }
    // The first poll after the remote changed is a second away; then 2, 4, 8, 15 s.
    assert_eq!(waits, vec![1_000, 2_000, 4_000, 8_000, 15_000, 15_000]);
}

#[test]
fn a_remote_approval_surfaces_at_the_root_and_its_answer_is_forwarded_once() {
    let s = Setup::new();
    let child = s.delegate("delete /tmp/x");
    let delete = s
        .remote_model
        .call("delete_file", json!({"path": "/tmp/x"}));
    s.remote_model.calls(vec![delete.clone()]);
    s.remote_model.text("Deleted.");
    s.model.text("Done.");
    s.drive();
    s.drive_remote(&child);
    // The root lists the remote's call as its own.
    let listed = block(s.parent.descendant_calls(&s.head())).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (
            listed[0].tool_call_id.as_str(),
            listed[0].tool_name.as_str()
        ),
        (delete.id.as_str(), "delete_file")
    );
    // Answered at the root: passed on to the remote, which stores it.
    assert_eq!(
        block(s.parent.submit(ROOT, approval(&delete.id))),
        Ok(Routed::Here)
    );
    assert!(s.remote.runner.has_answer(&child, &delete.id));
    assert_eq!(
        block(s.parent.submit(ROOT, approval(&delete.id))),
        Err(RunError::AlreadyResolved(delete.id.clone()))
    );
    assert_eq!(
        s.drive_remote(&child),
        Progress::Idle(SessionStatus::Completed)
    );
    s.host.advance(MIN_POLL_MS);
    assert_eq!(s.drive(), Progress::Idle(SessionStatus::Completed));
    assert_eq!(s.results(), vec![(json!({"text": "Deleted."}), false)]);
    // An id nobody has is the root's 404.
    assert_eq!(
        block(s.parent.submit(ROOT, approval("nope"))),
        Err(RunError::ToolCallNotFound("nope".into()))
    );
}

#[test]
fn a_restarted_parent_finds_the_session_it_started_and_reads_its_outcome() {
    let mut s = Setup::new();
    let child = s.delegate("note a");
    s.remote_model
        .calls(vec![s.remote_model.call("add_note", json!({"text": "a"}))]);
    s.remote_model.text("Noted.");
    s.model.text("Done.");
    s.drive();
    // The remote finishes while the parent's process is gone.
    assert_eq!(
        s.drive_remote(&child),
        Progress::Idle(SessionStatus::Completed)
    );
    s.restart();
    assert_eq!(s.drive(), Progress::Idle(SessionStatus::Completed));
    // The new process started it again: the remote found the same session (409).
    assert_eq!(
        *s.remote.creates.borrow(),
        vec![(child.clone(), true), (child.clone(), false)]
    );
    assert_eq!(s.remote_model.remaining(), 0, "nothing ran twice there");
    assert_eq!(s.results(), vec![(json!({"text": "Noted."}), false)]);
}

#[test]
fn a_remote_that_goes_down_fails_the_call_after_repeated_failures() {
    let s = Setup::new();
    let child = s.delegate("note a");
    s.model.text("The helper is unreachable.");
    s.drive();
    s.remote.fault.set(Fault::Down);
    for _ in 1..MAX_FAILURES {
        let Progress::Suspended {
            next_deadline: Some(at),
        } = s.drive()
        else {
            panic!("a failed poll is retried");
        };
        s.host.advance(at - s.now());
    }
    assert_eq!(s.drive(), Progress::Idle(SessionStatus::Completed));
    let (content, is_error) = &s.results()[0];
    assert!(is_error);
    let text = content.to_string();
    assert!(
        text.contains("subagent_remote_unavailable") || text.contains("could not be reached"),
        "{text}"
    );
    assert!(
        s.remote
            .orders
            .borrow()
            .contains(&(child, RemoteOrder::Abort))
    );
}

#[test]
fn garbage_from_the_remote_fails_the_call_at_once_and_a_refused_start_too() {
    let s = Setup::new();
    s.delegate("note a");
    s.model.text("The helper answered nonsense.");
    s.remote.fault.set(Fault::Garbage);
    assert_eq!(s.drive(), Progress::Idle(SessionStatus::Completed));
    let (content, is_error) = &s.results()[0];
    assert!(
        *is_error && content.to_string().contains("not JSON"),
        "{content}"
    );

    // An agent the remote does not have: refused, classified, the parent goes on.
    let s = Setup::new();
    let call = s.model.call("delegate", json!({"task": "x"}));
    s.model.calls(vec![call]);
    s.model.text("No such helper.");
    // The remote has `assistant` only.
    let unknown = Agent::builder("lead")
        .system_prompt("Delegate.")
        .tool(Tool::remote_subagent::<Task>(
            "delegate",
            "d",
            RemoteAgent::new("nobody"),
        ))
        .build()
        .unwrap();
    let parent = Runner::new(
        s.store.clone(),
        Agents::new().with(unknown).unwrap(),
        Rc::new(OneModel(s.model.clone())),
        s.journal.clone(),
        s.host.clone(),
        RunnerConfig::new("p"),
    )
    .with_waits([WaitKind::remote(s.remote.clone())]);
    block(parent.create(CreateSession::new(ROOT, "lead", "go"))).unwrap();
    assert_eq!(
        block(parent.drive(ROOT, 100)).unwrap(),
        Progress::Idle(SessionStatus::Completed)
    );
    let (content, is_error) = &s.results()[0];
    assert!(
        *is_error && content.to_string().contains("nobody"),
        "{content}"
    );
}

#[test]
fn a_slow_remote_times_out_and_is_aborted() {
    let s = Setup::new();
    let child = s.delegate("note a");
    s.model.text("Too slow.");
    s.drive();
    s.host.advance(TIMEOUT_MS);
    assert_eq!(s.drive(), Progress::Idle(SessionStatus::Completed));
    let (content, is_error) = &s.results()[0];
    assert!(
        *is_error && content.to_string().contains("did not finish within 120 s"),
        "{content}"
    );
    assert_eq!(s.remote_status(&child), SessionStatus::Aborted);
    let records = block(s.store.subsessions(ROOT)).unwrap();
    assert_eq!(records[0].status, ChildStatus::TimedOut);
}

#[test]
fn interrupt_resume_and_abort_are_passed_on() {
    let s = Setup::new();
    let child = s.delegate("delete /tmp/x");
    s.remote_model.calls(vec![
        s.remote_model
            .call("delete_file", json!({"path": "/tmp/x"})),
    ]);
    s.drive();
    s.drive_remote(&child);
    block(s.parent.interrupt(ROOT, None)).unwrap();
    s.drive();
    assert_eq!(s.head().status, SessionStatus::Interrupted);
    block(s.parent.resume(ROOT)).unwrap();
    block(s.parent.abort(ROOT, Some("stop".into()))).unwrap();
    let orders: Vec<RemoteOrder> = s.remote.orders.borrow().iter().map(|(_, o)| *o).collect();
    assert_eq!(
        orders,
        vec![
            RemoteOrder::Interrupt,
            RemoteOrder::Resume,
            RemoteOrder::Abort
        ]
    );
    assert_eq!(s.remote_status(&child), SessionStatus::Aborted);
}

/// A user of tenant `acme` with `roles`.
fn acme(subject: &str, roles: &[&str]) -> Principal {
    Principal::User(Caller {
        user: Owner {
            subject: subject.into(),
            tenant: Some("acme".into()),
        },
        tenant_wide: false,
        roles: roles.iter().map(|r| r.to_string()).collect(),
    })
}

#[test]
fn an_answer_to_a_remote_role_gated_call_obeys_the_approver_rule_at_the_parent() {
    // The remote deployment's assistant pays only with a `finance` approver other than
    // the session's owner; the parent session is Ann's.
    let pay = Tool::new("pay", "Pay", |_: Task2, _| async {
        Ok::<_, ToolError>(json!({"paid": true}))
    });
    let gated = Agent::builder("assistant")
        .tool(
            pay.approval_always()
                .approval_by_role("finance")
                .not_by_owner(),
        )
        .build()
        .unwrap();
    let s = Setup::with_remote(gated);
    let call = s.model.call("delegate", json!({ "task": "pay the rent" }));
    s.model.calls(vec![call.clone()]);
    let ann = Owner {
        subject: "ann".into(),
        tenant: Some("acme".into()),
    };
    let create = CreateSession {
        owner: Some(ann),
        ..CreateSession::new(ROOT, "lead", "go")
    };
    block(s.parent.create(create)).unwrap();
    let child = child_session_id(ROOT, &call.id);
    let pay_call = s.remote_model.call("pay", json!({"amount": 1}));
    s.remote_model.calls(vec![pay_call.clone()]).text("Paid.");
    s.drive();
    s.drive_remote(&child);
    // The parent lists the remote's call with who may approve it.
    let listed = block(s.parent.descendant_calls(&s.head())).unwrap();
    let pending = listed
        .iter()
        .find(|p| p.tool_call_id == pay_call.id)
        .unwrap();
    assert_eq!(pending.kind, PendingKind::Approval);
    assert_eq!(
        pending.approvers.as_ref().map(|a| a.role.as_str()),
        Some("finance")
    );

    for (who, by) in [
        ("a session token", Principal::Session(ROOT.into())),
        ("the owner, holding the role", acme("ann", &["finance"])),
        ("a member without the role", acme("cy", &["ops"])),
    ] {
        let refused = block(s.parent.submit_as(ROOT, approval(&pay_call.id), &by));
        assert!(
            matches!(&refused, Err(RunError::NotAnswerer { .. })),
            "{who}: {refused:?}"
        );
    }
    assert!(s.remote.answers.borrow().is_empty(), "nothing was sent");
    let still = block(s.remote.runner.store().load(&child))
        .unwrap()
        .unwrap();
    assert_eq!(still.head.pending.len(), 1, "the remote call still waits");

    // A holder decides; the remote is told who.
    let routed = block(s.parent.submit_as(
        ROOT,
        approval(&pay_call.id),
        &acme("bob", &["finance"]),
    ));
    assert!(matches!(routed, Ok(Routed::Here)), "{routed:?}");
    let sent = s.remote.answers.borrow();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].decided_by().map(|o| o.subject), Some("bob".into()));
    drop(sent);
    s.drive_remote(&child);
    let done = block(s.remote.runner.store().messages(&child, 0, 100)).unwrap();
    let metadata = done.iter().find_map(|m| match m {
        Message::Tool { metadata, .. } => metadata.clone(),
        _ => None,
    });
    assert_eq!(
        metadata.unwrap()["decidedBy"]["subject"],
        "bob",
        "the remote records the decider"
    );
    // Only the API token may name a decider.
    let named = ToolResultBody::ApprovalResponse {
        tool_call_id: "x".into(),
        approved: true,
        reason: None,
        decided_by: Some(Owner {
            subject: "mallory".into(),
            tenant: None,
        }),
    };
    let by_session = block(s.remote.runner.submit_on_behalf(
        &child,
        named.into_submission().unwrap(),
        &Principal::Session(child.clone()),
        Some(Owner {
            subject: "mallory".into(),
            tenant: None,
        }),
    ));
    assert!(by_session.is_err());
}

/// Input of the gated remote tool.
#[derive(Debug, serde::Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Task2 {
    amount: u32,
}
