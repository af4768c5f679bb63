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
use crate::store::retention::{RETIRE_PATH, Retention, compaction};
use crate::store::rows::{Arg, Statement, plan_record_delete};
use crate::worker_host::{config_value, log};
use serde_json::json;
use worker::Env;

/// Runs one pass of the deployment's retention (the `scheduled` event's work).
pub async fn scheduled(env: Env, app: App) {
    crate::worker_host::start(&env);
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

/// What one pass did on one shard.
#[derive(Default)]
struct Progress {
    erased: u32,
    compacted: u32,
    /// Picked from the record but no longer ended (their objects said so).
    kept: u32,
    /// A batch was full: more may wait for the next run.
    full: bool,
    failed: Vec<serde_json::Value>,
}

/// One batch of each action on one shard, and the line that says how far it got.
async fn pass(env: &Env, app: &App, d1: &D1, shard: &str, policy: &Retention, now: u64) {
    let mut done = Progress::default();
    if let (Some((sql, args)), Some(cutoff)) = (policy.to_erase(now), policy.erase_cutoff(now)) {
        for id in picked(d1, sql, args, policy, &mut done).await {
            match erase(env, app, d1, &id, cutoff).await {
                Ok(true) => done.erased += 1,
                Ok(false) => done.kept += 1,
                Err(e) => done.failed.push(json!({ "session": id, "error": e })),
            }
        }
    }
    if let (Some((sql, args)), Some(cutoff)) = (policy.to_compact(now), policy.compact_cutoff(now))
    {
        for id in picked(d1, sql, args, policy, &mut done).await {
            let sent = match D1::encode(&compaction(&id, cutoff)) {
                Some(batch) => d1.send(vec![batch]).await.map_err(|e| e.to_string()),
                None => Err("the statements could not be encoded".into()),
            };
            match sent {
                Ok(()) => done.compacted += 1,
                Err(e) => done.failed.push(json!({ "session": id, "error": e })),
            }
        }
    }
    let level = if done.failed.is_empty() {
        Level::Info
    } else {
        Level::Warn
    };
    let fields = json!({
        "shard": shard, "erased": done.erased, "compacted": done.compacted,
        "kept": done.kept, "more": done.full, "failed": done.failed,
    });
    log(level, "retention_progress", fields);
}

/// The ids a batch's query picks (a failed read is a failure of the pass).
async fn picked(
    d1: &D1,
    sql: &'static str,
    args: Vec<Arg>,
    policy: &Retention,
    done: &mut Progress,
) -> Vec<String> {
    match d1.read(sql, args).await {
        Ok(rows) => {
            done.full |= rows.len() >= policy.batch as usize;
            rows.iter().filter_map(|r| text(r, 0)).collect()
        }
        Err(e) => {
            done.failed.push(json!({ "error": e.to_string() }));
            Vec::new()
        }
    }
}

/// Erases root session `id` through its object if it still ended before `cutoff`
/// (`false`: it did not, and stays). A session whose object has nothing (its storage
/// lost) leaves only rows in the record: they go directly, with its children's.
async fn erase(env: &Env, app: &App, d1: &D1, id: &str, cutoff: u64) -> Result<bool, String> {
    let body = json!({ "endedBefore": cutoff }).to_string().into_bytes();
    let resp = call_object(
        env,
        app.sessions(),
        id,
        ObjectRequest::post(RETIRE_PATH, body),
    )
    .await
    .map_err(|e| e.message)?;
    match resp.status_code() {
        204 => Ok(true),
        409 => Ok(false),
        404 => {
            let children = d1
                .read(SELECT_CHILDREN, vec![Arg::Text(id.into())])
                .await
                .map_err(|e| e.to_string())?;
            let mut gone: Vec<String> = children.iter().filter_map(|r| text(r, 0)).collect();
            gone.push(id.to_string());
            let plan: Vec<Statement> = gone.iter().flat_map(|id| plan_record_delete(id)).collect();
            let batch = D1::encode(&plan).ok_or("the statements could not be encoded")?;
            d1.send(vec![batch]).await.map_err(|e| e.to_string())?;
            Ok(true)
        }
        status => Err(format!("its object answered HTTP {status}")),
    }
}

/// The sessions of a root's tree in the record, by the root's id.
const SELECT_CHILDREN: &str = "SELECT id FROM sessions WHERE head ->> '$.parent.rootId' = ?1";
