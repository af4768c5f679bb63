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
//!
//! In a Durable Object, creating a session writes nothing to D1: the create is kept in
//! the object's [`Outbox`] and its rows go out in one batch with the first commit, or
//! alone before anything else reads or writes the session in D1.

use crate::message::Message;
use crate::outbox::Outbox;
use crate::store::rows::{
    self, Arg, Image, SELECT_HEAD, SELECT_STATE, SELECT_STATE_AT, SELECT_SUBSESSIONS, SqlFailure,
    StateRow, Statement, from_json, plan_commit, plan_create,
};
use crate::store::{
    CheckpointRecord, Commit, InterruptRequest, Loaded, NewSession, RunRecord, Store, StoreError,
    SubSession,
};
use futures::future::LocalBoxFuture;
use serde_json::Value;
use std::cell::{Cell, RefCell};
use worker::js_sys::{Array, JSON};
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
    /// Where creates wait for their first commit (none: a create is its own batch).
    outbox: Option<Outbox>,
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

/// What a failed statement's message says.
fn failure(e: &StoreError) -> SqlFailure<'_> {
    match e {
        StoreError::Backend(message) => SqlFailure::of(message),
        _ => SqlFailure::Other,
    }
}

/// D1's answer to a second insert of a session row.
fn duplicate_session(e: &StoreError) -> bool {
    failure(e) == SqlFailure::Unique("sessions.id")
}

fn js_arg(a: &Arg) -> JsValue {
    match a {
        Arg::Text(t) => text(t),
        Arg::Int(n) => num(*n),
    }
}

/// A planned batch as JSON, `[[sql, [arg, …]], …]`, to keep in the outbox (written and
/// read by the runtime's `JSON`: no code of its own in the bundle).
fn batch_json(batch: &[Statement]) -> Option<String> {
    let all = Array::new();
    for s in batch {
        let args: Array = s.args.iter().map(js_arg).collect();
        all.push(&Array::of2(&text(s.sql), &args));
    }
    JSON::stringify(&all).ok()?.as_string()
}

