//! The notification outbox (`notify::Outbox`) in a real SQLite: what each waiting call
//! owes each sink, exactly once however often the object reconciles (or crashes in
//! between), delivered until taken, retried with doubling waits, given up after
//! `MAX_ATTEMPTS`.

#![cfg(not(target_arch = "wasm32"))] // rusqlite: native only
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

#[path = "support/lite.rs"]
mod lite;

use helix_edge_core::notify::{Delivered, EventKind, MAX_ATTEMPTS, Outbox, Waiting};
use helix_edge_core::sqlite::{Db, Owned, Row};
use helix_edge_core::store::rows::Arg;
use helix_edge_core::store::{PendingCall, PendingKind};
use serde_json::json;
use std::cell::Cell;
use std::rc::Rc;

fn call(id: &str, kind: PendingKind) -> PendingCall {
    PendingCall {
        tool_call_id: id.into(),
        tool_name: "delete_file".into(),
        arguments: json!({ "path": id }),
        kind,
        deadline: None,
        since: 1,
        output_path: None,
        approvers: None,
        request: None,
    }
}

fn waiting(calls: &[PendingCall]) -> Vec<Waiting<'_>> {
    calls
        .iter()
        .map(|call| Waiting { call, run_id: "r1" })
        .collect()
}

fn body(call: &PendingCall, run: &str, kind: EventKind, _sink: usize, key: &str) -> String {
    json!({ "key": key, "type": kind.as_str(), "call": call.tool_call_id, "run": run }).to_string()
}

#[test]
fn each_waiting_call_owes_each_sink_once_and_its_end_once() {
    let outbox = Outbox::new(lite::Lite::object());
    let calls = [
        call("a", PendingKind::Approval),
        call("b", PendingKind::Client),
    ];
    assert_eq!(
        outbox
            .reconcile("s1", &waiting(&calls), 2, 10, body)
            .unwrap(),
        4
    );
    // Reconciled again (another slice, a restart): nothing more is owed.
    assert_eq!(
        outbox
            .reconcile("s1", &waiting(&calls), 2, 20, body)
            .unwrap(),
        0
    );
    // `a` was answered: its end is owed to both sinks, once.
    assert_eq!(
        outbox
            .reconcile("s1", &waiting(&calls[1..]), 2, 30, body)
            .unwrap(),
        2
    );
    assert_eq!(
        outbox
            .reconcile("s1", &waiting(&calls[1..]), 2, 40, body)
            .unwrap(),
        0
    );
    let due = outbox.due(40).unwrap();
    let keys: Vec<&str> = due.iter().map(|d| d.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "s1:a@1:call.waiting:0",
            "s1:a@1:call.waiting:1",
            "s1:b@1:call.waiting:0",
            "s1:b@1:call.waiting:1",
            "s1:a@1:call.resolved:0",
            "s1:a@1:call.resolved:1",
        ]
    );
    let resolved: serde_json::Value = serde_json::from_str(&due[4].body).unwrap();
    assert_eq!(
        resolved,
        json!({ "key": "s1:a@1:call.resolved:0", "type": "call.resolved", "call": "a", "run": "r1" })
    );
    assert_eq!(due[5].sink, 1);
}

