//! The row layout of the D1 store (schema in `migrations/`), pure so that it runs and
//! is measured natively: the statements a create or a commit writes, and the session
//! [`Image`] they leave behind — the write-through copy of a session's rows that the
//! store serves reads from.
//!
//! Bytes written per commit follow the size of the change, not of the session: messages
//! are appended one row each, the state is a log of patches, and a full snapshot is
//! written only once the patches since the last one add up to more than the snapshot
//! itself ([`snapshot_due`]), so that a load reads at most about twice the state and a
//! step's amortised cost stays proportional to its patch. Checkpoints reference a
//! session version and a transcript length; they copy neither.

pub use super::planned::PlannedStore;
pub use super::sql_failure::SqlFailure;
use super::{
    CheckpointRecord, ChildMode, ChildStatus, Commit, InterruptRequest, Loaded, NewSession,
    RunRecord, SessionHead, StateChange, StoreError, SubSession,
};
use crate::message::Message;
use crate::state::PatchOp;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// A snapshot is never due before the patches since the last one reach this size.
pub const SNAPSHOT_MIN_BYTES: usize = 4096;

/// Whether the state log should start over with a snapshot: once the patches since the
/// last snapshot (`log_bytes`) outweigh it.
pub fn snapshot_due(snapshot_bytes: usize, log_bytes: usize) -> bool {
    log_bytes > snapshot_bytes.max(SNAPSHOT_MIN_BYTES)
}

/// D1 stores at most 2,000,000 bytes in a row. No statement of a plan carries more than
/// this, which leaves a margin for the row's other columns; a plan that would is
/// refused with [`StoreError::TooLarge`] before anything is written.
pub const MAX_ROW_BYTES: usize = 1_900_000;

/// The largest state change one step may make. It is written as one row and also
/// streamed as one `state_patch` event (staged in the object's SQLite, whose rows have
/// the same 2 MB limit).
pub const MAX_PATCH_BYTES: usize = 1 << 20;

/// Refuses a plan with a statement over [`MAX_ROW_BYTES`].
fn fits(batch: &[Statement]) -> Result<(), StoreError> {
    match batch.iter().find(|s| s.bytes() > MAX_ROW_BYTES) {
        None => Ok(()),
        Some(s) => Err(StoreError::TooLarge {
            what: s.what(),
            bytes: s.bytes(),
            limit: MAX_ROW_BYTES,
        }),
    }
}

/// The guard statement of a commit batch.
const GUARD: &str = "INSERT OR REPLACE INTO cas_guard (id, ok) VALUES (1, changes())";

/// A bound SQL parameter.
#[derive(Debug, Clone, PartialEq)]
pub enum Arg {
    /// TEXT.
    Text(String),
    /// INTEGER (every value stays far below 2^53, so it survives a JS number).
    Int(u64),
    /// NULL.
    Null,
}

impl Arg {
    /// TEXT, or NULL for nothing (a query's optional filter).
    pub fn text_or_null(value: Option<&str>) -> Self {
        value.map_or(Self::Null, |t| Self::Text(t.into()))
    }
}

/// One SQL statement with its parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Statement {
    /// The SQL, with `?1`… placeholders.
    pub sql: &'static str,
    /// The parameters.
    pub args: Vec<Arg>,
}

impl Statement {
    /// The bytes of data it carries: text lengths, 8 per integer (the SQL text is a
    /// constant of the deployment, not data).
    pub fn bytes(&self) -> usize {
        self.args
            .iter()
            .map(|a| match a {
                Arg::Text(t) => t.len(),
                Arg::Int(_) => 8,
                Arg::Null => 0,
            })
            .sum()
    }

    /// Whether it is a commit's compare-and-set guard (which fails the batch when the
    /// version-guarded update of the session row matched nothing).
    pub fn is_guard(&self) -> bool {
        self.sql == GUARD
    }

