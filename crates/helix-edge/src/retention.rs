//! Retention by the worker's cron trigger (feature `retention`): on each `scheduled`
//! event, every shard of the record is worked through in bounded batches — ended root
//! sessions past `ERASE_AFTER_DAYS` erased through their objects (as `DELETE` erases
//! them: storage, children, rows), ended sessions past `RETAIN_DAYS` compacted to their
//! index in D1 ([`crate::store::retention`]). Each batch picks what is still to do, so
//! a run cut short is continued by the next; each shard's progress is a log line
//! (`retention_progress`).

use crate::app::App;
use crate::d1::D1;
use crate::host::Level;
use crate::http::{ObjectRequest, call_object};
use crate::setup::Setup;
use crate::sqlite::{Record, text};
use crate::store::retention::{Retention, compaction};
use crate::store::rows::plan_record_delete;
use crate::worker_host::{config_value, log};
use serde_json::json;
use worker::{Env, Method};

/// Runs one pass of the deployment's retention (the `scheduled` event's work).
pub async fn scheduled(env: Env, app: App) {
    let var = |name: &str| config_value(&env, name);
    let policy = Retention::from_vars(
        var("RETAIN_DAYS").as_deref(),
        var("ERASE_AFTER_DAYS").as_deref(),
        var("RETENTION_BATCH").as_deref(),
    );
    let policy = match policy {
        Ok(policy) if policy.keeps_all() => return,
        Ok(policy) => policy,
        Err(reason) => {
            return log(
                Level::Error,
                "retention_misconfigured",
                json!({ "reason": reason }),
            );
        }
    };
    let setup = match Setup::get(&env, &app) {
        Ok(setup) => setup,
        Err(e) => {
            return log(
                Level::Error,
                "retention_failed",
                json!({ "error": e.message }),
            );
        }
    };
    let now = worker::Date::now().as_millis();
    for shard in &setup.shards {
        match D1::new(&env, shard, crate::object::d1_fault(&env)) {
            Ok(d1) => pass(&env, &app, &d1, shard, &policy, now).await,
            Err(e) => log(
                Level::Warn,
                "retention_failed",
                json!({ "shard": shard, "error": e.to_string() }),
            ),
        }
    }
}

/// One batch of each action on one shard, and the line that says how far it got.
async fn pass(env: &Env, app: &App, d1: &D1, shard: &str, policy: &Retention, now: u64) {
    let (mut erased, mut compacted, mut failed) = (0u32, 0u32, Vec::new());
    let mut picked = 0usize;
    if let Some((sql, args)) = policy.to_erase(now) {
        match d1.read(sql, args).await {
            Ok(rows) => {
                picked = picked.max(rows.len());
                for id in rows.iter().filter_map(|r| text(r, 0)) {
                    match erase(env, app, d1, &id).await {
                        Ok(()) => erased += 1,
                        Err(e) => failed.push(json!({ "session": id, "error": e })),
                    }
                }
            }
            Err(e) => failed.push(json!({ "error": e.to_string() })),
        }
    }
    if let Some((sql, args)) = policy.to_compact(now) {
        match d1.read(sql, args).await {
            Ok(rows) => {
                picked = picked.max(rows.len());
                for id in rows.iter().filter_map(|r| text(r, 0)) {
                    let sent = match D1::encode(&compaction(&id)) {
                        Some(batch) => d1.send(vec![batch]).await.map_err(|e| e.to_string()),
                        None => Err("the statements could not be encoded".into()),
                    };
                    match sent {
                        Ok(()) => compacted += 1,
                        Err(e) => failed.push(json!({ "session": id, "error": e })),
                    }
                }
            }
            Err(e) => failed.push(json!({ "error": e.to_string() })),
        }
    }
    let more = picked == policy.batch as usize;
    let level = if failed.is_empty() {
        Level::Info
    } else {
        Level::Warn
    };
    let fields = json!({ "shard": shard, "erased": erased, "compacted": compacted, "more": more, "failed": failed });
    log(level, "retention_progress", fields);
}

/// Erases root session `id` through its object, as `DELETE` does; a session whose object
/// has nothing (its storage lost) leaves only rows in the record, which go directly.
async fn erase(env: &Env, app: &App, d1: &D1, id: &str) -> Result<(), String> {
    let path = format!("/v1/sessions/{id}");
    let request = ObjectRequest {
        method: Method::Delete,
        path: &path,
        last_event_id: None,
        body: None,
        user: None,
        session_token: false,
    };
    let resp = call_object(env, app.sessions(), id, request)
        .await
        .map_err(|e| e.message)?;
    match resp.status_code() {
        204 => Ok(()),
        404 => {
            let batch =
                D1::encode(&plan_record_delete(id)).ok_or("the statements could not be encoded")?;
            d1.send(vec![batch]).await.map_err(|e| e.to_string())
        }
        status => Err(format!("its object answered HTTP {status}")),
    }
}
