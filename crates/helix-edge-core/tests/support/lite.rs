//! One SQLite database (rusqlite, in memory) as the platform's `Db`: a session object's
//! storage with its tables created as the platform creates them, or a database with the
//! library's D1 migrations. For the tests of `helix_edge_core::sqlite` and of what keeps
//! its rows there.

#![allow(dead_code, clippy::unwrap_used)]

use helix_edge_core::sqlite::{Cell, Db, Owned, Row, SCHEMA, UPGRADE, UPGRADE_PROBE};
use helix_edge_core::store::rows::Arg;
use rusqlite::types::{ToSqlOutput, Value as Sqlite, ValueRef};
use std::rc::Rc;

/// One SQLite database, as the platform's `Db` and as D1.
pub struct Lite(pub rusqlite::Connection);

impl Lite {
    pub fn memory(script: &str) -> Rc<Self> {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch(script).unwrap();
        Rc::new(Self(conn))
    }

    /// An object's storage, its tables created as the platform creates them.
    pub fn object() -> Rc<Self> {
        let lite = Self::memory(SCHEMA);
        if lite.0.execute_batch(UPGRADE_PROBE).is_err() {
            lite.0.execute_batch(UPGRADE).unwrap();
        }
        lite
    }

    /// A database with the library's D1 migrations applied.
    pub fn d1() -> Rc<Self> {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../helix-edge/migrations");
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        let script: String = files
            .iter()
            .map(|f| std::fs::read_to_string(f).unwrap())
            .collect();
        Self::memory(&script)
    }

    pub fn count(&self, sql: &str) -> i64 {
        self.0.query_row(sql, [], |r| r.get(0)).unwrap()
    }
}

fn bind(arg: &Arg) -> ToSqlOutput<'_> {
    ToSqlOutput::Owned(match arg {
        Arg::Text(t) => Sqlite::Text(t.clone()),
        Arg::Int(n) => Sqlite::Integer(*n as i64),
        Arg::Null => Sqlite::Null,
    })
}

fn cell(v: ValueRef<'_>) -> Cell {
    match v {
        ValueRef::Null => Cell::Null,
        ValueRef::Integer(n) => Cell::Int(n),
        ValueRef::Real(f) => Cell::Real(f),
        ValueRef::Text(t) => Cell::Text(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(_) => Cell::Null,
    }
}

impl Db for Lite {
    fn query(&self, sql: &str, args: &[Arg]) -> Result<Vec<Row>, String> {
        // As a Durable Object's SQLite (and D1): at most 100 bound parameters.
        if args.len() > 100 {
            return Err(format!("too many SQL variables: {}", args.len()));
        }
        let mut stmt = self.0.prepare(sql).map_err(|e| e.to_string())?;
        let columns = stmt.column_count();
        let params: Vec<ToSqlOutput<'_>> = args.iter().map(bind).collect();
        let mut rows = stmt
            .query(rusqlite::params_from_iter(params))
            .map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(|e| e.to_string())? {
            out.push(
                (0..columns)
                    .map(|i| cell(row.get_ref(i).unwrap()))
                    .collect(),
            );
        }
        Ok(out)
    }

    fn atomically(&self, statements: &[Owned]) -> Result<(), String> {
        self.0.execute_batch("BEGIN").map_err(|e| e.to_string())?;
        for (sql, args) in statements {
            if let Err(e) = self.query(sql, args) {
                self.0.execute_batch("ROLLBACK").unwrap();
                return Err(e);
            }
        }
        self.0.execute_batch("COMMIT").map_err(|e| e.to_string())
    }
}
