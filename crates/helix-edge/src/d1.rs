//! D1 on the Workers runtime: the core's [`Record`] — batches kept as JSON until they are
//! sent (written and read by the runtime's `JSON`: no code of its own in the bundle),
//! atomic batches (a failing statement rolls the whole batch back), reads of rows as
//! cells (decoded by hand: no deserializer per row type), and failures mapped once — a
//! statement that fails on the schema is [`StoreError::SchemaOutdated`] naming the
//! missing migrations, never SQLite's text.

use crate::sqlite::{Cell, Record, Row};
use crate::store::StoreError;
use crate::store::rows::{Arg, SqlFailure, Statement};
use futures::future::LocalBoxFuture;
use worker::js_sys::{Array, JSON, Promise, Reflect};
use worker::wasm_bindgen::JsValue;
use worker::wasm_bindgen_futures::JsFuture;
use worker::{D1Database, D1PreparedStatement};

/// The worker's D1 database.
pub struct D1 {
    db: D1Database,
    /// What the database does wrong on purpose, in test builds (`TEST_D1_FAULT`).
    fault: Option<String>,
}

fn js_arg(a: &Arg) -> JsValue {
    match a {
        Arg::Text(t) => JsValue::from_str(t),
        // Integers go through JS numbers; every value here stays far below 2^53.
        Arg::Int(n) => JsValue::from_f64(*n as f64),
        Arg::Null => JsValue::NULL,
    }
}

fn cell(v: JsValue) -> Cell {
    match (v.as_string(), v.as_f64()) {
        (Some(s), _) => Cell::Text(s),
        (None, Some(n)) if n.fract() == 0.0 => Cell::Int(n as i64),
        (None, Some(n)) => Cell::Real(n),
        _ => Cell::Null,
    }
}

fn backend(e: worker::Error) -> StoreError {
    match e {
        worker::Error::D1(d1) => StoreError::Backend(d1.cause()),
        other => StoreError::Backend(other.to_string()),
    }
}

impl D1 {
    /// The database bound as `binding`; `fault` is a test build's `TEST_D1_FAULT`, for
    /// every database or, ending in `@BINDING`, for that one only.
    pub fn new(env: &worker::Env, binding: &str, fault: Option<String>) -> worker::Result<Self> {
        let fault = fault.and_then(|f| match f.split_once('@') {
            Some((what, at)) => (at == binding).then(|| what.to_string()),
            None => Some(f),
        });
        Ok(Self {
            db: env.d1(binding)?,
            fault,
        })
    }

    /// Fails or delays as the test build's `TEST_D1_FAULT` says (`down`, `delay:<ms>`).
    async fn injected(&self) -> Result<(), StoreError> {
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
        self.schema_named(backend(e)).await
    }

    /// `e`, or, for a statement that failed on the schema, the missing migrations.
    async fn schema_named(&self, e: StoreError) -> StoreError {
        match &e {
            StoreError::Backend(m) if SqlFailure::of(m) == SqlFailure::Schema => {
                crate::migrations::outdated(&self.db).await
            }
            _ => e,
        }
    }

    fn stmt(&self, sql: &str, args: &[JsValue]) -> Result<D1PreparedStatement, StoreError> {
        self.db.prepare(sql).bind(args).map_err(backend)
    }

    /// Prepares the statements of a batch kept as JSON.
    fn prepared(&self, json: &str, out: &mut Vec<D1PreparedStatement>) -> Result<(), StoreError> {
        let corrupt = || StoreError::Corrupt("a batch waiting for D1 is malformed".into());
        let batch = JSON::parse(json).map_err(|_| corrupt())?;
        for s in Array::from(&batch).iter() {
            let s = Array::from(&s);
            let sql = s.get(0).as_string().ok_or_else(corrupt)?;
            out.push(self.stmt(&sql, &Array::from(&s.get(1)).to_vec())?);
        }
        Ok(())
    }
}

/// The rows of `sql` on each of `shards`, read at once (one `Promise.allSettled`, no
/// future per shard): each shard's rows, or why it could not be read (a statement that
/// failed on the schema names the missing migrations).
pub async fn read_each(
    shards: &[D1],
    sql: &str,
    args: &[Arg],
) -> Vec<Result<Vec<Row>, StoreError>> {
    let args: Vec<JsValue> = args.iter().map(js_arg).collect();
    let reads: Array = shards
        .iter()
        .map(|d1| {
            let reject = |why: &str| Promise::reject(&JsValue::from_str(why));
            match (d1.fault.as_deref(), d1.stmt(sql, &args)) {
                (Some("down"), _) => reject("D1 is down (TEST_D1_FAULT)"),
                (_, Ok(stmt)) => stmt.inner().raw().unwrap_or_else(|e| Promise::reject(&e)),
                (_, Err(e)) => reject(&e.to_string()),
            }
        })
        .collect();
    let settled = JsFuture::from(Promise::all_settled(&reads)).await;
    let settled = settled.map(|all| Array::from(&all)).unwrap_or_default();
    let mut each = Vec::with_capacity(shards.len());
    for (i, d1) in shards.iter().enumerate() {
        let outcome = settled.get(i as u32);
        let field =
            |name: &str| Reflect::get(&outcome, &JsValue::from_str(name)).unwrap_or_default();
        if field("status").as_string().as_deref() == Some("fulfilled") {
            let rows = Array::from(&field("value"));
            each.push(Ok(rows
                .iter()
                .map(|r| Array::from(&r).iter().map(cell).collect())
                .collect()));
            continue;
        }
        let reason = field("reason");
        let message = Reflect::get(&reason, &JsValue::from_str("message"))
            .ok()
            .and_then(|m| m.as_string());
        let e = StoreError::Backend(message.or_else(|| reason.as_string()).unwrap_or_default());
        each.push(Err(d1.schema_named(e).await));
    }
    each
}

impl Record for D1 {
    fn encode(batch: &[Statement]) -> Option<String> {
        let all = Array::new();
        for s in batch {
            let args: Array = s.args.iter().map(js_arg).collect();
            all.push(&Array::of2(&JsValue::from_str(s.sql), &args));
        }
        JSON::stringify(&all).ok()?.as_string()
    }

    fn send<'a>(&'a self, encoded: Vec<String>) -> LocalBoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            self.injected().await?;
            let mut prepared = Vec::new();
            for json in &encoded {
                self.prepared(json, &mut prepared)?;
            }
            match self.db.batch(prepared).await {
                Ok(_) => Ok(()),
                Err(e) => Err(self.failed(e).await),
            }
        })
    }

    fn read<'a>(
        &'a self,
        sql: &'a str,
        args: Vec<Arg>,
    ) -> LocalBoxFuture<'a, Result<Vec<Row>, StoreError>> {
        Box::pin(async move {
            self.injected().await?;
            let args: Vec<JsValue> = args.iter().map(js_arg).collect();
            match self.stmt(sql, &args)?.raw_js_value().await {
                Ok(rows) => Ok(rows
                    .iter()
                    .map(|r| Array::from(r).iter().map(cell).collect())
                    .collect()),
                Err(e) => Err(self.failed(e).await),
            }
        })
    }
}
