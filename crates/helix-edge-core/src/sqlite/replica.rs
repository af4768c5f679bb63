//! The queryable record (D1) of every session, fed from the session object's commit log
//! ([`Replica`]). Each local commit queues the statements it ran, keyed by its version,
//! in the object's `replica_outbox`, in the same transaction ([`Replica::enqueue`]); the
//! object then sends what is queued to the record in order ([`Replica::replicate`]):
//!
//! - coalesced: every commit queued by then goes in one batch, up to [`BATCH_BYTES`]
//!   ([`batch_of`]), and a short delay after a commit ([`COALESCE_MS`]) lets the next
//!   ones join;
//! - idempotent: each commit's statements are the same version-guarded writes the object
//!   ran, so a batch the record has applied before (the object died before it could drop
//!   it from the outbox) fails its guard as a whole; the object then reads the version
//!   the record has, drops what it holds ([`held_after_guard`]), and sends the rest —
//!   nothing twice, nothing lost;
//! - retried with backoff ([`backoff_ms`]) while the record fails; an outage delays
//!   replication but never blocks a run, until the backlog reaches its bound (then the
//!   session refuses new commits: [`super::backlog_refused`]).
//!
//! When the object's storage is gone but the record has the session (the storage was
//! deleted, or the sessions moved to a new Durable Object namespace),
//! [`Replica::rebuild`] copies it back.

mod copy;

pub use copy::TABLES;

use super::{Db, Owned, Row, backend, int, text};
use crate::host::Host;
use crate::store::StoreError;
use crate::store::rows::{Arg, SqlFailure, Statement, plan_record_delete};
use futures::future::LocalBoxFuture;
use std::cell::Cell as Flag;
use std::rc::Rc;

/// The most bytes of statements sent in one batch (a commit larger than this goes
/// alone).
pub const BATCH_BYTES: u64 = 900_000;
/// The largest commit queued for the record, encoded (a row of the object's SQLite
/// holds at most 2 MB); a larger one is refused before anything is written.
pub const OUTBOX_ROW_BYTES: usize = 1_900_000;
/// How long a replication waits after the commit that started it, so that the commits
/// right behind it go in the same batch.
pub const COALESCE_MS: u64 = 250;

/// The queryable record (D1) as the replica uses it.
pub trait Record {
    /// `batch` as it waits in the outbox until it is sent (whether or not the record
    /// can be reached: a commit is queued either way).
    fn encode(batch: &[Statement]) -> Option<String>
    where
        Self: Sized;
    /// Runs the statements of the `encoded` batches, in order, as one atomic batch.
    fn send<'a>(&'a self, encoded: Vec<String>) -> LocalBoxFuture<'a, Result<(), StoreError>>;
    /// The rows of a query.
    fn read<'a>(
        &'a self,
        sql: &'a str,
        args: Vec<Arg>,
    ) -> LocalBoxFuture<'a, Result<Vec<Row>, StoreError>>;
}

/// How a replication ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Replicated {
    /// Everything queued is in the record.
    Caught {
        /// Commits sent now.
        commits: u64,
        /// How long each of them waited (ms), oldest first.
        lags: Vec<u64>,
        /// The batches the record took, in order: three numbers each — its commits, their
        /// encoded bytes, and the milliseconds from sending it to the record's answer
        /// ([`sends`] reads them).
        sends: Vec<u64>,
    },
    /// Another replication is under way.
    Busy,
    /// The record failed; retry after this many milliseconds.
    Failed {
        /// The backoff.
        retry_ms: u64,
        /// Why.
        error: StoreError,
    },
}

/// The backoff after `failures` consecutive failures: 1 s, doubling, at most 60 s.
pub fn backoff_ms(failures: u32) -> u64 {
    1_000u64.saturating_mul(1 << failures.min(6)).min(60_000)
}

/// One commit waiting in the outbox.
#[derive(Debug, Clone, PartialEq)]
pub struct Outboxed {
    /// Its place in the outbox.
    pub seq: i64,
    /// Its session.
    pub session: String,
    /// The session version it wrote.
    pub version: u64,
    /// Its statements, encoded.
    pub batch: String,
    /// Their size.
    pub bytes: u64,
    /// When it was committed locally (ms).
    pub committed_at: u64,
}

/// One batch the record took: what a capacity model of the record needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    /// Commits in it.
    pub commits: u64,
    /// Their encoded size.
    pub bytes: u64,
    /// From sending it to the record's answer (ms).
    pub ms: u64,
}

/// The batches of a [`Replicated::Caught`]'s `sends`. (They travel as plain numbers: a
/// vector of its own type would cost every bundle its code, for the test build's use.)
pub fn sends(numbers: &[u64]) -> impl Iterator<Item = Sent> + '_ {
    numbers.chunks_exact(3).map(|n| Sent {
        commits: n[0],
        bytes: n[1],
        ms: n[2],
    })
}

