//! Step attempts in the session object's SQLite ([`StepAttempts`]).

use super::sql::{Sql, first_int, log_error};
use crate::journal::StepAttempts;
use worker::SqlStorageValue;

/// The attempt counter of the object's session.
pub struct SqlAttempts(pub Sql);

impl StepAttempts for SqlAttempts {
    fn begin_step(&self, run_id: &str, step: u32) -> u32 {
        let rows = self.0.query(
            "INSERT INTO step_attempts (run_id, step, n) VALUES (?, ?, 1) \
             ON CONFLICT (run_id, step) DO UPDATE SET n = n + 1 RETURNING n",
            vec![run_id.into(), SqlStorageValue::from(i64::from(step))],
        );
        match rows {
            Ok(rows) => first_int(&rows).map_or(1, |n| n as u32),
            Err(e) => {
                log_error("begin_step", e);
                1
            }
        }
    }
}
