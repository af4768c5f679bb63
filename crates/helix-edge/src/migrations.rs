//! The D1 schema this version of helix-edge needs ([`MIGRATIONS`], their SQL in
//! [`FILES`], shipped in the crate's `migrations/`), the copy of them a worker keeps in
//! its own `migrations/` for `wrangler d1 migrations apply` ([`sync`], natively), and the
//! check that the worker's database has them all (wasm only).
//!
//! A worker keeps its copy current with one test, which fails when the copy and the
//! library differ and writes the library's files when told to:
//!
//! ```no_run
//! #[test]
//! fn migrations_are_the_librarys() {
//!     helix_edge::migrations::sync(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations"));
//! }
//! ```
//!
//! `HELIX_EDGE_WRITE_MIGRATIONS=1 cargo test migrations` writes them (after an upgrade
//! of helix-edge, or to start a worker's `migrations/`).
//!
//! The check runs once per isolate, after the first request that needs it, in the
//! background (the request itself never waits on D1); while the database is behind, it
//! runs again at most every [`RECHECK_MS`].

pub use crate::store::migrations::{MIGRATIONS, RECHECK_MS, missing};

/// Each migration of [`MIGRATIONS`], in order: its file name and its SQL.
pub const FILES: &[(&str, &str)] = &[
    ("0001_init.sql", include_str!("../migrations/0001_init.sql")),
    (
        "0002_sessions_by_update.sql",
        include_str!("../migrations/0002_sessions_by_update.sql"),
    ),
    (
        "0003_persistent_children.sql",
        include_str!("../migrations/0003_persistent_children.sql"),
    ),
    (
        "0004_schedules.sql",
        include_str!("../migrations/0004_schedules.sql"),
    ),
    (
        "0005_inbox.sql",
        include_str!("../migrations/0005_inbox.sql"),
    ),
];

/// The variable that makes [`sync`] write the library's migrations instead of failing.
pub const WRITE_VAR: &str = "HELIX_EDGE_WRITE_MIGRATIONS";

/// Checks that directory `dir` (a worker's `migrations/`) holds exactly the library's
/// [`FILES`], byte for byte (a worker's own migrations, named after the library's, may
/// sit beside them); panics naming what differs and the command that fixes it. With
/// `HELIX_EDGE_WRITE_MIGRATIONS=1` in the environment it writes the files that differ
/// instead (creating `dir`). For a worker crate's tests.
#[cfg(not(target_arch = "wasm32"))]
#[allow(clippy::panic, reason = "a test's assertion: it fails by panicking")]
pub fn sync(dir: impl AsRef<std::path::Path>) {
    let dir = dir.as_ref();
    let write = std::env::var(WRITE_VAR).is_ok_and(|v| v == "1");
    let differs: Vec<&str> = FILES
        .iter()
        .filter(|(name, sql)| std::fs::read_to_string(dir.join(name)).ok().as_deref() != Some(sql))
        .map(|(name, _)| *name)
        .collect();
    if differs.is_empty() {
        return;
    }
    if !write {
        panic!(
            "{} differs from helix-edge's D1 migrations ({}): run `{WRITE_VAR}=1 cargo test` \
             to write them, then apply them with `wrangler d1 migrations apply DB`",
            dir.display(),
            differs.join(", ")
        );
    }
    if let Err(e) = std::fs::create_dir_all(dir) {
        panic!("cannot create {}: {e}", dir.display());
    }
    for (name, sql) in FILES.iter().filter(|(name, _)| differs.contains(name)) {
        if let Err(e) = std::fs::write(dir.join(name), sql) {
            panic!("cannot write {}: {e}", dir.join(name).display());
        }
    }
}

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
