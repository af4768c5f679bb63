//! Schedules and the queue of waiting messages (`helix_edge_core::schedule`) in a session
//! object's SQLite, natively, with a real runner on the same database: the claim
//! protocol (each due fire runs exactly once, a crash anywhere in between included),
//! fires missed while nothing ran, each `whenBusy` policy, the limits, and what the
//! queryable record (D1) is sent of them.

#![cfg(not(target_arch = "wasm32"))]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

#[path = "support/lite.rs"]
mod lite;
#[path = "support/record.rs"]
mod record;

use futures::executor::block_on;
use futures::future::LocalBoxFuture;
use helix_edge_core::agent::{Agent, Agents};
use helix_edge_core::host::{Host, ManualHost};
use helix_edge_core::journal::MemoryJournal;
use helix_edge_core::message::Message;
use helix_edge_core::model::OneModel;
use helix_edge_core::runner::{CreateSession, Progress, Runner, RunnerConfig};
use helix_edge_core::schedule::{
    Decision, Fired, MAX_QUEUED, MAX_SCHEDULES, Next, Schedule, ScheduleBody, Schedules,
    TableError, WhenBusy, busy::Queued, is_busy, start_next, table::from_message,
};
use helix_edge_core::scripted::ScriptedModel;
use helix_edge_core::sqlite::{Record, Replica, Row, SqliteStore};
use helix_edge_core::store::rows::{Arg, Statement};
use helix_edge_core::store::{SessionStatus, Store, StoreError};
use lite::Lite;
use record::LiteRecord;
use serde_json::{Value, json};
use std::cell::Cell;
use std::rc::Rc;

const SESSION: &str = "s1";
const NOW: u64 = 1_795_683_600_000; // 2026-11-26T09:00:00Z

/// No queryable record: these tests are about the object's own storage.
struct Nowhere;

impl Record for Nowhere {
    fn encode(_: &[Statement]) -> Option<String> {
        Some(String::new())
    }
    fn send<'a>(&'a self, _: Vec<String>) -> LocalBoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async { Ok(()) })
    }
    fn read<'a>(
        &'a self,
        _: &'a str,
        _: Vec<Arg>,
    ) -> LocalBoxFuture<'a, Result<Vec<Row>, StoreError>> {
        Box::pin(async { Ok(Vec::new()) })
    }
}

/// A session object: its SQLite, a runner on it, the clock and the model.
struct Object {
    db: Rc<Lite>,
    host: Rc<ManualHost>,
    model: Rc<ScriptedModel>,
    runner: Runner<SqliteStore<Nowhere>>,
    ids: Cell<u32>,
}

impl Object {
    fn new() -> Self {
        let db = Lite::object();
        let host = Rc::new(ManualHost::new(NOW, "t"));
        let replica = Rc::new(Replica::<Nowhere>::new(db.clone(), None, host.clone()));
        let store = SqliteStore::new(db.clone(), replica, u64::MAX);
        let model = Rc::new(ScriptedModel::new());
        let agent = Agent::builder("helper")
            .system_prompt("Help.")
            .scheduling()
            .build()
            .unwrap();
        let agents = Agents::new().with(agent).unwrap();
        let runner = Runner::new(
            store,
            agents,
            Rc::new(OneModel(model.clone())),
            Rc::new(MemoryJournal::new()),
            host.clone(),
            RunnerConfig::new("i1"),
        );
        let shared: Rc<dyn helix_edge_core::sqlite::Db> = db.clone();
        helix_edge_core::schedule::tools::register(SESSION, &shared);
        let object = Self {
            db,
            host,
            model,
            runner,
            ids: Cell::new(0),
        };
        object.model.text("hello");
        block_on(
            object
                .runner
                .create(CreateSession::new(SESSION, "helper", "hi")),
        )
        .unwrap();
        object.drive();
        object
    }