    /// What the statement stores, for errors.
    fn what(&self) -> &'static str {
        let table = self
            .sql
            .split_whitespace()
            .skip_while(|w| *w != "INTO" && *w != "UPDATE")
            .nth(1)
            .unwrap_or("");
        match table {
            "messages" => "message",
            "state_log" => "session state",
            "sessions" => "session record",
            "runs" => "run record",
            _ => "record",
        }
    }
}

fn text(s: &str) -> Arg {
    Arg::Text(s.to_string())
}

/// Serialises a stored value.
pub fn to_json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// Parses a stored value.
pub fn from_json<T: DeserializeOwned>(text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// Reads the session row.
pub const SELECT_HEAD: &str =
    "SELECT head, interrupt, snapshot_version FROM sessions WHERE id = ?1";
/// Reads the state log from the newest snapshot on.
pub const SELECT_STATE: &str = "SELECT kind, body FROM state_log WHERE session_id = ?1 AND version >= \
     (SELECT snapshot_version FROM sessions WHERE id = ?1) ORDER BY version";
/// Reads the state log needed to rebuild the state at version `?2`.
pub const SELECT_STATE_AT: &str = "SELECT kind, body FROM state_log WHERE session_id = ?1 AND version <= ?2 AND version >= \
     (SELECT MAX(version) FROM state_log WHERE session_id = ?1 AND kind = 'snapshot' AND version <= ?2) \
     ORDER BY version";

/// Reads a parent's child-session references.
pub const SELECT_SUBSESSIONS: &str = "SELECT child_id, agent, tool_call_id, status, created_at, updated_at, name, mode \
     FROM subsessions WHERE parent_id = ?1 ORDER BY created_at, rowid";

/// A stored persistent child's mode.
pub fn child_mode(text: &str) -> Result<ChildMode, StoreError> {
    from_json(&format!("\"{text}\""))
}

/// A stored child status.
pub fn child_status(text: &str) -> Result<ChildStatus, StoreError> {
    from_json(&format!("\"{text}\""))
}

fn subsession_upsert(parent_id: &str, s: &SubSession) -> Statement {
    let optional = |v: Option<&str>| v.map_or(Arg::Null, text);
    Statement {
        sql: "INSERT INTO subsessions (parent_id, child_id, agent, tool_call_id, status, created_at, updated_at, name, mode) \
              VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT (parent_id, child_id) DO UPDATE SET \
              tool_call_id = excluded.tool_call_id, status = excluded.status, updated_at = excluded.updated_at",
        args: vec![
            text(parent_id),
            text(&s.child_id),
            text(&s.agent),
            text(&s.tool_call_id),
            text(s.status.as_str()),
            Arg::Int(s.created_at),
            Arg::Int(s.updated_at),
            optional(s.name.as_deref()),
            optional(s.mode.map(ChildMode::as_str)),
        ],
    }
}

/// A session as its rows say, kept by the store that serves it.
#[derive(Debug, Clone, PartialEq)]
pub struct Image {
    /// The head (with the durable version).
    pub head: SessionHead,
    /// The pending interrupt request.
    pub interrupt: Option<InterruptRequest>,
    /// The current state.
    pub state: Value,
    /// Version of the newest snapshot in the state log.
    pub snapshot_version: u64,
    /// Its size in bytes.
    pub snapshot_bytes: usize,
    /// Bytes of the patches after it.
    pub log_bytes: usize,
    /// The whole transcript, once it was read or written in full.
    pub messages: Option<Vec<Message>>,
}

/// One row of the state log, as read.
pub struct StateRow<'a> {
    /// `snapshot` or `patch`.
    pub kind: &'a str,
    /// Its JSON.
    pub body: &'a str,
}

