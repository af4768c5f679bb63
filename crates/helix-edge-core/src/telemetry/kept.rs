//! A session's spans, kept in its object's SQLite ([`KeptSpans`]): written once per
//! slice, read back per run (the console's timeline), and the export's durable queue —
//! each span `unsent` until an export took it (`sent`) or gave up on it (`dropped`,
//! counted). The newest [`MAX_KEPT`] are kept (an older one is forgotten, sent or not).

use super::{Span, SpanSink};
use crate::sqlite::{Db, Row, int, text};
use crate::store::rows::Arg;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// The most spans a session keeps (the oldest go first).
pub const MAX_KEPT: i64 = 2000;

const TABLE: &str = "CREATE TABLE IF NOT EXISTS spans (seq INTEGER PRIMARY KEY AUTOINCREMENT, \
    run_id TEXT NOT NULL, body TEXT NOT NULL, export INTEGER NOT NULL DEFAULT 0)";

/// Where a kept span's export stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Export {
    /// Waiting (or no endpoint is configured).
    Unsent = 0,
    /// Taken by the endpoint.
    Sent = 1,
    /// Given up on: counted, never retried.
    Dropped = 2,
}

/// How a session's spans stand.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportCounts {
    /// Not sent yet.
    pub unsent: u64,
    /// Taken by the endpoint.
    pub sent: u64,
    /// Given up on.
    pub dropped: u64,
}

/// Spans kept in the object's SQLite; a [`SpanSink`] that writes each slice's at once.
pub struct KeptSpans {
    db: Rc<dyn Db>,
    /// The spans of the slice in progress (written when it ends).
    pending: RefCell<Vec<Span>>,
    created: Cell<bool>,
}

impl KeptSpans {
    /// Spans kept in `db`.
    pub fn new(db: Rc<dyn Db>) -> Self {
        Self {
            db,
            pending: RefCell::new(Vec::new()),
            created: Cell::new(false),
        }
    }

    fn table(&self) -> Result<(), String> {
        if !self.created.get() {
            self.db.query(TABLE, &[])?;
            self.created.set(true);
        }
        Ok(())
    }

    /// Writes the spans recorded so far (one statement), and forgets the oldest past
    /// [`MAX_KEPT`].
    pub fn write(&self) -> Result<usize, String> {
        let spans = std::mem::take(&mut *self.pending.borrow_mut());
        if spans.is_empty() {
            return Ok(0);
        }
        self.table()?;
        // A statement per span, in one transaction: a statement's bound parameters are
        // few on the platform (100), and a slice may have many spans.
        let insert = "INSERT INTO spans (run_id, body) VALUES (?1, ?2)";
        let mut statements = Vec::with_capacity(spans.len() + 1);
        for span in &spans {
            let run = match span.attr("helix.run.id") {
                Some(super::Attr::Str(run)) => run.clone(),
                _ => String::new(),
            };
            let body = serde_json::to_string(span).map_err(|e| e.to_string())?;
            statements.push((insert.to_string(), vec![Arg::Text(run), Arg::Text(body)]));
        }
        let prune = "DELETE FROM spans WHERE seq <= (SELECT MAX(seq) FROM spans) - ?1";
        statements.push((prune.to_string(), vec![Arg::Int(MAX_KEPT as u64)]));
        self.db.atomically(&statements)?;
        Ok(spans.len())
    }

    /// The spans of run `run_id`, oldest first (at most [`MAX_KEPT`]).
    pub fn of_run(&self, run_id: &str) -> Result<Vec<serde_json::Value>, String> {
        self.table()?;
        let q = "SELECT body FROM spans WHERE run_id = ?1 ORDER BY seq";
        let rows = self.db.query(q, &[Arg::Text(run_id.into())])?;
        Ok(rows.iter().filter_map(|r| parse(r, 0)).collect())
    }

    /// Up to `limit` unsent spans (as [`Span`] serializes), oldest first, with their
    /// sequence numbers.
    pub fn unsent(&self, limit: u32) -> Result<Vec<(i64, serde_json::Value)>, String> {
        self.table()?;
        let q = "SELECT seq, body FROM spans WHERE export = 0 ORDER BY seq LIMIT ?1";
        let rows = self.db.query(q, &[Arg::Int(limit.into())])?;
        Ok(rows
            .iter()
            .filter_map(|r| Some((int(r, 0)?, parse(r, 1)?)))
            .collect())
    }

    /// Marks spans `seqs` as `export`.
    pub fn mark(&self, seqs: &[i64], export: Export) -> Result<(), String> {
        let (Some(first), Some(last)) = (seqs.iter().min(), seqs.iter().max()) else {
            return Ok(());
        };
        let q = "UPDATE spans SET export = ?1 WHERE seq >= ?2 AND seq <= ?3 AND export = 0";
        let args = [
            Arg::Int(export as u64),
            Arg::Int(*first as u64),
            Arg::Int(*last as u64),
        ];
        self.db.query(q, &args).map(drop)
    }

    /// How the kept spans' export stands.
    pub fn counts(&self) -> Result<ExportCounts, String> {
        self.table()?;
        let q = "SELECT export, COUNT(*) FROM spans GROUP BY export";
        let mut counts = ExportCounts::default();
        for row in self.db.query(q, &[])? {
            let n = int(&row, 1).unwrap_or(0).max(0) as u64;
            match int(&row, 0) {
                Some(0) => counts.unsent = n,
                Some(1) => counts.sent = n,
                _ => counts.dropped += n,
            }
        }
        Ok(counts)
    }
}

fn parse(row: &Row, i: usize) -> Option<serde_json::Value> {
    serde_json::from_str(&text(row, i)?).ok()
}

impl SpanSink for KeptSpans {
    fn record(&self, span: Span) {
        self.pending.borrow_mut().push(span);
    }

    fn flush(&self) -> Result<(), String> {
        self.write().map(drop)
    }
}