    fn table(&self) -> Schedules<'_> {
        Schedules::new(&*self.db)
    }

    fn ids(&self) -> (String, String) {
        let n = self.ids.get() + 1;
        self.ids.set(n);
        (format!("queued_{n}"), format!("run_q{n}"))
    }

    fn drive(&self) -> Progress {
        block_on(self.runner.drive(SESSION, 8)).unwrap()
    }

    fn status(&self) -> SessionStatus {
        let loaded = block_on(self.runner.store().load(SESSION))
            .unwrap()
            .unwrap();
        loaded.head.status
    }

    fn busy(&self) -> bool {
        let loaded = block_on(self.runner.store().load(SESSION))
            .unwrap()
            .unwrap();
        is_busy(&loaded.head)
    }

    fn schedule(&self, body: Value) -> Schedule {
        let body: ScheduleBody = serde_json::from_value(body).unwrap();
        let n = self.ids.get() + 1;
        self.ids.set(n);
        let schedule = body
            .into_schedule(format!("schedule_{n}"), self.host.now_ms())
            .unwrap();
        self.table().create(&schedule).unwrap();
        schedule
    }

    /// The alarm at `now`: claims the due fires, then starts what the queue holds.
    fn alarm(&self, now: u64) -> Vec<(Schedule, Fired)> {
        self.host.advance(now.saturating_sub(self.host.now_ms()));
        let fired = self
            .table()
            .claim_due(now, self.busy(), WhenBusy::Reject, || self.ids())
            .unwrap();
        block_on(start_next(&self.runner, &self.table(), SESSION)).unwrap();
        fired
    }

    /// The user messages of the transcript.
    fn user_messages(&self) -> Vec<String> {
        let messages = block_on(self.runner.store().messages(SESSION, 0, 1000)).unwrap();
        messages
            .iter()
            .filter_map(text)
            .map(str::to_string)
            .collect()
    }
}

/// A user message's text.
fn text(message: &Message) -> Option<&str> {
    match message {
        Message::User { content, .. } => Some(content),
        _ => None,
    }
}

#[test]
fn an_every_schedule_fires_once_per_tick_each_fire_a_run_of_its_own() {
    let o = Object::new();
    let s = o.schedule(json!({"every": 2, "message": "tick", "count": 3}));
    assert!(o.alarm(NOW + 1_999).is_empty(), "not due yet");
    for tick in 1..=3u64 {
        let fired = o.alarm(NOW + tick * 2_000);
        assert_eq!(fired.len(), 1);
        assert!(matches!(fired[0].1, Fired::Queued { .. }));
        assert_eq!(o.status(), SessionStatus::Active, "the fire's run started");
        o.model.text("tock");
        assert_eq!(o.drive(), Progress::Idle(SessionStatus::Completed));
        assert!(o.alarm(NOW + tick * 2_000).is_empty(), "claimed once");
    }
    assert_eq!(o.user_messages(), ["hi", "tick", "tick", "tick"]);
    assert!(
        o.table().list().unwrap().is_empty(),
        "spent after count: {s:?}"
    );
    assert!(o.table().queue().unwrap().is_empty());
}

#[test]
fn fires_missed_while_nothing_ran_run_once_on_wake_up() {
    let o = Object::new();
    o.schedule(json!({"every": 10, "message": "tick"}));
    // Asleep for a minute and five seconds: six ticks passed.
    let fired = o.alarm(NOW + 65_000);
    assert_eq!(fired.len(), 1, "one run for the missed ticks");
    let schedule = &o.table().list().unwrap()[0];
    assert_eq!(schedule.fired, 1);
    assert_eq!(
        schedule.next_fire_ms,
        NOW + 70_000,
        "the next tick after now"
    );
}

#[test]
fn a_crash_after_the_claim_runs_the_fire_on_wake_up_and_after_the_start_never_again() {
    let o = Object::new();
    o.schedule(json!({"at": "2026-11-26T09:01:00Z", "message": "remind me"}));
    // The claim committed, then the process died before the run started.
    let due = NOW + 60_000;
    let fired = o
        .table()
        .claim_due(due, o.busy(), WhenBusy::Reject, || o.ids())
        .unwrap();
    assert_eq!(fired.len(), 1);
    assert!(
        o.table().list().unwrap().is_empty(),
        "an `at` is spent once claimed"
    );
    assert_eq!(o.status(), SessionStatus::Completed, "no run yet");
    // Wake-up: nothing is due any more, but the queued fire starts.
    assert!(o.alarm(due + 5_000).is_empty());
    assert_eq!(o.status(), SessionStatus::Active);
    o.model.text("done");
    o.drive();
    assert_eq!(o.user_messages(), ["hi", "remind me"]);

    // Now a crash between the run's start and the entry's removal: the entry is back.
    let queued = from_message("queued_x".into(), "run_x".into(), vec![], None, due);
    let again = block_on(o.runner.send_messages_as(
        SESSION,
        vec![Message::user("once")],
        None,
        "run_x".into(),
        None,
    ));
    assert_eq!(again.unwrap(), "run_x");
    o.model.text("ok");
    o.drive();
    // (Queued while "busy", as the entry of a started run would be.)
    let decision = o
        .table()
        .enqueue(queued.clone(), WhenBusy::Enqueue, true)
        .unwrap();
    assert_eq!(decision, Decision::Queue);
    assert_eq!(o.table().queue().unwrap().len(), 1);
    assert!(o.table().started(SESSION, &queued).unwrap());
    let next = block_on(start_next(&o.runner, &o.table(), SESSION)).unwrap();
    assert_eq!(next, Next::Empty, "recognised as started and dropped");
    assert_eq!(
        o.user_messages(),
        ["hi", "remind me", "once"],
        "not run twice"
    );
}