/// The commits of `queued` (oldest first) that go in the next batch: as many as fit in
/// [`BATCH_BYTES`], and at least one.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    /// How many commits it takes.
    pub taken: usize,
}

/// The next batch of `queued`.
pub fn batch_of(queued: &[Outboxed]) -> Batch {
    let mut bytes = 0;
    let mut taken = 0;
    for row in queued {
        if taken > 0 && bytes + row.bytes > BATCH_BYTES {
            break;
        }
        bytes += row.bytes;
        taken += 1;
    }
    Batch { taken }
}

/// A batch whose guard failed: the record holds `first`'s commit already (sent before,
/// by a process that did not live to drop it). It holds version `held` of the session:
/// everything up to it is dropped from the outbox (`Ok(held)`); a record behind the
/// first queued commit has lost writes, which only an operator can mend.
pub fn held_after_guard(first: &Outboxed, held: u64) -> Result<u64, StoreError> {
    if held < first.version {
        return Err(StoreError::Backend(format!(
            "D1 holds version {held} of session {}, but the next commit queued is {}",
            first.session, first.version
        )));
    }
    Ok(held)
}

/// The replication of one session's object to the record.
pub struct Replica<R: Record> {
    db: Rc<dyn Db>,
    record: Option<R>,
    host: Rc<dyn Host>,
    /// Commits and bytes waiting, once counted (kept up to date by every write).
    waiting: Flag<Option<(u64, u64)>>,
    /// A replication is under way (there is one at a time; it takes everything queued).
    sending: Flag<bool>,
    /// Consecutive failed attempts, for the backoff.
    failures: Flag<u32>,
    /// A session is being erased: nothing is sent meanwhile.
    paused: Flag<bool>,
    /// The record keeps the index only (`D1_REPLICA=index`): no transcript rows.
    index_only: bool,
}

/// The statements that write a session's transcript, checkpoints or state log: what a
/// record that keeps the index only is never sent.
const TRANSCRIPT: [&str; 7] = [
    "INTO messages ",
    "FROM messages ",
    "INTO checkpoints ",
    "FROM checkpoints ",
    "UPDATE checkpoints ",
    "INTO state_log ",
    "FROM state_log ",
];

/// Whether `sql` writes the transcript, checkpoints or state log.
pub fn writes_transcript(sql: &str) -> bool {
    TRANSCRIPT.iter().any(|t| sql.contains(t))
}

fn local(what: &str) -> impl Fn(String) -> StoreError + '_ {
    move |e| backend(what, e)
}

impl<R: Record> Replica<R> {
    /// The replication of the object's session in `db` to `record` (none: nothing to
    /// replicate to, as when the binding is missing; every send then fails).
    pub fn new(db: Rc<dyn Db>, record: Option<R>, host: Rc<dyn Host>) -> Self {
        Self {
            db,
            record,
            host,
            waiting: Flag::new(None),
            sending: Flag::new(false),
            failures: Flag::new(0),
            paused: Flag::new(false),
            index_only: false,
        }
    }

    /// The same, sending the record the index only — the session's row, runs, children
    /// and pending calls, never its transcript, checkpoints or state log (`true`).
    pub fn index_only(mut self, yes: bool) -> Self {
        self.index_only = yes;
        self
    }

    /// Whether the record keeps the index only.
    pub fn keeps_index_only(&self) -> bool {
        self.index_only
    }

    fn record(&self) -> Result<&R, StoreError> {
        self.record
            .as_ref()
            .ok_or_else(|| StoreError::Backend("the D1 binding is missing".into()))
    }

    /// Commits and bytes waiting for the record.
    pub fn backlog(&self) -> (u64, u64) {
        if let Some(known) = self.waiting.get() {
            return known;
        }
        let rows = self
            .db
            .query(
                "SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM replica_outbox",
                &[],
            )
            .unwrap_or_default();
        let known = rows.first().map_or((0, 0), |r| {
            (int(r, 0).unwrap_or(0) as u64, int(r, 1).unwrap_or(0) as u64)
        });
        self.waiting.set(Some(known));
        known
    }

