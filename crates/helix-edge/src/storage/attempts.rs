//! Step attempts in the session object's SQLite ([`StepAttempts`]): one counter per
//! run and step, `attempt:{run}:{step}` in `journal_meta`.

use super::sql::{Sql, first_int, log_error};
use crate::journal::StepAttempts;

/// The attempt counter of the object's session.
pub struct SqlAttempts(pub Sql);

impl StepAttempts for SqlAttempts {
    fn begin_step(&self, run_id: &str, step: u32) -> u32 {
        let key = format!("attempt:{run_id}:{step}");
        let rows = self.0.query(
            "INSERT INTO journal_meta (k, v) VALUES (?, '1') \
             ON CONFLICT (k) DO UPDATE SET v = CAST(v AS INTEGER) + 1 RETURNING CAST(v AS INTEGER)",
            vec![key.into()],
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