/// Folds a snapshot and the patches after it into a state; returns it with the
/// snapshot's size and the patches' total size.
pub fn fold_state<'a>(
    rows: impl IntoIterator<Item = StateRow<'a>>,
) -> Result<(Value, usize, usize), StoreError> {
    let mut rows = rows.into_iter();
    let first = rows
        .next()
        .ok_or_else(|| StoreError::Corrupt("no state snapshot".into()))?;
    if first.kind != "snapshot" {
        return Err(StoreError::Corrupt(
            "the state log does not start with a snapshot".into(),
        ));
    }
    let mut state: Value = from_json(first.body)?;
    let (mut snapshot_bytes, mut log_bytes) = (first.body.len(), 0);
    for row in rows {
        if row.kind == "snapshot" {
            state = from_json(row.body)?;
            (snapshot_bytes, log_bytes) = (row.body.len(), 0);
            continue;
        }
        let ops: Vec<PatchOp> = from_json(row.body)?;
        for op in &ops {
            op.apply(&mut state)
                .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        }
        log_bytes += row.body.len();
    }
    Ok((state, snapshot_bytes, log_bytes))
}

impl Image {
    /// An image from the rows read by [`SELECT_HEAD`] and [`SELECT_STATE`].
    pub fn from_rows<'a>(
        head: &str,
        interrupt: Option<&str>,
        snapshot_version: u64,
        state: impl IntoIterator<Item = StateRow<'a>>,
    ) -> Result<Self, StoreError> {
        let (state, snapshot_bytes, log_bytes) = fold_state(state)?;
        Ok(Self {
            head: from_json(head)?,
            interrupt: interrupt.map(from_json).transpose()?,
            state,
            snapshot_version,
            snapshot_bytes,
            log_bytes,
            messages: None,
        })
    }

    /// The session as the runner loads it.
    pub fn loaded(&self) -> Loaded {
        Loaded {
            head: self.head.clone(),
            state: self.state.clone(),
            interrupt: self.interrupt.clone(),
        }
    }

    /// Messages `offset..offset+limit`, if the image holds the transcript.
    pub fn messages(&self, offset: u64, limit: u64) -> Option<Vec<Message>> {
        let all = self.messages.as_ref()?;
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(all.len());
        let end = start
            .saturating_add(usize::try_from(limit).unwrap_or(usize::MAX))
            .min(all.len());
        Some(all[start..end].to_vec())
    }
}

fn message_inserts(
    id: &str,
    base: u64,
    messages: &[Message],
) -> Result<Vec<Statement>, StoreError> {
    messages
        .iter()
        .enumerate()
        .map(|(i, m)| {
            Ok(Statement {
                sql: "INSERT INTO messages (session_id, seq, body) VALUES (?1, ?2, ?3)",
                args: vec![text(id), Arg::Int(base + i as u64), Arg::Text(to_json(m)?)],
            })
        })
        .collect()
}

fn run_upsert(id: &str, run: &RunRecord) -> Result<Statement, StoreError> {
    Ok(Statement {
        sql: "INSERT INTO runs (session_id, run_id, turn, body) VALUES (?1, ?2, ?3, ?4) \
              ON CONFLICT (session_id, run_id) DO UPDATE SET body = excluded.body",
        args: vec![
            text(id),
            text(&run.run_id),
            Arg::Int(u64::from(run.turn)),
            Arg::Text(to_json(run)?),
        ],
    })
}

fn checkpoint_insert(
    id: &str,
    version: u64,
    c: &CheckpointRecord,
) -> Result<Statement, StoreError> {
    Ok(Statement {
        sql: "INSERT INTO checkpoints (session_id, id, version, body) VALUES (?1, ?2, ?3, ?4)",
        args: vec![
            text(id),
            text(&c.id),
            Arg::Int(version),
            Arg::Text(to_json(c)?),
        ],
    })
}

fn state_insert(id: &str, version: u64, kind: &str, body: String) -> Statement {
    Statement {
        sql: "INSERT INTO state_log (session_id, version, kind, body) VALUES (?1, ?2, ?3, ?4)",
        args: vec![text(id), Arg::Int(version), text(kind), Arg::Text(body)],
    }
}

fn status_text(head: &SessionHead) -> Result<String, StoreError> {
    Ok(to_json(&head.status)?.trim_matches('"').to_string())
}

/// The rows of session `id` only the record (D1) keeps, one line per feature that keeps
/// some: with `schedules`, its schedules.
const RECORD_ONLY: &[&str] = &[
    #[cfg(feature = "schedules")]
    DELETE_RECORD_SCHEDULES,
];

