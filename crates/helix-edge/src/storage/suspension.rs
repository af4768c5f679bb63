//! The suspension context in the session object's SQLite ([`Suspension`]): answers,
//! claims and routes. Each check-then-insert is synchronous, so no other request of the
//! object runs in between; the output gate holds every answer until it is durable.
//! Answers read once are kept in memory: the object is their only writer.

use super::sql::{Sql, backend, text};
use crate::journal::Suspension;
use crate::store::{Answer, AnswerOutcome, StoreError, rows};
use std::cell::RefCell;
use worker::SqlStorageValue;

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
        let args = vec![
            session_id.into(),
            tool_call_id.into(),
            rows::to_json(answer)?.into(),
            SqlStorageValue::from(worker::Date::now().as_millis() as i64),
        ];
        self.sql
            .run(
                "INSERT INTO answers (session_id, tool_call_id, body, created_at) VALUES (?, ?, ?, ?)",
                args,
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
        let rows = self
            .sql
            .query(
                "SELECT body FROM answers WHERE session_id = ? AND tool_call_id = ?",
                vec![session_id.into(), tool_call_id.into()],
            )
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
        let key = || -> Vec<SqlStorageValue> {
            vec![run_id.into(), i64::from(step).into(), tool_call_id.into()]
        };
        let select =
            "SELECT instance FROM claims WHERE run_id = ? AND step = ? AND tool_call_id = ?";
        let rows = self
            .sql
            .query(select, key())
            .map_err(|e| backend("reading the claim", e))?;
        if let Some(owner) = rows.first().and_then(|r| text(r, 0)) {
            return Ok(owner);
        }
        let mut args = key();
        args.push(instance.into());
        // The output gate holds the tool's requests until this write is durable.
        self.sql
            .run(
                "INSERT INTO claims (run_id, step, tool_call_id, instance) VALUES (?, ?, ?, ?)",
                args,
            )
            .map_err(|e| backend("storing the claim", e))?;
        Ok(instance.to_string())
    }

    fn route(&self, tool_call_id: &str, owner: &str) -> Result<bool, StoreError> {
        let rows = self
            .sql
            .query(
                "INSERT INTO routes (tool_call_id, owner) VALUES (?, ?) \
                 ON CONFLICT (tool_call_id) DO NOTHING RETURNING owner",
                vec![tool_call_id.into(), owner.into()],
            )
            .map_err(|e| backend("storing the route", e))?;
        Ok(!rows.is_empty())
    }

    fn routed(&self, tool_call_id: &str) -> Result<Option<String>, StoreError> {
        let rows = self
            .sql
            .query(
                "SELECT owner FROM routes WHERE tool_call_id = ?",
                vec![tool_call_id.into()],
            )
            .map_err(|e| backend("reading the route", e))?;
        Ok(rows.first().and_then(|r| text(r, 0)))
    }
}
