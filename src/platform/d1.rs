//! The [`Store`] on D1 (schema in `migrations/`; the rows each write sends are planned
//! in [`crate::store::rows`]). Every commit is one `batch()`: a version-guarded update of
//! the session row, a guard insert that fails when that update changed nothing (rolling
//! the whole batch back: a lost race is [`StoreError::Stale`], never a partial write),
//! then the new messages, the state log row, the run and the checkpoint.
//!
//! Reads are served from a write-through [`Image`] of each session: in a Durable Object
//! the store serves one session and is its only writer, so after the first read a drive
//! costs one D1 round trip per commit and none to load. The compare-and-set still
//! guards every commit, so an image that is out of date can only make a commit fail
//! (then it is dropped and read again), never overwrite anything.

use crate::message::Message;
use crate::store::rows::{
    self, Arg, Image, SELECT_HEAD, SELECT_STATE, SELECT_STATE_AT, SELECT_SUBSESSIONS, StateRow,
    Statement, from_json, plan_commit, plan_create,
};
use crate::store::{
    CheckpointRecord, ChildSession, Commit, InterruptRequest, Loaded, NewSession, RunRecord, Store,
    StoreError, SubSession,
};
use serde_json::Value;
use std::cell::{Cell, RefCell};
use worker::wasm_bindgen::JsValue;
use worker::{D1Database, D1PreparedStatement};

/// Sessions in D1.
pub struct D1Store {
    db: D1Database,
    /// Write-through images of the sessions this store serves.
    images: RefCell<Images>,
    /// Bumped by every write once it lands: an image read or planned while it moved may
    /// miss that write, so it is not kept.
    epoch: Cell<u64>,
    /// Whether images are kept (off: every read goes to D1, as the conformance suite
    /// checks both ways).
    caching: bool,
}

/// Images by session id. An object's store serves its own session and, now and then,
/// a relative's: a short list, searched in place.
#[derive(Default)]
struct Images(Vec<(String, Image)>);

impl Images {
    fn get_mut(&mut self, id: &str) -> Option<&mut Image> {
        self.0
            .iter_mut()
            .find(|(k, _)| k == id)
            .map(|(_, image)| image)
    }

    fn insert(&mut self, id: &str, image: Image) {
        match self.0.iter().position(|(k, _)| k == id) {
            Some(at) => self.0[at].1 = image,
            None => self.0.push((id.to_string(), image)),
        }
    }

    fn remove(&mut self, id: &str) -> Option<Image> {
        let at = self.0.iter().position(|(k, _)| k == id)?;
        Some(self.0.swap_remove(at).1)
    }
}

fn backend(e: worker::Error) -> StoreError {
    match e {
        worker::Error::D1(d1) => StoreError::Backend(d1.cause()),
        other => StoreError::Backend(other.to_string()),
    }
}

/// Integers go through JS numbers; every value here stays far below 2^53.
fn num(n: u64) -> JsValue {
    JsValue::from_f64(n as f64)
}

fn text(s: &str) -> JsValue {
    JsValue::from_str(s)
}

/// One result row: its cells in the SELECT's column order. Rows are read as arrays and
/// decoded by hand (no serde_wasm_bindgen deserializer per row type in the bundle).
struct Row(Vec<JsValue>);

impl Row {
    fn cell(&self, i: usize) -> Result<&JsValue, StoreError> {
        self.0
            .get(i)
            .ok_or_else(|| StoreError::Corrupt(format!("a row has no column {i}")))
    }
    fn text(&self, i: usize) -> Result<String, StoreError> {
        self.cell(i)?
            .as_string()
            .ok_or_else(|| StoreError::Corrupt(format!("column {i} is not text")))
    }
    fn opt_text(&self, i: usize) -> Result<Option<String>, StoreError> {
        let cell = self.cell(i)?;
        if cell.is_null() || cell.is_undefined() {
            return Ok(None);
        }
        self.text(i).map(Some)
    }
    fn int(&self, i: usize) -> Result<u64, StoreError> {
        self.cell(i)?
            .as_f64()
            .filter(|n| *n >= 0.0)
            .map(|n| n as u64)
            .ok_or_else(|| StoreError::Corrupt(format!("column {i} is not a count")))
    }
    /// The JSON in column `i`.
    fn json<T: serde::de::DeserializeOwned>(&self, i: usize) -> Result<T, StoreError> {
        from_json(&self.text(i)?)
    }
}

/// `(kind, body)` rows of the state log.
fn state_log(rows: &[Row]) -> Result<Vec<(String, String)>, StoreError> {
    rows.iter().map(|r| Ok((r.text(0)?, r.text(1)?))).collect()
}

