//! The D1 schema this version of helix-edge needs ([`MIGRATIONS`], shipped in the
//! crate's `migrations/` and applied by a worker with `wrangler d1 migrations apply`),
//! and the check that the worker's database has them all (wasm only).
//!
//! The check runs once per isolate, after the first request that needs it, in the
//! background (the request itself never waits on D1); while the database is behind, it
//! runs again at most every [`RECHECK_MS`].

pub use crate::store::migrations::{MIGRATIONS, RECHECK_MS, missing};

#[cfg(target_arch = "wasm32")]
pub use check::{known_outdated, outdated, refresh};

#[cfg(target_arch = "wasm32")]
mod check {
    use super::{RECHECK_MS, missing};
    use crate::api::ApiError;
    use crate::host::Level;
    use crate::store::StoreError;
    use crate::store::rows::SqlFailure;
    use crate::worker_host::log;
    use std::cell::RefCell;
    use worker::D1Database;
    use worker::js_sys::Array;
    use worker::wasm_bindgen::JsValue;

    /// What this isolate knows of the database's schema.
    enum Known {
        Unchecked,
        Checking,
        Current,
        /// Behind, as of the time (ms) it was checked.
        Behind(Vec<String>, u64),
    }

    thread_local! {
        static KNOWN: RefCell<Known> = const { RefCell::new(Known::Unchecked) };
    }

    /// The 503 to answer while the database is known to be behind.
    pub fn known_outdated() -> Option<ApiError> {
        KNOWN.with_borrow(|known| match known {
            Known::Behind(missing, _) => {
                let e = StoreError::SchemaOutdated {
                    missing: missing.clone(),
                };
                Some(crate::runner::RunError::Store(e).into())
            }
            _ => None,
        })
    }

    /// Whether a check is due now: never made, or the database was behind a while ago.
    fn due(now: u64) -> bool {
        KNOWN.with_borrow_mut(|known| {
            let due = match known {
                Known::Unchecked => true,
                Known::Behind(_, at) => now.saturating_sub(*at) >= RECHECK_MS,
                Known::Checking | Known::Current => false,
            };
            if due {
                *known = Known::Checking;
            }
            due
        })
    }

    /// The migrations of ours the database lacks, from `d1_migrations` (all of them when
    /// that table does not exist: nothing was ever applied).
    async fn behind(db: &D1Database) -> Result<Vec<String>, worker::Error> {
        let rows = db
            .prepare("SELECT name FROM d1_migrations ORDER BY id")
            .raw_js_value()
            .await;
        let rows = match rows {
            Ok(rows) => rows,
            Err(e) if SqlFailure::of(&e.to_string()) == SqlFailure::Schema => {
                return Ok(missing(&[]));
            }
            Err(e) => return Err(e),
        };
        let name = |row: &JsValue| Array::from(row).get(0).as_string();
        let applied: Vec<String> = rows.iter().filter_map(name).collect();
        Ok(missing(&applied))
    }

    /// The error for a statement that failed on the schema: which migrations are missing.
    pub async fn outdated(db: &D1Database) -> StoreError {
        let missing = behind(db).await.unwrap_or_default();
        StoreError::SchemaOutdated { missing }
    }

    /// Reads `d1_migrations` of every shard (`(binding, database)`) when a check is due;
    /// run it in the background. The record is behind when any shard is.
    pub async fn refresh(shards: Vec<(String, D1Database)>) {
        let now = worker::Date::now().as_millis();
        if !due(now) {
            return;
        }
        let mut known = Known::Current;
        for (shard, db) in &shards {
            match (behind(db).await, &mut known) {
                (Ok(names), _) if names.is_empty() => {}
                (Ok(names), Known::Behind(all, _)) => {
                    log_behind(shard, &names);
                    for name in names {
                        if !all.contains(&name) {
                            all.push(name);
                        }
                    }
                }
                (Ok(names), _) => {
                    log_behind(shard, &names);
                    known = Known::Behind(names, now);
                }
                (Err(e), _) => {
                    let fields = serde_json::json!({ "shard": shard, "error": e.to_string() });
                    log(Level::Warn, "schema_check_failed", fields);
                    if matches!(known, Known::Current) {
                        known = Known::Unchecked;
                    }
                }
            }
        }
        KNOWN.set(known);
    }

    fn log_behind(shard: &str, missing: &[String]) {
        let fields = serde_json::json!({ "shard": shard, "missing": missing });
        log(Level::Error, "schema_outdated", fields);
    }
}