    /// The statement that queues `batch`, committed as `version` of session `id`, for
    /// the record — run in the commit's own transaction.
    pub fn enqueue(
        &self,
        id: &str,
        version: u64,
        batch: &[Statement],
    ) -> Result<Owned, StoreError> {
        let kept: Vec<Statement>;
        let batch = match self.index_only {
            false => batch,
            true => {
                kept = (batch.iter().filter(|s| !writes_transcript(s.sql)).cloned()).collect();
                &kept[..]
            }
        };
        let encoded = R::encode(batch)
            .ok_or_else(|| StoreError::Corrupt("cannot queue the commit for D1".into()))?;
        // One row of the object's SQLite holds at most 2 MB.
        if encoded.len() > OUTBOX_ROW_BYTES {
            let (what, bytes, limit) = ("commit", encoded.len(), OUTBOX_ROW_BYTES);
            return Err(StoreError::TooLarge { what, bytes, limit });
        }
        let bytes = encoded.len() as u64;
        let (commits, total) = self.backlog();
        self.waiting.set(Some((commits + 1, total + bytes)));
        let args = vec![
            Arg::Text(id.into()),
            Arg::Int(version),
            Arg::Text(encoded),
            Arg::Int(bytes),
            Arg::Int(self.host.now_ms()),
        ];
        let q = "INSERT INTO replica_outbox (session_id, version, batch, bytes, committed_at) \
                 VALUES (?, ?, ?, ?, ?)";
        Ok((q.to_string(), args))
    }

    /// Forgets the counts (after a failed transaction, which may have counted a commit
    /// that was rolled back).
    pub fn recount(&self) {
        self.waiting.set(None);
    }

    /// Sends everything queued to the record, in order, until the outbox is empty or the
    /// record fails.
    pub async fn replicate(&self) -> Replicated {
        if self.paused.get() || self.sending.replace(true) {
            return Replicated::Busy;
        }
        let (mut lags, mut sends) = (Vec::new(), Vec::new());
        let outcome = self.send_all(&mut lags, &mut sends).await;
        self.sending.set(false);
        match outcome {
            Ok(commits) => {
                self.failures.set(0);
                Replicated::Caught {
                    commits,
                    lags,
                    sends,
                }
            }
            Err(error) => {
                let failures = self.failures.get();
                self.failures.set(failures + 1);
                let retry_ms = backoff_ms(failures);
                Replicated::Failed { retry_ms, error }
            }
        }
    }

    /// The oldest commits waiting (at most 256).
    fn queued(&self) -> Result<Vec<Outboxed>, StoreError> {
        let rows = self
            .db
            .query(
                "SELECT seq, session_id, version, batch, bytes, committed_at FROM replica_outbox \
                 ORDER BY seq LIMIT 256",
                &[],
            )
            .map_err(local("reading the outbox"))?;
        let outboxed = |r: &Row| {
            Some(Outboxed {
                seq: int(r, 0)?,
                session: text(r, 1)?,
                version: int(r, 2)? as u64,
                batch: text(r, 3)?,
                bytes: int(r, 4).unwrap_or(0) as u64,
                committed_at: int(r, 5).unwrap_or(0) as u64,
            })
        };
        let malformed = || StoreError::Corrupt("an outbox row is malformed".into());
        rows.iter()
            .map(|r| outboxed(r).ok_or_else(malformed))
            .collect()
    }

