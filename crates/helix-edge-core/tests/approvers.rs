//! Approvals by someone else (separation of duties): a tool whose approval needs a role
//! takes its answer only from a holder of the role in the owner's tenant (never the
//! owner, where the tool says so) or the API token; every other answer is refused (403)
//! with nothing changed, and the one that stands records who decided — on the result's
//! metadata, the stream's `tool_end` and the log line.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

use helix_edge_core::agent::{Agent, Agents};
use helix_edge_core::auth::{Caller, Principal};
use helix_edge_core::chunk::ChunkBody;
use helix_edge_core::error::ToolError;
use helix_edge_core::message::Message;
use helix_edge_core::runner::{CreateSession, Progress, Routed, RunError, Submission};
use helix_edge_core::store::{Approvers, Owner, SessionStatus};
use helix_edge_core::testing::{SESSION, Scenario, TestRunner, block, chunks_of, drive};
use helix_edge_core::tool::Tool;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use std::cell::Cell;
use std::rc::Rc;

#[derive(Deserialize, JsonSchema)]
struct Invoice {
    #[allow(dead_code)]
    amount: u32,
}

fn owner(subject: &str, tenant: &str) -> Owner {
    Owner {
        subject: subject.into(),
        tenant: Some(tenant.into()),
    }
}

fn user(subject: &str, tenant: &str, roles: &[&str]) -> Principal {
    Principal::User(Caller {
        user: owner(subject, tenant),
        tenant_wide: false,
        roles: roles.iter().map(|r| r.to_string()).collect(),
    })
}

/// A treasurer whose `pay_invoice` needs a `finance` approver other than the owner, and
/// whose `archive` any approver may approve; with a count of the payments made.
fn world() -> (Scenario, Rc<Cell<u32>>) {
    let paid = Rc::new(Cell::new(0));
    let count = paid.clone();
    let pay = Tool::new("pay_invoice", "Pay", move |_: Invoice, _| {
        let count = count.clone();
        async move {
            count.set(count.get() + 1);
            Ok::<_, ToolError>(json!({"paid": true}))
        }
    });
    let archive = Tool::new("archive", "Archive", |_: Invoice, _| async {
        Ok::<_, ToolError>(json!({"archived": true}))
    });
    let agent = Agent::builder("treasurer")
        .tool(
            pay.approval_always()
                .approval_by_role("finance")
                .not_by_owner(),
        )
        .tool(archive.approval_always())
        .build()
        .unwrap();
    (Scenario::new(Agents::new().with(agent).unwrap()), paid)
}

/// Ann's session (tenant `acme`), suspended on `tool`'s call; its id.
fn waiting(s: &Scenario, r: &TestRunner, tool: &str) -> String {
    let call = s.model.call(tool, json!({"amount": 120}));
    s.model.calls(vec![call.clone()]).text("Done.");
    let create = CreateSession {
        owner: Some(owner("ann", "acme")),
        ..CreateSession::new(SESSION, "treasurer", "pay it")
    };
    block(r.create(create)).unwrap();
    assert!(matches!(drive(r), Progress::Suspended { .. }));
    call.id
}

/// The denial's text on the stream's `tool_end` (what the model is told, too).
fn denial_seen(s: &Scenario) -> String {
    chunks_of(&s.journal.events())
        .into_iter()
        .find_map(|c| match c {
            ChunkBody::ToolEnd {
                success: false,
                error,
                ..
            } => error,
            _ => None,
        })
        .unwrap_or_default()
}

fn approval(call: &str, approved: bool) -> Submission {
    Submission::Approval {
        tool_call_id: call.into(),
        approved,
        reason: None,
    }
}

