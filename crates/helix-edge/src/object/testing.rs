//! The session object's side of the test build's routes (feature `test-routes`, never in
//! a production bundle; the worker's side is [`crate::test_routes`]):
//! - the benchmark's floor, the least a session request can do — reach its object, make
//!   one D1 write, answer (it opens nothing of the session);
//! - the benchmark's crossings floor: a HITL cycle's platform crossings without
//!   helix-edge's work ([`crossings`]);
//! - the store and journal conformance suites against this object's SQLite;
//! - the replication invariant: replicate, then compare every row here with D1's, with
//!   the lags seen (kept in the object's storage, so that they outlive its eviction);
//! - the storage lost, as a lost namespace would lose it;
//! - D1 failing or slow on purpose (`TEST_D1_FAULT`: `down`, `delay:<ms>`).

use super::capability::{Capability, NOTHING};
use super::{Inner, Reply};
use crate::api::ApiError;
use crate::http::{internal, json_response};
use crate::sqlite::{self, Db, Replicated};
use crate::storage::Sql;
use crate::test_routes::{
    CONFORMANCE_PATH, CROSSINGS_APPROVE_PATH, CROSSINGS_PATH, CROSSINGS_STREAM_PATH, FLOOR_PATH,
    FORGET_PATH, REPLICA_PATH,
};
use crate::worker_host::{WorkerHost, config_value, random_hex};
use serde_json::{Value, json};
use std::rc::Rc;
use std::time::Duration;
use worker::Delay;

mod crossings;

/// Replication lags and batches kept for the report (each the newest this many).
const LAGS_KEPT: usize = 256;

/// The test build's routes and hooks.
pub(super) const TESTING: Capability = Capability {
    routes: &[
        (FLOOR_PATH, |inner, _| Box::pin(inner.floor())),
        (CROSSINGS_PATH, |inner, call| {
            Box::pin(inner.crossings_create(call.id))
        }),
        (CROSSINGS_STREAM_PATH, |inner, call| {
            Box::pin(async move { inner.crossings_stream(call.id) })
        }),
        (CROSSINGS_APPROVE_PATH, |inner, call| {
            Box::pin(inner.crossings_approve(call.id))
        }),
        (CONFORMANCE_PATH, |inner, call| {
            Box::pin(inner.conformance(call.id))
        }),
        (REPLICA_PATH, |inner, call| {
            Box::pin(inner.replica_report(call.id))
        }),
        (FORGET_PATH, |inner, _| Box::pin(inner.forget())),
    ],
    d1_fault: Some(|env| config_value(env, "TEST_D1_FAULT")),
    on_replicated: Some(record_replication),
    ..NOTHING
};

/// What the replications so far reported, oldest first: how long each commit waited
/// for D1 (`lags`, ms) and each batch D1 took (`sends`: commits, bytes, ms), in one
/// mark (one read and one write per replication).
fn replication(sql: &Sql) -> (Vec<Value>, Vec<Value>) {
    let kept = sqlite::mark(sql, "replica_report").unwrap_or_default();
    let kept: Value = serde_json::from_str(&kept).unwrap_or_default();
    let list = |key: &str| kept[key].as_array().cloned().unwrap_or_default();
    (list("lags"), list("sends"))
}

/// Records the lags of commits D1 just took, and its batches.
fn record_replication(inner: &Inner, _id: &str, lags: &[u64], sent: &[u64]) {
    let Ok(parts) = inner.parts() else { return };
    let sql = &*parts.sql;
    let (mut all_lags, mut all_sends) = replication(sql);
    all_lags.extend(lags.iter().map(|&lag| json!(lag)));
    all_sends.extend(sqlite::sends(sent).map(|s| json!([s.commits, s.bytes, s.ms])));
    let newest = |all: &[Value]| all[all.len().saturating_sub(LAGS_KEPT)..].to_vec();
    let kept = json!({ "lags": newest(&all_lags), "sends": newest(&all_sends) });
    let _ = sqlite::set_mark(sql, "replica_report", Some(&kept.to_string()));
}

impl Inner {
    /// The floor: one D1 write, nothing of the session opened.
    async fn floor(&self) -> Reply {
        self.floor_write().await?;
        json_response(200, &json!({ "ok": true }))
    }

    /// The floors' one D1 write (a row of the schema's own guard table).
    async fn floor_write(&self) -> Result<(), ApiError> {
        let db = self
            .env
            .d1(self.app.database())
            .map_err(|e| internal("d1 binding", e))?;
        db.prepare("INSERT OR REPLACE INTO cas_guard (id, ok) VALUES (2, 1)")
            .run()
            .await
            .map_err(|e| internal("floor", e))?;
        Ok(())
    }

    /// Every conformance suite against this (fresh) object's SQLite.
    async fn conformance(&self, id: &str) -> Reply {
        let db: Rc<dyn Db> = self.attach(id)?.sql.clone();
        let prefix = format!("conformance-{}", random_hex(6));
        let all = sqlite::suites::<crate::d1::D1>(db, Rc::new(WorkerHost), &prefix).await;
        let results: Vec<Value> = all
            .into_iter()
            .map(|(part, r)| {
                let name = format!("{part}: {}", r.name);
                json!({ "name": name, "ok": r.outcome.is_ok(), "error": r.outcome.err() })
            })
            .collect();
        json_response(200, &json!({ "results": results }))
    }

    /// Replicates until D1 has everything, then compares every row of the session in
    /// the object's storage with D1's.
    async fn replica_report(&self, id: &str) -> Reply {
        let parts = self.attach(id)?;
        // A replication under way (D1 may be slow) finishes first: at most 30 s.
        let mut outcome = Replicated::Busy;
        for _ in 0..600 {
            outcome = self.replicate_now(id).await;
            if outcome != Replicated::Busy {
                break;
            }
            Delay::from(Duration::from_millis(50)).await;
        }
        let caught = matches!(outcome, Replicated::Caught { .. });
        let (waiting, bytes) = parts.replica.backlog();
        let (lags, sends) = replication(&parts.sql);
        let mut report = json!({
            "caughtUp": caught,
            "waiting": waiting,
            "waitingBytes": bytes,
            "lags": lags,
            "sends": sends,
        });
        if caught {
            let compared = parts.replica.compare(id).await;
            let compared = compared.map_err(crate::runner::RunError::from)?;
            if let (Some(report), Some(compared)) = (report.as_object_mut(), compared.as_object()) {
                report.extend(compared.clone());
            }
        }
        json_response(200, &report)
    }

    /// Deletes everything the object stored, as a lost namespace would; the next
    /// request finds the session only in D1.
    async fn forget(&self) -> Result<worker::Response, ApiError> {
        self.erase().await?;
        json_response(202, &json!({ "accepted": true }))
    }
}