/// A session with a run started and not yet driven: busy until it is.
fn busy_object() -> Object {
    let o = Object::new();
    block_on(
        o.runner
            .send_messages(SESSION, vec![Message::user("long")], None, None),
    )
    .unwrap();
    assert!(o.busy());
    o
}

#[test]
fn a_fire_while_busy_follows_its_policy() {
    let o = busy_object();
    o.schedule(json!({"every": 5, "message": "rejected", "whenBusy": "reject"}));
    o.schedule(json!({"every": 5, "message": "queued", "whenBusy": "enqueue"}));
    o.schedule(json!({"every": 5, "message": "merged", "whenBusy": "merge"}));
    o.schedule(json!({"every": 5, "message": "first", "whenBusy": "interrupt"}));
    let fired = o
        .table()
        .claim_due(NOW + 5_000, true, WhenBusy::Reject, || o.ids())
        .unwrap();
    let outcome = |text: &str| {
        fired
            .iter()
            .find(|(s, _)| self::text(&s.messages[0]) == Some(text))
            .map(|(_, f)| f.clone())
            .unwrap()
    };
    assert_eq!(outcome("rejected"), Fired::Skipped);
    let Fired::Queued { queue_id } = outcome("queued") else {
        panic!()
    };
    assert_eq!(
        outcome("merged"),
        Fired::Merged {
            queue_id: queue_id.clone()
        }
    );
    assert!(matches!(outcome("first"), Fired::Interrupting { .. }));
    let queue = o.table().queue().unwrap();
    let texts: Vec<Vec<&str>> = queue
        .iter()
        .map(|q| q.messages.iter().filter_map(text).collect())
        .collect();
    assert_eq!(
        texts,
        [vec!["first"], vec!["queued", "merged"]],
        "interrupt goes first"
    );
    let skipped: Vec<u64> = o
        .table()
        .list()
        .unwrap()
        .iter()
        .map(|s| s.skipped)
        .collect();
    assert_eq!(skipped.iter().sum::<u64>(), 1);
    // While the run is busy, nothing starts.
    let next = block_on(start_next(&o.runner, &o.table(), SESSION)).unwrap();
    assert_eq!(next, Next::Waiting);
}

#[test]
fn a_fire_that_names_no_policy_follows_the_agents() {
    let o = busy_object();
    o.schedule(json!({"every": 5, "message": "by default"}));
    let rejected = o
        .table()
        .claim_due(NOW + 5_000, true, WhenBusy::Reject, || o.ids());
    assert_eq!(rejected.unwrap()[0].1, Fired::Skipped);
    let queued = o
        .table()
        .claim_due(NOW + 10_000, true, WhenBusy::Enqueue, || o.ids());
    assert!(matches!(queued.unwrap()[0].1, Fired::Queued { .. }));
    assert_eq!(o.table().queue().unwrap().len(), 1);
}

#[test]
fn queued_messages_run_in_order_one_run_each_once_the_session_is_idle() {
    let o = busy_object();
    for text in ["one", "two", "three"] {
        let (queue_id, run_id) = o.ids();
        let message = Message::user(text);
        let queued = from_message(queue_id, run_id, vec![message], None, NOW);
        let decision = o.table().enqueue(queued, WhenBusy::Enqueue, true).unwrap();
        assert_eq!(decision, Decision::Queue);
    }
    // The long run ends.
    o.model.text("done");
    o.drive();
    for expected in ["one", "two", "three"] {
        let Next::Started(queued) = block_on(start_next(&o.runner, &o.table(), SESSION)).unwrap()
        else {
            panic!("{expected} did not start");
        };
        assert_eq!(text(&queued.messages[0]), Some(expected));
        o.model.text("ok");
        o.drive();
    }
    assert_eq!(&o.user_messages()[2..], ["one", "two", "three"]);
}