#[test]
fn a_role_gated_approval_is_a_holders_and_records_who_approved() {
    let (s, paid) = world();
    let r = s.runner("p1");
    let call = waiting(&s, &r, "pay_invoice");
    let pending = &s.session().head.pending[0];
    let finance = Approvers {
        role: "finance".into(),
        not_owner: true,
    };
    assert_eq!(pending.approvers.as_ref(), Some(&finance));

    let refused = [
        (
            "the owner, holding the role",
            user("ann", "acme", &["finance"]),
        ),
        ("a member without it", user("cy", "acme", &["ops"])),
        (
            "a holder of another tenant",
            user("eve", "globex", &["finance"]),
        ),
        ("a session token", Principal::Session(SESSION.into())),
    ];
    for (who, by) in refused {
        let err = block(r.submit_as(SESSION, approval(&call, true), &by)).unwrap_err();
        assert!(
            matches!(&err, RunError::NotAnswerer { who, .. } if who.contains("'finance' other than")),
            "{who}: {err:?}"
        );
        assert_eq!(
            helix_edge_core::api::ApiError::from(err).status,
            403,
            "{who}"
        );
    }
    assert_eq!(
        drive(&r),
        Progress::Suspended {
            next_deadline: None
        }
    );
    assert_eq!(paid.get(), 0, "nothing changed: the call still waits");

    let bob = user("bob", "acme", &["ops", "finance"]);
    let routed = block(r.submit_as(SESSION, approval(&call, true), &bob)).unwrap();
    assert_eq!(routed, Routed::Here);
    let again = block(r.submit_as(SESSION, approval(&call, false), &bob)).unwrap_err();
    assert!(matches!(again, RunError::AlreadyResolved(_)));
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    assert_eq!(paid.get(), 1, "it ran once");

    let bob_owner = json!({"subject": "bob", "tenant": "acme"});
    let result = s.messages().into_iter().find_map(|m| match m {
        Message::Tool { metadata, .. } => metadata,
        _ => None,
    });
    assert_eq!(result.unwrap()["decidedBy"], bob_owner, "in the transcript");
    let ended = chunks_of(&s.journal.events())
        .into_iter()
        .find_map(|c| match c {
            ChunkBody::ToolEnd { decided_by, .. } => decided_by,
            _ => None,
        });
    assert_eq!(ended, Some(owner("bob", "acme")), "on tool_end");
    let logs = s.host.logs();
    let submitted = logs
        .iter()
        .find(|(e, _)| e == "tool_call_submitted")
        .unwrap();
    assert_eq!(submitted.1["decidedBy"], "bob", "in the log line");
}

#[test]
fn the_api_token_decides_any_approval_and_a_denial_records_its_user() {
    let (s, paid) = world();
    let r = s.runner("p1");
    let call = waiting(&s, &r, "pay_invoice");
    block(r.submit_as(SESSION, approval(&call, false), &Principal::Admin)).unwrap();
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    assert_eq!(paid.get(), 0);
    let ended = chunks_of(&s.journal.events())
        .into_iter()
        .find_map(|c| match c {
            ChunkBody::ToolEnd {
                success: false,
                decided_by,
                ..
            } => Some(decided_by),
            _ => None,
        });
    assert_eq!(ended, Some(None), "the API token is no user");
    assert_eq!(denial_seen(&s), "Tool call was not approved by the user");

    // A holder of the role denies: the model is told an approver did, by their role.
    let (s, paid) = world();
    let r = s.runner("p1");
    let call = waiting(&s, &r, "pay_invoice");
    let bob = user("bob", "acme", &["finance"]);
    block(r.submit_as(SESSION, approval(&call, false), &bob)).unwrap();
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    assert_eq!(paid.get(), 0);
    assert_eq!(
        denial_seen(&s),
        "Tool call was not approved by an approver holding the role 'finance'"
    );

    // A call any approver may approve: its owner's decision is recorded; a stranger's
    // (let in only by a role another call needs) is refused.
    let (s, _) = world();
    let r = s.runner("p1");
    let call = waiting(&s, &r, "archive");
    assert!(s.session().head.pending[0].approvers.is_none());
    let stranger = user("bob", "acme", &["finance"]);
    let err = block(r.submit_as(SESSION, approval(&call, false), &stranger)).unwrap_err();
    assert!(matches!(err, RunError::NotAnswerer { .. }), "{err:?}");
    let ann = user("ann", "acme", &[]);
    block(r.submit_as(SESSION, approval(&call, false), &ann)).unwrap();
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    let ended = chunks_of(&s.journal.events())
        .into_iter()
        .find_map(|c| match c {
            ChunkBody::ToolEnd { decided_by, .. } => decided_by,
            _ => None,
        });
    assert_eq!(ended, Some(owner("ann", "acme")));
}
