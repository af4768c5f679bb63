//! What rows take in a database. D1 is SQLite: the dump of the benchmark's local D1
//! (`wrangler d1 export --local`) is loaded into a SQLite database in memory and its
//! pages counted, compacted, with the rows and without them — tables, indexes and
//! page overhead included, as D1 counts a database's size.

use rusqlite::Connection;

/// The bytes the rows of `dump` (a SQL dump: schema and rows) take in a database,
/// beyond its empty schema.
pub fn database_bytes(dump: &str) -> rusqlite::Result<u64> {
    let db = Connection::open_in_memory()?;
    db.execute_batch(dump)?;
    let full = compacted_size(&db)?;
    let tables: Vec<String> = db
        .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
        )?
        .query_map([], |row| row.get(0))?
        .collect::<Result<_, _>>()?;
    for table in tables {
        db.execute(
            &format!("DELETE FROM \"{}\"", table.replace('"', "\"\"")),
            [],
        )?;
    }
    Ok(full.saturating_sub(compacted_size(&db)?))
}

/// The database's size once compacted (`VACUUM`): pages × page size.
fn compacted_size(db: &Connection) -> rusqlite::Result<u64> {
    db.execute_batch("VACUUM")?;
    let pages: i64 = db.query_row("PRAGMA page_count", [], |r| r.get(0))?;
    let page_size: i64 = db.query_row("PRAGMA page_size", [], |r| r.get(0))?;
    Ok((pages * page_size).max(0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_counted_in_pages_and_the_empty_schema_is_not() {
        let schema = "CREATE TABLE t (id TEXT PRIMARY KEY, body TEXT);\
                      CREATE INDEX t_body ON t (body);";
        assert_eq!(database_bytes(schema).unwrap(), 0, "no rows: nothing");
        // 1,000 rows of 200 bytes, stored twice (the table and the index on body): at
        // least their 400 KB, and not twice that in page overhead.
        let rows: String = (0..1_000)
            .map(|i| format!("INSERT INTO t VALUES ('id{i}', '{}');", "x".repeat(200)))
            .collect();
        let bytes = database_bytes(&format!("{schema}{rows}")).unwrap();
        assert!((400_000..800_000).contains(&bytes), "{bytes}");
        assert_eq!(bytes % 4096, 0, "whole pages");
    }

    #[test]
    fn a_dump_that_is_not_sql_is_an_error() {
        assert!(database_bytes("INSERT INTO nowhere VALUES (1);").is_err());
    }
}