    async fn send_all(&self, lags: &mut Vec<u64>, sends: &mut Vec<u64>) -> Result<u64, StoreError> {
        let record = self.record()?;
        let mut sent = 0;
        loop {
            // Every write keeps the count: when it says nothing waits, nothing is read.
            if self.waiting.get().is_some_and(|(commits, _)| commits == 0) {
                return Ok(sent);
            }
            let queued = self.queued()?;
            let Some(first) = queued.first() else {
                self.waiting.set(Some((0, 0)));
                return Ok(sent);
            };
            let taken = &queued[..batch_of(&queued).taken];
            let encoded = taken.iter().map(|r| r.batch.clone()).collect();
            let started = self.host.now_ms();
            match record.send(encoded).await {
                Ok(()) => {
                    let now = self.host.now_ms();
                    let last = taken.last().map_or(first.seq, |r| r.seq);
                    let bytes = taken.iter().map(|r| r.bytes).sum();
                    let commits = taken.len() as u64;
                    self.acknowledge_upto(last, commits, bytes)?;
                    sent += commits;
                    lags.extend(taken.iter().map(|r| now.saturating_sub(r.committed_at)));
                    let ms = now.saturating_sub(started);
                    sends.extend([commits, bytes, ms]);
                }
                // The batch's guard failed: the record holds the first commit already.
                // Drop what it has of that session and go on.
                Err(StoreError::Backend(m))
                    if matches!(
                        SqlFailure::of(&m),
                        SqlFailure::Check | SqlFailure::Unique("sessions.id")
                    ) =>
                {
                    let held = self.version_held(&first.session).await?;
                    let upto = held_after_guard(first, held)?;
                    self.acknowledge(&first.session, upto)?;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The record holds every queued commit up to outbox row `seq` (`commits` of them,
    /// `bytes` in all): drop them.
    fn acknowledge_upto(&self, seq: i64, commits: u64, bytes: u64) -> Result<(), StoreError> {
        self.db
            .query(
                "DELETE FROM replica_outbox WHERE seq <= ?",
                &[Arg::Int(seq.max(0) as u64)],
            )
            .map_err(local("clearing the outbox"))?;
        // What is left, unless the count does not add up (then it is read again).
        let left = self.waiting.get().and_then(|(waiting, total)| {
            Some((waiting.checked_sub(commits)?, total.checked_sub(bytes)?))
        });
        self.waiting.set(left);
        Ok(())
    }

    /// The record holds every commit of session `id` up to `version`: drop them.
    fn acknowledge(&self, id: &str, version: u64) -> Result<(), StoreError> {
        self.db
            .query(
                "DELETE FROM replica_outbox WHERE session_id = ? AND version <= ?",
                &[Arg::Text(id.into()), Arg::Int(version)],
            )
            .map_err(local("clearing the outbox"))?;
        self.waiting.set(None);
        Ok(())
    }

    /// Removes session `id` from the record, then runs `local` (which removes it, and
    /// what waits for the record of it, from the object), with replication paused
    /// throughout: a send under way finishes first, and nothing of the session is sent
    /// after the record dropped it. When the record fails nothing local is touched, so
    /// the session stays whole and the erasure can be repeated.
    pub async fn erase(
        &self,
        id: &str,
        local: impl FnOnce() -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.paused.set(true);
        let erased = self.erase_paused(id, local).await;
        self.paused.set(false);
        erased
    }

    async fn erase_paused(
        &self,
        id: &str,
        local: impl FnOnce() -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        // A replication under way (the record may be slow) finishes first: at most 30 s.
        for _ in 0..600 {
            if !self.sending.get() {
                break;
            }
            self.host.sleep(50).await;
        }
        if self.sending.get() {
            return Err(StoreError::Backend(
                "a replication to D1 is still under way".into(),
            ));
        }
        if let Some(record) = &self.record {
            let encoded = R::encode(&plan_record_delete(id))
                .ok_or_else(|| StoreError::Corrupt("cannot encode the deletion".into()))?;
            record.send(vec![encoded]).await?;
        }
        local()?;
        self.waiting.set(None);
        Ok(())
    }

    /// The version of session `id` the record holds (0: none).
    async fn version_held(&self, id: &str) -> Result<u64, StoreError> {
        let q = "SELECT version FROM sessions WHERE id = ?1";
        let rows = self.record()?.read(q, vec![Arg::Text(id.into())]).await?;
        Ok(rows.first().and_then(|r| int(r, 0)).unwrap_or(0).max(0) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(seq: i64, session: &str, version: u64, bytes: u64) -> Outboxed {
        Outboxed {
            seq,
            session: session.into(),
            version,
            batch: String::new(),
            bytes,
            committed_at: 0,
        }
    }

    #[test]
    fn a_batch_takes_what_fits_and_at_least_one_commit() {
        let small = [
            row(1, "s", 2, 100),
            row(2, "s", 3, 100),
            row(3, "s", 4, 100),
        ];
        assert_eq!(batch_of(&small).taken, 3);
        let big = [
            row(1, "s", 2, 500_000),
            row(2, "s", 3, 400_000),
            row(3, "s", 4, 1),
        ];
        assert_eq!(
            batch_of(&big).taken,
            2,
            "900,000 bytes fit, one more does not"
        );
        let huge = [row(1, "s", 2, 5_000_000), row(2, "s", 3, 1)];
        assert_eq!(
            batch_of(&huge).taken,
            1,
            "a commit larger than a batch goes alone"
        );
        assert_eq!(batch_of(&[]).taken, 0);
    }

    #[test]
    fn the_backoff_doubles_from_a_second_to_a_minute() {
        let waits: Vec<u64> = (0..9).map(backoff_ms).collect();
        assert_eq!(
            waits,
            [
                1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000, 60_000
            ]
        );
    }

    #[test]
    fn after_a_failed_guard_what_the_record_holds_is_dropped_and_a_gap_is_an_error() {
        let first = row(7, "s", 5, 10);
        assert_eq!(
            held_after_guard(&first, 5),
            Ok(5),
            "it holds the first commit"
        );
        assert_eq!(held_after_guard(&first, 9), Ok(9), "and later ones");
        let gap = held_after_guard(&first, 3).unwrap_err();
        assert_eq!(
            gap,
            StoreError::Backend(
                "D1 holds version 3 of session s, but the next commit queued is 5".into()
            )
        );
    }
}