/// Removes a session's schedules from the record (feature `schedules`).
pub const DELETE_RECORD_SCHEDULES: &str = "DELETE FROM schedules WHERE session_id = ?1";

/// [`plan_delete`] for the record, with the rows only it keeps.
pub fn plan_record_delete(id: &str) -> Vec<Statement> {
    let mut plan = plan_delete(id);
    for &sql in RECORD_ONLY {
        plan.push(Statement {
            sql,
            args: vec![text(id)],
        });
    }
    plan
}

/// The statements that remove session `id` and everything recorded for it, in one batch
/// (its child records, not the children).
pub fn plan_delete(id: &str) -> Vec<Statement> {
    const DELETES: [&str; 6] = [
        "DELETE FROM messages WHERE session_id = ?1",
        "DELETE FROM state_log WHERE session_id = ?1",
        "DELETE FROM runs WHERE session_id = ?1",
        "DELETE FROM checkpoints WHERE session_id = ?1",
        "DELETE FROM subsessions WHERE parent_id = ?1",
        "DELETE FROM sessions WHERE id = ?1",
    ];
    DELETES
        .into_iter()
        .map(|sql| Statement {
            sql,
            args: vec![text(id)],
        })
        .collect()
}

/// The statements that create a session (one batch; a taken id fails on the primary
/// key) and the image they leave.
pub fn plan_create(session: NewSession) -> Result<(Vec<Statement>, Image), StoreError> {
    let mut head = session.head;
    head.version = 1;
    head.message_count = session.messages.len() as u64;
    let id = head.id.clone();
    let snapshot = to_json(&session.state)?;
    let mut batch = vec![Statement {
        sql: "INSERT INTO sessions (id, agent, status, version, head, interrupt, snapshot_version, created_at, \
              updated_at) VALUES (?1, ?2, ?3, 1, ?4, NULL, 1, ?5, ?5)",
        args: vec![
            text(&id),
            text(&head.agent),
            Arg::Text(status_text(&head)?),
            Arg::Text(to_json(&head)?),
            Arg::Int(head.created_at),
        ],
    }];
    batch.extend(message_inserts(&id, 0, &session.messages)?);
    let snapshot_bytes = snapshot.len();
    batch.push(state_insert(&id, 1, "snapshot", snapshot));
    batch.push(run_upsert(&id, &head.run)?);
    batch.push(checkpoint_insert(&id, 1, &session.checkpoint)?);
    fits(&batch)?;
    let image = Image {
        head,
        interrupt: None,
        state: session.state,
        snapshot_version: 1,
        snapshot_bytes,
        log_bytes: 0,
        messages: Some(session.messages),
    };
    Ok((batch, image))
}

