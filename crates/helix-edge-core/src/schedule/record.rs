//! Schedules in the queryable record (D1's `schedules` table), so that `GET /v1/schedules`
//! lists the fires due across sessions: each session's schedules as its object last sent
//! them, one row each.
//!
//! The object sends the whole set of a session's schedules — the record's rows for the
//! session replaced in one batch — whenever it differs from the set it last sent (a
//! schedule created, deleted, fired or spent; the session aborted), and notes what it
//! sent in its own storage once the record took it. A send that fails is made again after
//! the session's next slice of work or fire; a crash between the send and the note sends
//! the same set again (the replacement is idempotent). One object sends for its session,
//! one send at a time, so an older set never overwrites a newer one. A deleted session's
//! rows go with its other rows ([`crate::sqlite::Replica`]'s erase).

use super::body::ScheduleView;
use super::table::Schedules;
use crate::sqlite::{Db, Record, text};
use crate::store::StoreError;
use crate::store::rows::{Arg, Statement};
use serde::Serialize;

const INSERT: &str = "INSERT INTO schedules (session_id, schedule_id, agent, next_fire_at, body) \
    VALUES (?1, ?2, ?3, ?4, ?5)";
/// The object's note of the set the record holds.
pub(super) const SENT: &str = "schedules_sent";

/// One schedule as the record holds it.
#[derive(Debug, Clone, PartialEq, Serialize)]
struct Row {
    id: String,
    next_fire_ms: u64,
    view: String,
}

fn storage(e: impl ToString) -> StoreError {
    StoreError::Backend(e.to_string())
}

/// The session's schedules as the record should hold them, and their note; `None` when
/// the record holds them already.
fn pending(db: &dyn Db) -> Result<Option<(Vec<Row>, String)>, StoreError> {
    let listed = Schedules::new(db).list().map_err(storage)?;
    let mut rows = Vec::with_capacity(listed.len());
    for schedule in listed {
        let (id, next_fire_ms) = (schedule.schedule_id.clone(), schedule.next_fire_ms);
        let view = serde_json::to_string(&ScheduleView::from(schedule)).map_err(storage)?;
        rows.push(Row {
            id,
            next_fire_ms,
            view,
        });
    }
    let note = serde_json::to_string(&rows).map_err(storage)?;
    let noted = db
        .query(
            "SELECT v FROM journal_meta WHERE k = ?",
            &[Arg::Text(SENT.into())],
        )
        .map_err(storage)?;
    let sent = noted.first().and_then(|r| text(r, 0));
    // Nothing was ever sent and there is nothing to send: the record has no rows.
    let unchanged = sent.as_deref().map_or(rows.is_empty(), |sent| sent == note);
    Ok((!unchanged).then_some((rows, note)))
}

/// The batch that makes the record hold `rows` for session `session` of `agent`.
fn batch(session: &str, agent: &str, rows: &[Row]) -> Vec<Statement> {
    let mut batch = vec![Statement {
        sql: crate::store::rows::DELETE_RECORD_SCHEDULES,
        args: vec![Arg::Text(session.into())],
    }];
    batch.extend(rows.iter().map(|row| Statement {
        sql: INSERT,
        args: vec![
            Arg::Text(session.into()),
            Arg::Text(row.id.clone()),
            Arg::Text(agent.into()),
            Arg::Int(row.next_fire_ms),
            Arg::Text(row.view.clone()),
        ],
    }));
    batch
}

/// Sends session `session`'s schedules (its object's `db`; its agent `agent`) to
/// `record` if they changed since last sent: whether it sent them.
pub async fn sync<R: Record>(
    record: &R,
    db: &dyn Db,
    session: &str,
    agent: &str,
) -> Result<bool, StoreError> {
    let Some((rows, note)) = pending(db)? else {
        return Ok(false);
    };
    let encoded = R::encode(&batch(session, agent, &rows))
        .ok_or_else(|| StoreError::Corrupt("cannot encode the schedules".into()))?;
    record.send(vec![encoded]).await?;
    let noted = (
        "INSERT INTO journal_meta (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v"
            .to_string(),
        vec![Arg::Text(SENT.into()), Arg::Text(note)],
    );
    db.atomically(&[noted]).map_err(storage)?;
    Ok(true)
}
