//! The session object's own SQLite on the Workers runtime: the core's [`Db`] over
//! `SqlStorage`, with `transactionSync` for atomic batches. Every call is synchronous and
//! reads every row of its cursor (never `one()`, which resets the object on zero rows).
//! What the statements are is the core's ([`crate::sqlite`]).

use crate::sqlite::{Cell, Db, Owned, Row, SCHEMA, UPGRADE, UPGRADE_PROBE};
use crate::store::rows::Arg;
use std::cell::RefCell;
use std::rc::Rc;
use worker::js_sys::{Function, Reflect};
use worker::wasm_bindgen::closure::Closure;
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::{SqlStorage, SqlStorageValue};

/// The object's SQLite storage.
#[derive(Clone)]
pub struct Sql {
    sql: SqlStorage,
    /// The object's `DurableObjectStorage`, for `transactionSync`.
    storage: JsValue,
}

fn value(a: &Arg) -> SqlStorageValue {
    match a {
        Arg::Text(t) => SqlStorageValue::from(t.as_str()),
        // Every value the core binds stays far below 2^53.
        Arg::Int(n) => SqlStorageValue::from(*n as i64),
        Arg::Null => SqlStorageValue::Null,
    }
}

fn cell(v: SqlStorageValue) -> Cell {
    match v {
        SqlStorageValue::Integer(n) => Cell::Int(n),
        SqlStorageValue::Float(f) => Cell::Real(f),
        SqlStorageValue::String(s) => Cell::Text(s),
        _ => Cell::Null,
    }
}

impl Sql {
    /// Opens the object's storage, creating its tables on first use.
    pub fn open(state: &worker::State) -> worker::Result<Self> {
        let storage = state.storage();
        let sql = storage.sql();
        sql.exec(SCHEMA, None)?;
        let storage: JsValue = state
            .as_raw()
            .storage()
            .map_err(worker::Error::from)?
            .into();
        let this = Self { sql, storage };
        if this.sql.exec(UPGRADE_PROBE, None).is_err() {
            this.sql.exec(UPGRADE, None)?;
        }
        Ok(this)
    }
}

impl Db for Sql {
    /// The rows of a query. Decoded by hand rather than through `to_array`
    /// (serde_wasm_bindgen), which would grow the bundle by a deserializer per row type.
    fn query(&self, q: &str, args: &[Arg]) -> Result<Vec<Row>, String> {
        let args = args.iter().map(value).collect();
        let cursor = self.sql.exec(q, Some(args)).map_err(|e| e.to_string())?;
        let rows: Vec<Vec<SqlStorageValue>> = cursor
            .raw()
            .collect::<Result<_, _>>()
            .map_err(|e| e.to_string())?;
        Ok(rows
            .into_iter()
            .map(|r| r.into_iter().map(cell).collect())
            .collect())
    }

    fn atomically(&self, statements: &[Owned]) -> Result<(), String> {
        let failure: Rc<RefCell<Option<String>>> = Rc::default();
        let sql = self.sql.clone();
        let failed = failure.clone();
        let statements: Vec<(String, Vec<SqlStorageValue>)> = statements
            .iter()
            .map(|(q, args)| (q.clone(), args.iter().map(value).collect()))
            .collect();
        let body = Closure::once(move || -> Result<JsValue, JsValue> {
            for (q, args) in statements {
                if let Err(e) = sql.exec(&q, Some(args)) {
                    let message = e.to_string();
                    *failed.borrow_mut() = Some(message.clone());
                    // Throwing makes transactionSync roll back everything before.
                    return Err(JsValue::from_str(&message));
                }
            }
            Ok(JsValue::UNDEFINED)
        });
        let run = Reflect::get(&self.storage, &JsValue::from_str("transactionSync"))
            .ok()
            .and_then(|f| f.dyn_into::<Function>().ok())
            .ok_or_else(|| "transactionSync is not available".to_string())?;
        match run.call1(&self.storage, body.as_ref().unchecked_ref()) {
            Ok(_) => Ok(()),
            Err(thrown) => Err(failure
                .borrow_mut()
                .take()
                .or_else(|| thrown.as_string())
                .unwrap_or_else(|| "the transaction failed".into())),
        }
    }
}