#[test]
fn the_queue_and_the_schedules_are_bounded_and_cleared_with_the_session() {
    let o = busy_object();
    for _ in 0..MAX_QUEUED {
        let (queue_id, run_id) = o.ids();
        let queued: Queued = from_message(queue_id, run_id, vec![], None, NOW);
        o.table().enqueue(queued, WhenBusy::Enqueue, true).unwrap();
    }
    let (queue_id, run_id) = o.ids();
    let one_more = from_message(queue_id, run_id, vec![], None, NOW);
    assert_eq!(
        o.table()
            .enqueue(one_more, WhenBusy::Enqueue, true)
            .unwrap(),
        Decision::Full(helix_edge_core::schedule::Limit::Count)
    );
    assert_eq!(o.table().queue().unwrap().len(), MAX_QUEUED);
    for _ in 0..MAX_SCHEDULES {
        o.schedule(json!({"every": 60, "message": "x"}));
    }
    let body: ScheduleBody = serde_json::from_value(json!({"every": 60, "message": "x"})).unwrap();
    let extra = body.into_schedule("schedule_extra".into(), NOW).unwrap();
    assert_eq!(o.table().create(&extra), Err(TableError::TooMany));
    assert_eq!(o.table().list().unwrap().len(), MAX_SCHEDULES);
    assert!(
        o.table()
            .delete(&o.table().list().unwrap()[0].schedule_id.clone())
            .unwrap()
    );
    assert!(!o.table().delete("schedule_none").unwrap());
    o.table().clear().unwrap();
    assert!(o.table().list().unwrap().is_empty());
    assert!(o.table().queue().unwrap().is_empty());
}

#[test]
fn the_agent_schedules_lists_and_cancels_runs_of_its_own_session_with_its_tools() {
    let o = Object::new();
    let at = "2026-11-27T09:00:00+01:00";
    let call = o.model.call(
        "schedule_run",
        json!({"at": at, "message": "Remind me: standup"}),
    );
    let call_id = call.id.clone();
    o.model.calls(vec![call]);
    o.model
        .calls(vec![o.model.call("list_schedules", json!({}))]);
    o.model.text("Scheduled.");
    block_on(o.runner.send_messages(
        SESSION,
        vec![Message::user("remind me tomorrow at nine")],
        None,
        None,
    ))
    .unwrap();
    o.drive();
    let listed = o.table().list().unwrap();
    assert_eq!(
        listed.len(),
        1,
        "{:?}",
        o.model.seen().last().map(|s| s.messages.clone())
    );
    assert_eq!(
        listed[0].schedule_id,
        format!("schedule_{call_id}"),
        "named by its call"
    );
    assert_eq!(listed[0].next_fire_ms, NOW + 23 * 3600 * 1000);
    let seen = o.model.seen();
    let last = seen.last().unwrap();
    let results = format!("{:?}", last.messages);
    assert!(
        results.contains("2026-11-27T08:00:00Z"),
        "the model sees its schedule listed"
    );

    // A bad request is the model's to correct, and changes nothing.
    o.model.calls(vec![
        o.model
            .call("schedule_run", json!({"cron": "nope", "message": "x"})),
    ]);
    let id = listed[0].schedule_id.clone();
    o.model.calls(vec![
        o.model.call("cancel_schedule", json!({"scheduleId": id})),
    ]);
    o.model.text("Cancelled.");
    block_on(
        o.runner
            .send_messages(SESSION, vec![Message::user("cancel it")], None, None),
    )
    .unwrap();
    o.drive();
    assert!(
        o.table().list().unwrap().is_empty(),
        "cancelled, and the bad one never stored"
    );
    let seen = o.model.seen();
    let results = format!("{:?}", seen[seen.len() - 2].messages);
    assert!(
        results.contains("cron:"),
        "the model is told what is wrong: {results}"
    );
}

#[test]
fn a_message_for_an_idle_session_is_not_queued_so_a_refused_start_leaves_nothing() {
    let o = Object::new();
    let queued = from_message("queued_a".into(), "run_a".into(), vec![], None, NOW);
    let decision = o.table().enqueue(queued, WhenBusy::Enqueue, false).unwrap();
    assert_eq!(decision, Decision::Start, "the caller starts it");
    assert!(o.table().queue().unwrap().is_empty());
}