fn state_rows(log: &[(String, String)]) -> impl Iterator<Item = StateRow<'_>> {
    log.iter().map(|(kind, body)| StateRow { kind, body })
}

impl D1Store {
    /// A store over the `DB` binding that keeps images of the sessions it serves.
    pub fn new(db: D1Database) -> Self {
        Self {
            db,
            images: RefCell::default(),
            epoch: Cell::new(0),
            caching: true,
        }
    }

    /// A store that reads everything from D1 every time.
    #[cfg(feature = "test-routes")]
    pub fn uncached(db: D1Database) -> Self {
        Self {
            caching: false,
            ..Self::new(db)
        }
    }

    fn stmt(&self, sql: &str, args: &[JsValue]) -> Result<D1PreparedStatement, StoreError> {
        self.db.prepare(sql).bind(args).map_err(backend)
    }

    /// Runs one statement and returns its rows.
    async fn read(&self, sql: &str, args: &[JsValue]) -> Result<Vec<Row>, StoreError> {
        let rows = self
            .stmt(sql, args)?
            .raw_js_value()
            .await
            .map_err(backend)?;
        Ok(rows
            .iter()
            .map(|r| Row(worker::js_sys::Array::from(r).to_vec()))
            .collect())
    }

    fn prepared(&self, s: &Statement) -> Result<D1PreparedStatement, StoreError> {
        let args: Vec<JsValue> = s
            .args
            .iter()
            .map(|a| match a {
                Arg::Text(t) => text(t),
                Arg::Int(n) => num(*n),
            })
            .collect();
        self.stmt(s.sql, &args)
    }

    async fn execute(&self, batch: &[Statement]) -> Result<(), StoreError> {
        let prepared = batch
            .iter()
            .map(|s| self.prepared(s))
            .collect::<Result<Vec<_>, _>>()?;
        self.db.batch(prepared).await.map_err(backend).map(|_| ())
    }

    /// Records that a write landed.
    fn bump(&self) {
        self.epoch.set(self.epoch.get() + 1);
    }

    /// Keeps `image` unless a write landed since `epoch` (it may predate that write).
    fn keep(&self, id: &str, image: Image, epoch: u64) {
        let mut images = self.images.borrow_mut();
        if self.caching && self.epoch.get() == epoch {
            images.insert(id, image);
        } else {
            images.remove(id);
        }
    }

    /// Reads a session's image from D1: its row (a missing session costs one read),
    /// then the state log from the newest snapshot. The reads are not
    /// one transaction: an image that a write may have overtaken is not kept (`keep`),
    /// and every commit's compare-and-set catches the rest.
    async fn fetch(&self, id: &str) -> Result<Option<Image>, StoreError> {
        let head = self.read(SELECT_HEAD, &[text(id)]).await?;
        let Some(head) = head.first() else {
            return Ok(None);
        };
        let state = self.read(SELECT_STATE, &[text(id)]).await?;
        let log = state_log(&state)?;
        Image::from_rows(
            &head.text(0)?,
            head.opt_text(1)?.as_deref(),
            head.int(2)?,
            state_rows(&log),
        )
        .map(Some)
    }

    /// Runs `f` on the session's image, read from D1 if it is not kept; `None` if
    /// there is no such session.
    async fn with_image<R>(
        &self,
        id: &str,
        f: impl FnOnce(&mut Image) -> R,
    ) -> Result<Option<R>, StoreError> {
        if let Some(image) = self.images.borrow_mut().get_mut(id) {
            return Ok(Some(f(image)));
        }
        let epoch = self.epoch.get();
        let Some(mut image) = self.fetch(id).await? else {
            return Ok(None);
        };
        let result = f(&mut image);
        self.keep(id, image, epoch);
        Ok(Some(result))
    }

    /// The state at session `version`: the newest snapshot at or before it, plus patches.
    async fn state_at(&self, id: &str, version: u64) -> Result<Value, StoreError> {
        let rows = self
            .read(SELECT_STATE_AT, &[text(id), num(version)])
            .await?;
        let log = state_log(&rows)?;
        Ok(rows::fold_state(state_rows(&log))?.0)
    }
}

impl Store for D1Store {
    async fn create(&self, session: NewSession) -> Result<(), StoreError> {
        let id = session.head.id.clone();
        let (batch, image) = plan_create(session)?;
        let epoch = self.epoch.get();
        let outcome = self.execute(&batch).await;
        match outcome {
            Ok(()) => {
                self.keep(&id, image, epoch);
                self.bump();
                Ok(())
            }
            Err(StoreError::Backend(m)) if m.contains("UNIQUE constraint failed: sessions.id") => {
                Err(StoreError::Exists(id))
            }
            Err(other) => Err(other),
        }
    }

    async fn load(&self, id: &str) -> Result<Option<Loaded>, StoreError> {
        self.with_image(id, |image| image.loaded()).await
    }

