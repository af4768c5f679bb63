//! The queries across sessions read from the queryable record — the approvals inbox
//! (`GET /v1/inbox`), the session list for a user, token usage (`GET /v1/usage`):
//! sessions committed by a session object's store and replicated to a SQLite with the
//! D1 schema the library ships, then read as the worker reads them.

#![cfg(not(target_arch = "wasm32"))]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

#[path = "support/lite.rs"]
mod lite;
#[path = "support/record.rs"]
mod record;
#[path = "support/replicated.rs"]
mod replicated;

use helix_edge_core::api::{InboxPage, InboxQuery};
use helix_edge_core::model::Usage;
use helix_edge_core::sqlite::{Db, text};
use helix_edge_core::store::{Approvers, Owner, PendingKind};
use lite::Lite;
use replicated::*;
use serde_json::json;
use std::rc::Rc;

fn inbox(d1: &Lite, pairs: &[(&str, &str)]) -> InboxPage {
    let pairs: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let query = InboxQuery::parse(&pairs).unwrap();
    let (sql, args) = query.statement();
    InboxPage::from_rows(&d1.query(sql, &args).unwrap(), query.limit).unwrap()
}

fn calls(page: &InboxPage) -> Vec<(&str, &str)> {
    page.items
        .iter()
        .map(|i| (i.session_id.as_str(), i.tool_call_id.as_str()))
        .collect()
}

fn world() -> Rc<Lite> {
    let d1 = Lite::d1();
    use PendingKind::{Approval, Child, Client};
    session(
        &d1,
        "s_a",
        "assistant",
        vec![call("a1", "delete_file", Approval, 10)],
    );
    session(
        &d1,
        "s_b",
        "assistant",
        vec![
            call("b1", "delete_file", Approval, 30),
            call("b2", "ask_user", Client, 30),
        ],
    );
    session(
        &d1,
        "s_c",
        "coordinator",
        vec![call("c1", "research", Child, 40)],
    );
    session(
        &d1,
        "s_d",
        "helper",
        vec![call("d1", "delete_file", Approval, 20)],
    );
    session(&d1, "s_e", "assistant", vec![]);
    d1
}

#[test]
fn the_inbox_lists_the_calls_waiting_on_a_person_newest_first() {
    let d1 = world();
    let all = inbox(&d1, &[]);
    assert_eq!(
        calls(&all),
        [("s_b", "b2"), ("s_b", "b1"), ("s_d", "d1"), ("s_a", "a1")]
    );
    assert!(all.next_cursor.is_none());
    let item = serde_json::to_value(&all.items[0]).unwrap();
    assert_eq!(
        item,
        json!({"sessionId": "s_b", "agent": "assistant", "toolCallId": "b2",
               "toolName": "ask_user", "arguments": {"path": "/b2"}, "kind": "client",
               "waitingSince": 30, "deadline": 300_030})
    );
    let approval = serde_json::to_value(&all.items[1]).unwrap();
    assert!(approval.get("deadline").is_none(), "{approval}");
}