/// The largest create kept in the outbox (a value in a Durable Object's SQLite holds at
/// most 2 MB).
const OUTBOX_MAX_BYTES: usize = 1_900_000;

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
            outbox: None,
        }
    }

    /// Keeps creates in `outbox` until the session's first commit.
    pub fn deferring_creates(self, outbox: Outbox) -> Self {
        Self {
            outbox: Some(outbox),
            ..self
        }
    }

    /// The statements of `id`'s create still waiting in the outbox.
    fn unsent(&self, id: &str) -> Result<Vec<D1PreparedStatement>, StoreError> {
        match self.outbox.as_ref().map(|o| o.pending(id)).transpose()? {
            Some(Some(json)) => self.prepared_json(&json),
            _ => Ok(Vec::new()),
        }
    }

    /// Prepares a batch kept as JSON by [`batch_json`].
    fn prepared_json(&self, json: &str) -> Result<Vec<D1PreparedStatement>, StoreError> {
        let corrupt = || StoreError::Corrupt("a create in the outbox is malformed".into());
        let batch = JSON::parse(json).map_err(|_| corrupt())?;
        let mut prepared = Vec::new();
        for s in Array::from(&batch).iter() {
            let s = Array::from(&s);
            let sql = s.get(0).as_string().ok_or_else(corrupt)?;
            prepared.push(self.stmt(&sql, &Array::from(&s.get(1)).to_vec())?);
        }
        Ok(prepared)
    }

    /// Sends every create still waiting in the outbox (an object's own session, in
    /// practice): whatever reads or writes sessions in D1 comes after them. Boxed: its
    /// many callers share one copy of its state machine.
    fn flush(&self) -> LocalBoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            let Some(outbox) = &self.outbox else {
                return Ok(());
            };
            for id in outbox.unsent()? {
                match self.send(self.unsent(&id)?).await {
                    Ok(()) => self.bump(),
                    // It landed before, and the object did not live to record it.
                    Err(e) if duplicate_session(&e) => {}
                    Err(e) => return Err(e),
                }
                outbox.sent(&id)?;
            }
            Ok(())
        })
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

    /// A failure as the store reports it: a statement that failed on the schema is
    /// [`StoreError::SchemaOutdated`], naming the missing migrations.
    async fn failed(&self, e: worker::Error) -> StoreError {
        let e = backend(e);
        match failure(&e) {
            SqlFailure::Schema => crate::schema::outdated(&self.db).await,
            _ => e,
        }
    }

    /// Runs one statement and returns its rows.
    async fn read(&self, sql: &str, args: &[JsValue]) -> Result<Vec<Row>, StoreError> {
        let rows = match self.stmt(sql, args)?.raw_js_value().await {
            Ok(rows) => rows,
            Err(e) => return Err(self.failed(e).await),
        };
        Ok(rows
            .iter()
            .map(|r| Row(worker::js_sys::Array::from(r).to_vec()))
            .collect())
    }

    async fn execute(&self, batch: &[Statement]) -> Result<(), StoreError> {
        self.send(self.prepare_all(batch)?).await
    }

    fn prepare_all(&self, batch: &[Statement]) -> Result<Vec<D1PreparedStatement>, StoreError> {
        let mut prepared = Vec::with_capacity(batch.len());
        for s in batch {
            let args: Vec<JsValue> = s.args.iter().map(js_arg).collect();
            prepared.push(self.stmt(s.sql, &args)?);
        }
        Ok(prepared)
    }

    async fn send(&self, batch: Vec<D1PreparedStatement>) -> Result<(), StoreError> {
        match self.db.batch(batch).await {
            Ok(_) => Ok(()),
            Err(e) => Err(self.failed(e).await),
        }
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
        self.flush().await?;
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
        if let Some(outbox) = &self.outbox {
            let json = batch_json(&batch)
                .ok_or_else(|| StoreError::Backend("cannot keep the new session".into()))?;
            // One value of the object's storage holds at most 2 MB. Creates are at most
            // 1 MiB, so only text that JSON escapes heavily gets here.
            if json.len() > OUTBOX_MAX_BYTES {
                let (bytes, limit) = (json.len(), OUTBOX_MAX_BYTES);
                let what = "new session";
                return Err(StoreError::TooLarge { what, bytes, limit });
            }
            if !outbox.create(&id, &json)? {
                return Err(StoreError::Exists(id));
            }
            self.keep(&id, image, self.epoch.get());
            self.bump();
            return Ok(());
        }
        let epoch = self.epoch.get();
        let outcome = self.execute(&batch).await;
        match outcome {
            Ok(()) => {
                self.keep(&id, image, epoch);
                self.bump();
                Ok(())
            }
            Err(e) if duplicate_session(&e) => Err(StoreError::Exists(id)),
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
        // `with_image` sent a create still in the outbox.
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
        let kept = self.images.borrow_mut().remove(id);
        let (mut image, unsent) = match kept {
            // A create still in the outbox goes out in the same batch, first.
            Some(image) if image.head.version == expected_version => (image, self.unsent(id)?),
            // Not kept, or kept at another version: D1 decides.
            _ => {
                self.flush().await?;
                let image = self.fetch(id).await?;
                (
                    image.ok_or_else(|| StoreError::NotFound(id.into()))?,
                    Vec::new(),
                )
            }
        };
        let epoch = self.epoch.get();
        let mut batch = unsent;
        let created = !batch.is_empty();
        batch.extend(self.prepare_all(&plan_commit(&mut image, expected_version, commit)?)?);
        let version = image.head.version;
        let result = self.send(batch).await;
        if created && let Some(outbox) = &self.outbox {
            match &result {
                // Should this fail, the next flush finds the rows in D1 and clears it.
                Ok(()) => outbox.sent(id).ok(),
                // The create had landed before: D1 has moved on from the image (stale).
                Err(e) if duplicate_session(e) => outbox.sent(id).ok(),
                Err(_) => None,
            };
        }
        match result {
            Ok(()) => {
                self.keep(id, image, epoch);
                self.bump();
                Ok(version)
            }
            Err(e) => {
                self.bump();
                match failure(&e) {
                    SqlFailure::Check => Err(StoreError::Stale {
                        expected: expected_version,
                    }),
                    SqlFailure::Unique("sessions.id") if created => Err(StoreError::Stale {
                        expected: expected_version,
                    }),
                    _ => Err(e),
                }
            }
        }
    }

    async fn request_interrupt(&self, id: &str, reason: Option<String>) -> Result<(), StoreError> {
        self.flush().await?;
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
        self.flush().await?;
        let sql = "SELECT body FROM runs WHERE session_id = ?1 ORDER BY turn";
        let rows = self.read(sql, &[text(id)]).await?;
        rows.iter().map(|r| r.json(0)).collect()
    }

    async fn checkpoints(&self, id: &str) -> Result<Vec<CheckpointRecord>, StoreError> {
        self.flush().await?;
        let sql = "SELECT body FROM checkpoints WHERE session_id = ?1 ORDER BY version, rowid";
        let rows = self.read(sql, &[text(id)]).await?;
        rows.iter().map(|r| r.json(0)).collect()
    }

    async fn checkpoint_state(
        &self,
        id: &str,
        checkpoint_id: &str,
    ) -> Result<Option<(CheckpointRecord, Value)>, StoreError> {
        self.flush().await?;
        let sql = "SELECT version, body FROM checkpoints WHERE session_id = ?1 AND id = ?2";
        let rows = self.read(sql, &[text(id), text(checkpoint_id)]).await?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        let state = self.state_at(id, row.int(0)?).await?;
        Ok(Some((row.json(1)?, state)))
    }

    async fn subsessions(&self, parent_id: &str) -> Result<Vec<SubSession>, StoreError> {
        // Whatever this object created goes first.
        self.flush().await?;
        let rows = self.read(SELECT_SUBSESSIONS, &[text(parent_id)]).await?;
        rows.iter()
            .map(|r| {
                Ok(SubSession {
                    child_id: r.text(0)?,
                    agent: r.text(1)?,
                    tool_call_id: r.text(2)?,
                    status: rows::child_status(&r.text(3)?)?,
                    created_at: r.int(4)?,
                    updated_at: r.int(5)?,
                })
            })
            .collect()
    }
}