    async fn messages(
        &self,
        id: &str,
        offset: u64,
        limit: u64,
    ) -> Result<Vec<Message>, StoreError> {
        let known = self
            .with_image(id, |image| {
                let whole = offset == 0 && limit >= image.head.message_count;
                (
                    image.messages(offset, limit),
                    whole.then_some(image.head.version),
                )
            })
            .await?;
        let (whole, version) = match known {
            None => return Err(StoreError::NotFound(id.into())),
            Some((Some(messages), _)) => return Ok(messages),
            Some((None, version)) => (version.is_some(), version),
        };
        let sql = "SELECT body FROM messages WHERE session_id = ?1 AND seq >= ?2 AND seq < ?3 ORDER BY seq";
        let args = [text(id), num(offset), num(offset.saturating_add(limit))];
        let messages = self
            .read(sql, &args)
            .await?
            .iter()
            .map(|r| r.json(0))
            .collect::<Result<Vec<Message>, _>>()?;
        // The whole transcript of the version still kept: keep it with the image.
        if whole
            && let Some(image) = self.images.borrow_mut().get_mut(id)
            && Some(image.head.version) == version
            && image.head.message_count == messages.len() as u64
        {
            image.messages = Some(messages.clone());
        }
        Ok(messages)
    }

    async fn commit(
        &self,
        id: &str,
        expected_version: u64,
        commit: Commit,
    ) -> Result<u64, StoreError> {
        let epoch = self.epoch.get();
        let kept = self.images.borrow_mut().remove(id);
        let mut image = match kept {
            Some(image) if image.head.version == expected_version => image,
            // Not kept, or kept at another version: D1 decides.
            _ => self
                .fetch(id)
                .await?
                .ok_or_else(|| StoreError::NotFound(id.into()))?,
        };
        let batch = plan_commit(&mut image, expected_version, commit)?;
        let version = image.head.version;
        match self.execute(&batch).await {
            Ok(()) => {
                self.keep(id, image, epoch);
                self.bump();
                Ok(version)
            }
            Err(e) => {
                self.bump();
                match e {
                    StoreError::Backend(m) if m.contains("CHECK constraint failed") => {
                        Err(StoreError::Stale {
                            expected: expected_version,
                        })
                    }
                    other => Err(other),
                }
            }
        }
    }

    async fn request_interrupt(&self, id: &str, reason: Option<String>) -> Result<(), StoreError> {
        let request = InterruptRequest { reason };
        let body = rows::to_json(&request)?;
        let sql = "UPDATE sessions SET interrupt = ?1 WHERE id = ?2 RETURNING id";
        match self.read(sql, &[text(&body), text(id)]).await?.len() {
            1 => {
                self.bump();
                if let Some(image) = self.images.borrow_mut().get_mut(id) {
                    image.interrupt = Some(request);
                }
                Ok(())
            }
            _ => Err(StoreError::NotFound(id.into())),
        }
    }

    async fn runs(&self, id: &str) -> Result<Vec<RunRecord>, StoreError> {
        let sql = "SELECT body FROM runs WHERE session_id = ?1 ORDER BY turn";
        let rows = self.read(sql, &[text(id)]).await?;
        rows.iter().map(|r| r.json(0)).collect()
    }

    async fn checkpoints(&self, id: &str) -> Result<Vec<CheckpointRecord>, StoreError> {
        let sql = "SELECT body FROM checkpoints WHERE session_id = ?1 ORDER BY version, rowid";
        let rows = self.read(sql, &[text(id)]).await?;
        rows.iter().map(|r| r.json(0)).collect()
    }

    async fn checkpoint_state(
        &self,
        id: &str,
        checkpoint_id: &str,
    ) -> Result<Option<(CheckpointRecord, Value)>, StoreError> {
        let sql = "SELECT version, body FROM checkpoints WHERE session_id = ?1 AND id = ?2";
        let rows = self.read(sql, &[text(id), text(checkpoint_id)]).await?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        let state = self.state_at(id, row.int(0)?).await?;
        Ok(Some((row.json(1)?, state)))
    }

    async fn subsessions(&self, parent_id: &str) -> Result<Vec<ChildSession>, StoreError> {
        let rows = self.read(SELECT_SUBSESSIONS, &[text(parent_id)]).await?;
        rows.iter()
            .map(|r| {
                let record = SubSession {
                    child_id: r.text(0)?,
                    agent: r.text(1)?,
                    tool_call_id: r.text(2)?,
                    status: r.text(3)?,
                    created_at: r.int(4)?,
                    updated_at: r.int(5)?,
                };
                rows::child_session(record, r.opt_text(6)?.as_deref())
            })
            .collect()
    }
}