#[test]
fn the_inbox_filters_by_agent_tool_and_kind() {
    let d1 = world();
    let only = |pairs: &[(&str, &str)]| {
        let page = inbox(&d1, pairs);
        calls(&page)
            .iter()
            .map(|(_, c)| c.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(only(&[("agent", "helper")]), ["d1"]);
    assert_eq!(only(&[("tool", "delete_file")]), ["b1", "d1", "a1"]);
    assert_eq!(only(&[("kind", "client")]), ["b2"]);
    assert_eq!(
        only(&[("kind", "approval"), ("agent", "assistant")]),
        ["b1", "a1"]
    );
    assert!(
        only(&[("agent", "coordinator")]).is_empty(),
        "a child's call is not a person's"
    );
}

#[test]
fn the_inbox_pages_every_call_once_in_order() {
    let d1 = world();
    let all = calls(&inbox(&d1, &[]))
        .iter()
        .map(|(s, c)| format!("{s}/{c}"))
        .collect::<Vec<_>>();
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut pairs = vec![("limit", "1")];
        if let Some(c) = cursor.as_deref() {
            pairs.push(("cursor", c));
        }
        let page = inbox(&d1, &pairs);
        assert!(page.items.len() <= 1);
        seen.extend(calls(&page).iter().map(|(s, c)| format!("{s}/{c}")));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(seen, all);
}

#[test]
fn the_inbox_reads_only_the_waiting_sessions_through_their_index() {
    let d1 = world();
    let (sql, args) = InboxQuery::parse(&[]).unwrap().statement();
    let rows = d1
        .query(&format!("EXPLAIN QUERY PLAN {sql}"), &args)
        .unwrap();
    let plan: Vec<String> = rows.iter().filter_map(|r| text(r, 3)).collect();
    assert!(
        plan.iter()
            .any(|step| step.contains("USING INDEX sessions_waiting")),
        "{plan:?}"
    );
}

#[test]
fn a_user_lists_and_sees_in_the_inbox_only_what_they_reach() {
    use PendingKind::Approval;
    use helix_edge_core::api::{ListQuery, SessionSummary};
    use helix_edge_core::auth::Caller;
    let d1 = world();
    let owner = |subject: &str, tenant: Option<&str>| Owner {
        subject: subject.into(),
        tenant: tenant.map(Into::into),
    };
    let waiting = |id: &str| vec![call(&format!("{id}-c"), "delete_file", Approval, 50)];
    owned_session(
        &d1,
        "u_ann",
        "assistant",
        waiting("ann"),
        Some(owner("ann", None)),
    );
    owned_session(
        &d1,
        "u_bob",
        "assistant",
        waiting("bob"),
        Some(owner("bob", None)),
    );
    let acme = Some("acme");
    owned_session(
        &d1,
        "t_ann",
        "assistant",
        waiting("tann"),
        Some(owner("ann", acme)),
    );
    owned_session(
        &d1,
        "t_cy",
        "assistant",
        waiting("tcy"),
        Some(owner("cy", acme)),
    );
    let as_ = |subject: &str, tenant: Option<&str>, tenant_wide: bool| Caller {
        user: owner(subject, tenant),
        tenant_wide,
        roles: Vec::new(),
    };
    let inboxed = |caller: Caller| {
        let query = InboxQuery {
            caller: Some(caller),
            ..InboxQuery::parse(&[]).unwrap()
        };
        let (sql, args) = query.statement();
        let page = InboxPage::from_rows(&d1.query(sql, &args).unwrap(), query.limit).unwrap();
        let mut ids: Vec<String> = page.items.into_iter().map(|i| i.session_id).collect();
        ids.sort();
        ids
    };
    let listed = |caller: Caller| {
        let query = ListQuery {
            caller: Some(caller),
            ..ListQuery::parse(&[]).unwrap()
        };
        let (sql, args) = query.statement();
        let rows = d1.query(sql, &args).unwrap();
        let mut ids: Vec<String> = rows
            .iter()
            .map(|r| SessionSummary::from_row(r).unwrap().session_id)
            .collect();
        ids.sort();
        ids
    };
    assert_eq!(inboxed(as_("ann", None, false)), ["u_ann"]);
    assert_eq!(listed(as_("ann", None, false)), ["u_ann"]);
    assert_eq!(inboxed(as_("ann", acme, false)), ["t_ann"]);
    assert_eq!(listed(as_("ann", acme, true)), ["t_ann", "t_cy"]);
    assert_eq!(inboxed(as_("cy", acme, true)), ["t_ann", "t_cy"]);
    assert!(inboxed(as_("dan", None, false)).is_empty());
    // `?owner=` narrows to one user's sessions, within what the caller reaches; each
    // summary names its owner.
    let owned_by = |caller: Option<Caller>, subject: &str| {
        let query = ListQuery {
            caller,
            ..ListQuery::parse(&[("owner".into(), subject.into())]).unwrap()
        };
        let (sql, args) = query.statement();
        let rows = d1.query(sql, &args).unwrap();
        let mut sessions: Vec<SessionSummary> = rows
            .iter()
            .map(|r| SessionSummary::from_row(r).unwrap())
            .collect();
        sessions.sort_by(|a, b| a.session_id.cmp(&b.session_id));
        sessions
    };
    let anns = owned_by(None, "ann");
    let ids: Vec<&str> = anns.iter().map(|s| s.session_id.as_str()).collect();
    assert_eq!(ids, ["t_ann", "u_ann"]);
    assert_eq!(anns[0].owner, Some(owner("ann", acme)));
    assert_eq!(anns[1].owner, Some(owner("ann", None)));
    let cys = owned_by(Some(as_("ann", acme, true)), "cy");
    assert_eq!(cys.len(), 1, "a tenant member's sessions");
    assert!(
        owned_by(Some(as_("ann", None, false)), "bob").is_empty(),
        "not another's"
    );
    assert!(ListQuery::parse(&[("owner".into(), String::new())]).is_err());
    // An approval that needs a role is in the inbox of its holders across the owner's
    // tenant, beside what they reach.
    let mut pay = call("pay-c", "pay_invoice", Approval, 60);
    pay.approvers = Some(Approvers {
        role: "finance".into(),
        not_owner: true,
    });
    owned_session(
        &d1,
        "t_pay",
        "treasurer",
        vec![pay],
        Some(owner("ann", acme)),
    );
    let holding = |subject: &str, tenant: Option<&str>, role: &str| Caller {
        roles: vec!["ops".into(), role.into()],
        ..as_(subject, tenant, false)
    };
    assert_eq!(inboxed(holding("cy", acme, "finance")), ["t_cy", "t_pay"]);
    assert_eq!(inboxed(holding("cy", acme, "legal")), ["t_cy"]);
    assert!(inboxed(holding("eve", Some("globex"), "finance")).is_empty());
    assert_eq!(
        inboxed(holding("bo", None, "finance")),
        Vec::<String>::new()
    );
    assert_eq!(
        inboxed(as_("ann", acme, false)),
        ["t_ann", "t_pay"],
        "and its owner's"
    );
    let item = |caller: Caller| {
        let query = InboxQuery {
            caller: Some(caller),
            ..InboxQuery::parse(&[("tool".into(), "pay_invoice".into())]).unwrap()
        };
        let (sql, args) = query.statement();
        let page = InboxPage::from_rows(&d1.query(sql, &args).unwrap(), query.limit).unwrap();
        page.items.into_iter().next()
    };
    let listed_pay = item(holding("cy", acme, "finance")).unwrap();
    assert_eq!(listed_pay.approvers.unwrap().role, "finance");
    // A session no user owns is the API token's alone, whatever the roles.
    let mut unowned = call("pay-d", "pay_invoice", Approval, 61);
    unowned.approvers = Some(Approvers {
        role: "finance".into(),
        not_owner: false,
    });
    owned_session(&d1, "x_pay", "treasurer", vec![unowned], None);
    assert_eq!(
        inboxed(holding("bo", None, "finance")),
        Vec::<String>::new()
    );
    // The API token's query (no caller) sees every one.
    let all = inbox(&d1, &[]);
    assert_eq!(
        all.items.len(),
        4 + 6,
        "the world's four calls and these six"
    );
}

#[test]
fn usage_sums_the_runs_of_a_window_by_agent_day_session_or_model_and_keeps_a_user_to_theirs() {
    use helix_edge_core::api::{UsageQuery, UsageReport};
    use helix_edge_core::auth::Caller;
    let d1 = Lite::d1();
    let used = |input: u64| Usage {
        input_tokens: input,
        output_tokens: 1,
        cache_read_tokens: 2,
        cache_write_tokens: 0,
    };
    const DAY: u64 = 86_400_000;
    let day1 = 20_000 * DAY; // 2024-10-04
    let ann = Some(Owner {
        subject: "ann".into(),
        tenant: None,
    });
    used_session(
        &d1,
        "s_a",
        "assistant",
        vec![],
        ann.clone(),
        used(10),
        day1 + 5,
    );
    used_session(
        &d1,
        "s_b",
        "assistant",
        vec![],
        None,
        used(20),
        day1 + DAY + 5,
    );
    used_session(
        &d1,
        "s_c",
        "helper",
        vec![],
        ann,
        used(40),
        day1 + 2 * DAY + 5,
    );
    let report = |pairs: &[(&str, &str)], caller: Option<Caller>| {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let query = UsageQuery {
            caller,
            ..UsageQuery::parse(&pairs).unwrap()
        };
        let (sql, args) = query.statement();
        UsageReport::from_rows(&query, &d1.query(sql, &args).unwrap()).unwrap()
    };
    let groups = |r: &UsageReport| {
        r.groups
            .iter()
            .map(|g| (g.key.clone(), g.runs, g.usage.input_tokens))
            .collect::<Vec<_>>()
    };
    let by_agent = report(&[], None);
    assert_eq!(
        groups(&by_agent),
        [("assistant".into(), 2, 30), ("helper".into(), 1, 40)]
    );
    assert_eq!(
        (by_agent.total.runs, by_agent.total.usage.input_tokens),
        (3, 70)
    );
    assert_eq!(by_agent.total.usage.cache_read_tokens, 6);
    let by_day = report(&[("groupBy", "day")], None);
    assert_eq!(
        groups(&by_day),
        [
            ("2024-10-04".into(), 1, 10),
            ("2024-10-05".into(), 1, 20),
            ("2024-10-06".into(), 1, 40)
        ]
    );
    let (from, to) = ((day1 + DAY).to_string(), (day1 + 2 * DAY).to_string());
    let window = report(
        &[("groupBy", "session"), ("from", &from), ("to", &to)],
        None,
    );
    assert_eq!(
        groups(&window),
        [("s_b".into(), 1, 20)],
        "from inclusive, to exclusive"
    );
    let helper = report(&[("agent", "helper")], None);
    assert_eq!(groups(&helper), [("helper".into(), 1, 40)]);
    let anns = Caller {
        user: Owner {
            subject: "ann".into(),
            tenant: None,
        },
        tenant_wide: false,
        roles: Vec::new(),
    };
    let theirs = report(&[("groupBy", "session")], Some(anns));
    assert_eq!(
        groups(&theirs),
        [("s_a".into(), 1, 10), ("s_c".into(), 1, 40)]
    );

    // A run on two models counts in each, with that model's tokens.
    let mut both = head("s_d", "helper");
    both.run.usage = used(17);
    both.run.usage_by_model = [
        ("assistant-model".to_string(), used(12)),
        ("small-model".to_string(), used(5)),
    ]
    .into();
    both.run.started_at = day1 + 3 * DAY;
    replicated(&d1, both);
    let by_model = report(&[("groupBy", "model")], None);
    assert_eq!(
        groups(&by_model),
        [
            ("assistant-model".into(), 3, 42),
            ("helper-model".into(), 1, 40),
            ("small-model".into(), 1, 5)
        ]
    );
    assert_eq!(by_model.total.usage.input_tokens, 87);
    let helpers = report(&[("groupBy", "model"), ("agent", "helper")], None);
    assert_eq!(
        groups(&helpers),
        [
            ("assistant-model".into(), 1, 12),
            ("helper-model".into(), 1, 40),
            ("small-model".into(), 1, 5)
        ]
    );
}
