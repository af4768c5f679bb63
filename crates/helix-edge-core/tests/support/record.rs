//! D1 played by a SQLite with the library's D1 schema ([`super::lite::Lite`]), as the
//! queryable record a session object replicates to; for the tests of replication and of
//! what else the objects send to the record.

use super::lite::Lite;
use futures::future::LocalBoxFuture;
use helix_edge_core::sqlite::{Db, Owned, Record, Row};
use helix_edge_core::store::StoreError;
use helix_edge_core::store::rows::{Arg, Statement};
use serde_json::{Value, json};
use std::cell::Cell as Flag;
use std::rc::Rc;

/// D1 played by a SQLite with its schema; `down` makes every call fail.
pub struct LiteRecord {
    pub db: Rc<Lite>,
    pub down: Rc<Flag<bool>>,
}

fn arg_json(a: &Arg) -> Value {
    match a {
        Arg::Text(t) => json!(t),
        Arg::Int(n) => json!(n),
        Arg::Null => Value::Null,
    }
}

impl Record for LiteRecord {
    fn encode(batch: &[Statement]) -> Option<String> {
        let all: Vec<Value> = batch
            .iter()
            .map(|s| json!([s.sql, s.args.iter().map(arg_json).collect::<Vec<_>>()]))
            .collect();
        serde_json::to_string(&all).ok()
    }

    fn send<'a>(&'a self, encoded: Vec<String>) -> LocalBoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            if self.down.get() {
                return Err(StoreError::Backend("D1 is down".into()));
            }
            let mut statements: Vec<Owned> = Vec::new();
            for batch in encoded {
                let all: Vec<(String, Vec<Value>)> = serde_json::from_str(&batch).unwrap();
                for (sql, args) in all {
                    let args = args
                        .iter()
                        .map(|a| match a {
                            Value::String(s) => Arg::Text(s.clone()),
                            Value::Number(n) => Arg::Int(n.as_u64().unwrap()),
                            _ => Arg::Null,
                        })
                        .collect();
                    statements.push((sql, args));
                }
            }
            self.db.atomically(&statements).map_err(StoreError::Backend)
        })
    }

    fn read<'a>(
        &'a self,
        sql: &'a str,
        args: Vec<Arg>,
    ) -> LocalBoxFuture<'a, Result<Vec<Row>, StoreError>> {
        Box::pin(async move {
            if self.down.get() {
                return Err(StoreError::Backend("D1 is down".into()));
            }
            self.db.query(sql, &args).map_err(StoreError::Backend)
        })
    }
}