#[test]
fn the_record_gets_each_changed_set_of_schedules_once_and_a_failed_send_again() {
    use helix_edge_core::schedule::listing::{DuePage, DueQuery};
    use helix_edge_core::schedule::record::sync;
    use helix_edge_core::sqlite::{Db, int, owned, text};
    let o = Object::new();
    let d1 = Lite::d1();
    let down = Rc::new(Cell::new(false));
    let record = LiteRecord {
        db: d1.clone(),
        down: down.clone(),
    };
    let send = || block_on(sync(&record, &*o.db, SESSION, "helper"));
    let rows = || {
        let sql = "SELECT schedule_id, agent, next_fire_at, body FROM schedules \
                   WHERE session_id = ? ORDER BY next_fire_at";
        let rows = d1.query(sql, &[Arg::Text(SESSION.into())]).unwrap();
        let read = |r: &Row| {
            (
                text(r, 0).unwrap(),
                int(r, 2).unwrap() as u64,
                text(r, 3).unwrap(),
            )
        };
        rows.iter().map(read).collect::<Vec<_>>()
    };
    assert!(!send().unwrap(), "nothing to send");

    let a = o.schedule(json!({"every": 60, "message": "a"}));
    let b = o.schedule(json!({"every": 120, "message": "b"}));
    assert!(send().unwrap());
    let held = rows();
    assert_eq!(
        held.iter()
            .map(|(id, at, _)| (id.clone(), *at))
            .collect::<Vec<_>>(),
        [
            (a.schedule_id.clone(), a.next_fire_ms),
            (b.schedule_id.clone(), b.next_fire_ms)
        ]
    );
    let body: Value = serde_json::from_str(&held[0].2).unwrap();
    assert_eq!(body["every"], 60);
    assert_eq!(
        d1.count("SELECT COUNT(*) FROM schedules WHERE agent = 'helper'"),
        2
    );
    assert!(!send().unwrap(), "unchanged: not sent again");

    // A fire moves `a` on; the record is down, then back.
    o.alarm(a.next_fire_ms);
    down.set(true);
    assert!(send().is_err());
    assert_eq!(rows()[0].1, a.next_fire_ms, "the record keeps the old set");
    down.set(false);
    assert!(send().unwrap(), "sent once the record is back");
    assert_eq!(rows()[0].1, a.next_fire_ms + 60_000);

    // `GET /v1/schedules` reads them, soonest first, while the session is not aborted.
    let listed = |pairs: &[(&str, &str)]| {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let query = DueQuery::parse(&pairs, NOW).unwrap();
        let (sql, args) = query.statement();
        let found = block_on(record.read(sql, args)).unwrap();
        let page = DuePage::from_rows(&found, query.limit).unwrap();
        let ids = page.schedules.iter().map(|s| s["scheduleId"].clone());
        (ids.collect::<Vec<_>>(), page.next_cursor)
    };
    let session = "INSERT INTO sessions (id, agent, status, version, head, interrupt, \
                   snapshot_version, created_at, updated_at) \
                   VALUES (?, 'helper', 'active', 1, '{}', NULL, 1, 0, 0)";
    d1.atomically(&[(session.into(), vec![Arg::Text(SESSION.into())])])
        .unwrap();
    let (ids, cursor) = listed(&[("limit", "1")]);
    assert_eq!(ids, [json!(a.schedule_id)]);
    let (rest, _) = listed(&[("cursor", cursor.as_deref().unwrap())]);
    assert_eq!(rest, [json!(b.schedule_id)]);
    assert!(listed(&[("agent", "other")]).0.is_empty());
    assert!(
        listed(&[("dueBefore", "now")]).0.is_empty(),
        "nothing due yet"
    );
    let aborted = "UPDATE sessions SET status = 'aborted' WHERE id = ?";
    d1.atomically(&[(aborted.into(), vec![Arg::Text(SESSION.into())])])
        .unwrap();
    assert!(listed(&[]).0.is_empty(), "an aborted session's never fire");

    assert!(o.table().delete(&b.schedule_id).unwrap());
    assert!(send().unwrap());
    assert_eq!(rows().len(), 1);

    // A deleted session's rows go with its other rows.
    let erase: Vec<_> = helix_edge_core::store::rows::plan_record_delete(SESSION)
        .iter()
        .map(owned)
        .collect();
    d1.atomically(&erase).unwrap();
    assert!(rows().is_empty());
}

#[test]
fn a_session_is_quiet_only_without_schedules_queue_or_record_rows() {
    use helix_edge_core::schedule::record::sync;
    let o = Object::new();
    let record = LiteRecord {
        db: Lite::d1(),
        down: Rc::new(Cell::new(false)),
    };
    let send = || block_on(sync(&record, &*o.db, SESSION, "helper")).unwrap();
    let quiet = || o.table().quiet().unwrap();
    assert!(quiet(), "a new session");
    let a = o.schedule(json!({"every": 60, "message": "a"}));
    assert!(!quiet(), "a schedule");
    assert!(send());
    assert!(o.table().delete(&a.schedule_id).unwrap());
    assert!(!quiet(), "the record still holds the deleted schedule");
    assert!(send());
    assert!(quiet(), "the record emptied");
    let (queue_id, run_id) = o.ids();
    let queued = from_message(queue_id, run_id, vec![Message::user("later")], None, NOW);
    o.table().enqueue(queued, WhenBusy::Enqueue, true).unwrap();
    assert!(!quiet(), "a queued message");
}