#[test]
fn a_failed_delivery_waits_doubling_then_is_given_up_and_a_taken_one_is_done() {
    let outbox = Outbox::new(lite::Lite::object());
    let calls = [call("a", PendingKind::Approval)];
    outbox
        .reconcile("s1", &waiting(&calls), 1, 0, body)
        .unwrap();
    let mut now = 0;
    let mut waits = Vec::new();
    for attempt in 1..=MAX_ATTEMPTS {
        let due = outbox.due(now).unwrap();
        assert_eq!(due.len(), 1, "attempt {attempt}");
        assert_eq!(due[0].attempts, attempt - 1);
        let failed = Delivered::Failed {
            status: Some(500),
            error: "HTTP 500".into(),
        };
        let given_up = outbox.record(&due[0], &failed, now).unwrap();
        assert_eq!(given_up, attempt == MAX_ATTEMPTS);
        if let Some(next) = outbox.next_due().unwrap() {
            assert!(
                outbox.due(next - 1).unwrap().is_empty(),
                "not before its time"
            );
            waits.push(next - now);
            now = next;
        }
    }
    assert_eq!(&waits[..4], [1_000, 2_000, 4_000, 8_000]);
    assert_eq!(waits.len() as u64, MAX_ATTEMPTS - 1);
    assert_eq!(outbox.next_due().unwrap(), None, "given up: nothing owed");
    let listed = outbox.list(&["https://hooks.example/x".into()]).unwrap();
    assert_eq!(listed[0]["state"], "failed");
    assert_eq!(listed[0]["attempts"], MAX_ATTEMPTS);
    assert_eq!(listed[0]["status"], 500);
    assert_eq!(listed[0]["sink"], "https://hooks.example/x");

    // Another call's notification (`a` still waits), taken at once.
    let calls = [
        call("a", PendingKind::Approval),
        call("b", PendingKind::Approval),
    ];
    outbox
        .reconcile("s1", &waiting(&calls), 1, now, body)
        .unwrap();
    let due = outbox.due(now).unwrap();
    assert_eq!(due.len(), 1);
    outbox
        .record(&due[0], &Delivered::Taken { status: 204 }, now + 5)
        .unwrap();
    let listed = outbox.list(&[]).unwrap();
    assert_eq!(listed[0]["id"], "s1:b@1:call.waiting:0");
    assert_eq!(listed[0]["state"], "sent");
    assert_eq!(listed[0]["sentAt"], now + 5);
    assert_eq!(listed[0]["sink"], serde_json::Value::Null);
    assert!(outbox.due(u64::MAX >> 12).unwrap().is_empty());
}

/// A database whose transactions fail while `broken` is set.
struct Flaky {
    db: Rc<lite::Lite>,
    broken: Cell<bool>,
}

impl Db for Flaky {
    fn query(&self, sql: &str, args: &[Arg]) -> Result<Vec<Row>, String> {
        self.db.query(sql, args)
    }
    fn atomically(&self, statements: &[Owned]) -> Result<(), String> {
        if self.broken.get() {
            return Err("the object was evicted mid-write".into());
        }
        self.db.atomically(statements)
    }
}

#[test]
fn what_a_failed_write_owed_is_owed_again_then_exactly_once() {
    let flaky = Rc::new(Flaky {
        db: lite::Lite::object(),
        broken: Cell::new(true),
    });
    let outbox = Outbox::new(flaky.clone());
    let calls = [call("a", PendingKind::Approval)];
    assert!(
        outbox
            .reconcile("s1", &waiting(&calls), 1, 0, body)
            .is_err()
    );
    assert!(outbox.due(0).unwrap().is_empty(), "nothing half-written");
    flaky.broken.set(false);
    assert_eq!(
        outbox
            .reconcile("s1", &waiting(&calls), 1, 1, body)
            .unwrap(),
        1
    );
    assert_eq!(
        outbox
            .reconcile("s1", &waiting(&calls), 1, 2, body)
            .unwrap(),
        0
    );
    assert_eq!(outbox.due(2).unwrap().len(), 1);
}

#[test]
fn a_taken_notification_is_not_due_again_until_recorded_or_its_lease_ends() {
    let outbox = Outbox::new(lite::Lite::object());
    let calls = [call("a", PendingKind::Approval)];
    outbox
        .reconcile("s1", &waiting(&calls), 1, 0, body)
        .unwrap();
    let taken = outbox.take(100, 15_000).unwrap();
    assert_eq!(taken.len(), 1);
    assert!(
        outbox.take(101, 15_000).unwrap().is_empty(),
        "in flight: not taken twice"
    );
    assert_eq!(outbox.next_due().unwrap(), Some(15_100));
    // The object died mid-delivery: after the lease it is due again (at least once).
    assert_eq!(outbox.take(15_100, 15_000).unwrap(), taken);
}
