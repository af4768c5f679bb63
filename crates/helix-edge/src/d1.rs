//! D1, as helix-edge talks to it: prepared statements from planned ones, batches (atomic:
//! a failing statement rolls the whole batch back), reads of rows as arrays of cells
//! (decoded by hand: no deserializer per row type in the bundle), and failures mapped
//! once — a statement that fails on the schema is [`StoreError::SchemaOutdated`] naming
//! the missing migrations, never SQLite's text.

use crate::store::StoreError;
use crate::store::rows::{Arg, SqlFailure, Statement};
use worker::js_sys::{Array, JSON};
use worker::wasm_bindgen::JsValue;
use worker::{D1Database, D1PreparedStatement};

/// The worker's D1 database.
pub struct D1 {
    db: D1Database,
    /// Test builds: what the database does wrong on purpose (`TEST_D1_FAULT`).
    #[cfg(feature = "test-routes")]
    fault: Option<String>,
}

/// Integers go through JS numbers; every value here stays far below 2^53.
pub fn num(n: u64) -> JsValue {
    JsValue::from_f64(n as f64)
}

/// A text parameter.
pub fn text(s: &str) -> JsValue {
    JsValue::from_str(s)
}

fn js_arg(a: &Arg) -> JsValue {
    match a {
        Arg::Text(t) => text(t),
        Arg::Int(n) => num(*n),
        Arg::Null => JsValue::NULL,
    }
}

/// A planned batch as JSON, `[[sql, [arg, …]], …]`, to keep until it is sent (written
/// and read by the runtime's `JSON`: no code of its own in the bundle).
pub fn batch_json(batch: &[Statement]) -> Option<String> {
    let all = Array::new();
    for s in batch {
        let args: Array = s.args.iter().map(js_arg).collect();
        all.push(&Array::of2(&text(s.sql), &args));
    }
    JSON::stringify(&all).ok()?.as_string()
}

fn backend(e: worker::Error) -> StoreError {
    match e {
        worker::Error::D1(d1) => StoreError::Backend(d1.cause()),
        other => StoreError::Backend(other.to_string()),
    }
}

/// One result row: its cells in the SELECT's column order.
pub struct Row(Vec<JsValue>);

impl Row {
    fn cell(&self, i: usize) -> Result<&JsValue, StoreError> {
        self.0
            .get(i)
            .ok_or_else(|| StoreError::Corrupt(format!("a row has no column {i}")))
    }

    /// A text cell.
    pub fn text(&self, i: usize) -> Result<String, StoreError> {
        self.cell(i)?
            .as_string()
            .ok_or_else(|| StoreError::Corrupt(format!("column {i} is not text")))
    }

    /// A non-negative integer cell.
    pub fn int(&self, i: usize) -> Result<u64, StoreError> {
        self.cell(i)?
            .as_f64()
            .filter(|n| *n >= 0.0)
            .map(|n| n as u64)
            .ok_or_else(|| StoreError::Corrupt(format!("column {i} is not a count")))
    }

    /// Every cell, as the SQLite value it holds (for comparisons).
    pub fn cells(&self) -> Vec<serde_json::Value> {
        let cell = |v: &JsValue| match (v.as_string(), v.as_f64()) {
            (Some(s), _) => serde_json::Value::String(s),
            (None, Some(n)) => serde_json::json!(n as i64),
            _ => serde_json::Value::Null,
        };
        self.0.iter().map(cell).collect()
    }
}

impl D1 {
    /// The database bound as `binding`.
    pub fn new(env: &worker::Env, binding: &str) -> worker::Result<Self> {
        Ok(Self {
            db: env.d1(binding)?,
            #[cfg(feature = "test-routes")]
            fault: crate::worker_host::config_value(env, "TEST_D1_FAULT"),
        })
    }

    /// Test builds: fails or delays as `TEST_D1_FAULT` says (`down`, `delay:<ms>`).
    async fn injected(&self) -> Result<(), StoreError> {
        #[cfg(feature = "test-routes")]
        match self.fault.as_deref() {
            Some("down") => return Err(StoreError::Backend("D1 is down (TEST_D1_FAULT)".into())),
            Some(f) if f.starts_with("delay:") => {
                let ms = f["delay:".len()..].parse().unwrap_or(0);
                worker::Delay::from(std::time::Duration::from_millis(ms)).await;
            }
            _ => {}
        }
        Ok(())
    }

    /// A failure as the store reports it: a statement that failed on the schema names
    /// the missing migrations.
    async fn failed(&self, e: worker::Error) -> StoreError {
        let e = backend(e);
        match &e {
            StoreError::Backend(m) if SqlFailure::of(m) == SqlFailure::Schema => {
                crate::migrations::outdated(&self.db).await
            }
            _ => e,
        }
    }

    /// A prepared statement.
    pub fn stmt(&self, sql: &str, args: &[JsValue]) -> Result<D1PreparedStatement, StoreError> {
        self.db.prepare(sql).bind(args).map_err(backend)
    }

    /// Prepares a batch kept as JSON by [`batch_json`].
    pub fn prepared_json(&self, json: &str) -> Result<Vec<D1PreparedStatement>, StoreError> {
        let corrupt = || StoreError::Corrupt("a batch waiting for D1 is malformed".into());
        let batch = JSON::parse(json).map_err(|_| corrupt())?;
        let mut prepared = Vec::new();
        for s in Array::from(&batch).iter() {
            let s = Array::from(&s);
            let sql = s.get(0).as_string().ok_or_else(corrupt)?;
            prepared.push(self.stmt(&sql, &Array::from(&s.get(1)).to_vec())?);
        }
        Ok(prepared)
    }

    /// Runs one statement and returns its rows.
    pub async fn read(&self, sql: &str, args: &[JsValue]) -> Result<Vec<Row>, StoreError> {
        self.injected().await?;
        match self.stmt(sql, args)?.raw_js_value().await {
            Ok(rows) => Ok(rows.iter().map(|r| Row(Array::from(r).to_vec())).collect()),
            Err(e) => Err(self.failed(e).await),
        }
    }

    /// Runs `batch` atomically.
    pub async fn batch(&self, batch: Vec<D1PreparedStatement>) -> Result<(), StoreError> {
        self.injected().await?;
        match self.db.batch(batch).await {
            Ok(_) => Ok(()),
            Err(e) => Err(self.failed(e).await),
        }
    }
}