/// The statements of one compare-and-set commit, in batch order: the version-guarded
/// update of the session row, a guard insert that fails the batch when that update
/// matched nothing (so a lost race rolls everything back), then the messages, the state
/// log row, the run and the checkpoint. Turns `image` into the image after the commit;
/// on an error (a stale version, an inconsistent message count, a patch that does not
/// apply) `image` is unchanged.
pub fn plan_commit(
    image: &mut Image,
    expected_version: u64,
    commit: Commit,
) -> Result<Vec<Statement>, StoreError> {
    if image.head.version != expected_version {
        return Err(StoreError::Stale {
            expected: expected_version,
        });
    }
    let id = image.head.id.clone();
    let version = expected_version + 1;
    let mut head = commit.head;
    head.version = version;
    let base = commit
        .truncate_messages_to
        .unwrap_or(image.head.message_count);
    if base > image.head.message_count || head.message_count != base + commit.messages.len() as u64
    {
        return Err(StoreError::Corrupt(format!(
            "the commit says {} messages, but {} + {} were written",
            head.message_count,
            base,
            commit.messages.len()
        )));
    }
    // The state log row: a patch, or a snapshot once the patches outweigh the last one.
    enum Row {
        Patch(Vec<PatchOp>, String),
        PatchThenSnapshot(Vec<PatchOp>),
        Replace(Value),
    }
    let row = match commit.state {
        StateChange::None => None,
        StateChange::Replace(state) => Some(Row::Replace(state)),
        StateChange::Patch(ops) => {
            let body = to_json(&ops)?;
            if body.len() > MAX_PATCH_BYTES {
                return Err(StoreError::TooLarge {
                    what: "state change",
                    bytes: body.len(),
                    limit: MAX_PATCH_BYTES,
                });
            }
            if snapshot_due(image.snapshot_bytes, image.log_bytes + body.len()) {
                Some(Row::PatchThenSnapshot(ops))
            } else {
                Some(Row::Patch(ops, body))
            }
        }
    };
    let snapshot_version = match row {
        Some(Row::PatchThenSnapshot(_) | Row::Replace(_)) => version,
        _ => image.snapshot_version,
    };
    let mut batch = vec![
        Statement {
            sql: "UPDATE sessions SET version = ?1, status = ?2, head = ?3, updated_at = ?4, snapshot_version = ?5, \
                  interrupt = CASE WHEN ?6 = 1 THEN NULL ELSE interrupt END WHERE id = ?7 AND version = ?8",
            args: vec![
                Arg::Int(version),
                Arg::Text(status_text(&head)?),
                Arg::Text(to_json(&head)?),
                Arg::Int(head.updated_at),
                Arg::Int(snapshot_version),
                Arg::Int(u64::from(commit.clear_interrupt)),
                text(&id),
                Arg::Int(expected_version),
            ],
        },
        // Fails the batch (CHECK ok = 1) when the guarded update matched no row.
        Statement {
            sql: GUARD,
            args: Vec::new(),
        },
    ];
    if let Some(n) = commit.truncate_messages_to {
        batch.push(Statement {
            sql: "DELETE FROM messages WHERE session_id = ?1 AND seq >= ?2",
            args: vec![text(&id), Arg::Int(n)],
        });
        // The checkpoints past what is kept belong to the branch a rollback abandons:
        // their messages are gone.
        batch.push(Statement {
            sql: "DELETE FROM checkpoints WHERE session_id = ?1 AND json_extract(body, '$.messageCount') > ?2",
            args: vec![text(&id), Arg::Int(n)],
        });
    }
    batch.extend(message_inserts(&id, base, &commit.messages)?);
    let (run, checkpoint) = (
        run_upsert(&id, &head.run)?,
        commit
            .checkpoint
            .as_ref()
            .map(|c| checkpoint_insert(&id, version, c))
            .transpose()?,
    );
    batch.push(run);
    batch.extend(checkpoint);
    batch.extend(commit.subsessions.iter().map(|c| subsession_upsert(&id, c)));
    fits(&batch)?;
    // Everything fallible is done but the state row; the image changes only once that
    // is built and fits too.
    match row {
        None => {}
        Some(Row::Patch(ops, body)) => {
            crate::state::apply_all(&mut image.state, &ops)
                .map_err(|e| StoreError::Corrupt(e.to_string()))?;
            image.log_bytes += body.len();
            batch.push(state_insert(&id, version, "patch", body));
        }
        Some(snapshot) => {
            let state = match snapshot {
                Row::Replace(state) => state,
                Row::PatchThenSnapshot(ops) | Row::Patch(ops, _) => {
                    let mut state = image.state.clone();
                    crate::state::apply_all(&mut state, &ops)
                        .map_err(|e| StoreError::Corrupt(e.to_string()))?;
                    state
                }
            };
            let body = to_json(&state)?;
            let bytes = body.len();
            let row = state_insert(&id, version, "snapshot", body);
            fits(std::slice::from_ref(&row))?;
            image.state = state;
            image.snapshot_version = version;
            image.snapshot_bytes = bytes;
            image.log_bytes = 0;
            batch.push(row);
        }
    }
    if let Some(all) = &mut image.messages {
        all.truncate(base as usize);
        all.extend(commit.messages);
    }
    if commit.clear_interrupt {
        image.interrupt = None;
    }
    image.head = head;
    Ok(batch)
}
