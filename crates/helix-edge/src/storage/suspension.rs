//! The suspension context in the session object's SQLite ([`Suspension`]): answers,
//! claims and routes, as keys of `journal_meta` (`answer:{session}:{call}`,
//! `claim:{run}:{step}:{call}`, `route:{call}`: ids before the last part never contain
//! `:`). Each check-then-insert is one statement, or synchronous, so no other request of
//! the object runs in between; the output gate holds every answer until it is durable.
//! Answers read once are kept in memory: the object is their only writer.

use super::sql::{Sql, backend, text};
use crate::journal::Suspension;
use crate::store::{Answer, AnswerOutcome, StoreError, rows};
use std::cell::RefCell;

/// The answers known, by `(session, call)`: `None` is "read, and there is none".
type Known = Vec<((String, String), Option<Answer>)>;

/// The suspension context of the object's session.
pub struct SqlSuspension {
    sql: Sql,
    known: RefCell<Known>,
}

impl SqlSuspension {
    /// The suspension context in `sql`.
    pub fn new(sql: Sql) -> Self {
        Self {
            sql,
            known: RefCell::new(Vec::new()),
        }
    }

    fn remember(&self, session_id: &str, tool_call_id: &str, answer: Option<Answer>) {
        let key = (session_id.to_string(), tool_call_id.to_string());
        let mut known = self.known.borrow_mut();
        match known.iter_mut().find(|(k, _)| *k == key) {
            Some(entry) => entry.1 = answer,
            None => known.push((key, answer)),
        }
    }
}

/// Inserts `k` unless it exists; answers the value that stands.
const INSERT_FIRST: &str = "INSERT INTO journal_meta (k, v) VALUES (?, ?) \
     ON CONFLICT (k) DO UPDATE SET v = v RETURNING v";

impl Suspension for SqlSuspension {
    fn answer(
        &self,
        session_id: &str,
        tool_call_id: &str,
        answer: &Answer,
    ) -> Result<AnswerOutcome, StoreError> {
        if let Some(existing) = self.find_answer(session_id, tool_call_id)? {
            return Ok(AnswerOutcome::AlreadyAnswered(existing));
        }
        let key = format!("answer:{session_id}:{tool_call_id}");
        let body = rows::to_json(answer)?;
        self.sql
            .run(
                "INSERT INTO journal_meta (k, v) VALUES (?, ?)",
                vec![key.into(), body.into()],
            )
            .map_err(|e| backend("storing the answer", e))?;
        self.remember(session_id, tool_call_id, Some(answer.clone()));
        Ok(AnswerOutcome::Stored)
    }

    fn find_answer(
        &self,
        session_id: &str,
        tool_call_id: &str,
    ) -> Result<Option<Answer>, StoreError> {
        let cached = self
            .known
            .borrow()
            .iter()
            .find_map(|((s, c), a)| (s == session_id && c == tool_call_id).then(|| a.clone()));
        if let Some(answer) = cached {
            return Ok(answer);
        }
        let key = format!("answer:{session_id}:{tool_call_id}");
        let rows = self
            .sql
            .query("SELECT v FROM journal_meta WHERE k = ?", vec![key.into()])
            .map_err(|e| backend("reading the answer", e))?;
        let answer = match rows.first().and_then(|r| text(r, 0)) {
            Some(body) => Some(rows::from_json(&body)?),
            None => None,
        };
        self.remember(session_id, tool_call_id, answer.clone());
        Ok(answer)
    }

    fn claim(
        &self,
        run_id: &str,
        step: u32,
        tool_call_id: &str,
        instance: &str,
    ) -> Result<String, StoreError> {
        // The output gate holds the tool's requests until the claim is durable.
        let key = format!("claim:{run_id}:{step}:{tool_call_id}");
        let rows = self
            .sql
            .query(INSERT_FIRST, vec![key.into(), instance.into()])
            .map_err(|e| backend("storing the claim", e))?;
        rows.first()
            .and_then(|r| text(r, 0))
            .ok_or_else(|| StoreError::Backend("the claim was not stored".into()))
    }

    fn route(&self, tool_call_id: &str, owner: &str) -> Result<bool, StoreError> {
        let key = format!("route:{tool_call_id}");
        let rows = self
            .sql
            .query(
                "INSERT INTO journal_meta (k, v) VALUES (?, ?) ON CONFLICT (k) DO NOTHING RETURNING v",
                vec![key.into(), owner.into()],
            )
            .map_err(|e| backend("storing the route", e))?;
        Ok(!rows.is_empty())
    }

    fn routed(&self, tool_call_id: &str) -> Result<Option<String>, StoreError> {
        Ok(self.sql.mark(&format!("route:{tool_call_id}")))
    }
}
