//! Every conformance suite on one object's SQLite ([`suites`]): the store's (replicating
//! nowhere) and the three journal parts'. Native tests run it on a real SQLite; the test
//! build runs it in workerd, on the platform's own `Db`.

use super::{Db, Record, Replica, SqliteAttempts, SqliteStore, SqliteStreamLog, SqliteSuspension};
use crate::host::Host;
use crate::journal::conformance;
use crate::store::conformance::{self as store_conformance, CheckResult};
use std::rc::Rc;

/// Runs every suite on `db`, with session ids that start with `prefix`; each result with
/// its suite's name (`store`, `journal stream log`, `journal step attempts`, `journal
/// suspension`).
pub async fn suites<R: Record>(
    db: Rc<dyn Db>,
    host: Rc<dyn Host>,
    prefix: &str,
) -> Vec<(&'static str, CheckResult)> {
    let named = |part: &'static str, checks: Vec<CheckResult>| {
        checks
            .into_iter()
            .map(move |c| (part, c))
            .collect::<Vec<_>>()
    };
    let replica = Rc::new(Replica::<R>::new(db.clone(), None, host.clone()));
    let store = SqliteStore::new(db.clone(), replica, u64::MAX);
    let mut all = named("store", store_conformance::run(&store, prefix).await);
    match SqliteStreamLog::open(db.clone(), host.clone()) {
        Ok(stream) => all.extend(named(
            "journal stream log",
            conformance::stream_log(&stream),
        )),
        Err(e) => all.push((
            "journal stream log",
            CheckResult {
                name: "open",
                outcome: Err(e),
            },
        )),
    }
    let attempts = SqliteAttempts::new(db.clone(), host);
    let attempts = conformance::step_attempts(&attempts);
    all.extend(named("journal step attempts", attempts));
    let suspension = SqliteSuspension::new(db);
    all.extend(named(
        "journal suspension",
        conformance::suspension(&suspension),
    ));
    all
}
