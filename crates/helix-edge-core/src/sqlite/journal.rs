//! Two parts of the journal in the object's SQLite, as keys of `journal_meta`:
//! - [`SqliteSuspension`]: answers, claims, routes and what tools keep privately
//!   (`answer:{session}:{call}`, `claim:{run}:{step}:{call}`, `route:{call}`,
//!   `vault:{session}:{key}`: ids before the last part never contain `:`). Each check-then-insert is one statement, or synchronous, so no other request
//!   of the object runs in between; the platform's output gate holds every answer until
//!   it is durable. Answers read once are kept in memory: the object is their only
//!   writer.
//! - [`SqliteAttempts`]: one counter per run and step, `attempt:{run}:{step}`.

use super::{Db, backend, first_int, mark, text};
use crate::host::{Host, Level, LogValue};
use crate::journal::{StepAttempts, Suspension};
use crate::store::rows::{self, Arg};
use crate::store::{Answer, AnswerOutcome, StoreError};
use std::cell::RefCell;
use std::rc::Rc;

/// The answers known, by `(session, call)`: `None` is "read, and there is none".
type Known = Vec<((String, String), Option<Answer>)>;

/// The suspension context of the object's session.
pub struct SqliteSuspension {
    db: Rc<dyn Db>,
    known: RefCell<Known>,
}

impl SqliteSuspension {
    /// The suspension context in `db`.
    pub fn new(db: Rc<dyn Db>) -> Self {
        Self {
            db,
            known: RefCell::new(Vec::new()),
        }
    }

    /// The answer to the call as last read or written here (`Some(None)`: read, none).
    fn known_answer(&self, session_id: &str, tool_call_id: &str) -> Option<Option<Answer>> {
        let known = self.known.borrow();
        known
            .iter()
            .find_map(|((s, c), a)| (s == session_id && c == tool_call_id).then(|| a.clone()))
    }

    /// Forgets what was read of the call's answer (it is read again).
    fn forget(&self, session_id: &str, tool_call_id: &str) {
        self.known
            .borrow_mut()
            .retain(|((s, c), _)| !(s == session_id && c == tool_call_id));
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

impl Suspension for SqliteSuspension {
    fn answer(
        &self,
        session_id: &str,
        tool_call_id: &str,
        answer: &Answer,
    ) -> Result<AnswerOutcome, StoreError> {
        if let Some(existing) = self.known_answer(session_id, tool_call_id).flatten() {
            return Ok(AnswerOutcome::AlreadyAnswered(existing));
        }
        // Stored unless an answer is there already (one statement): then that one stands.
        let key = format!("answer:{session_id}:{tool_call_id}");
        let body = rows::to_json(answer)?;
        let stored = self
            .db
            .query(
                "INSERT INTO journal_meta (k, v) VALUES (?, ?) ON CONFLICT (k) DO NOTHING RETURNING k",
                &[Arg::Text(key), Arg::Text(body)],
            )
            .map_err(|e| backend("storing the answer", e))?;
        if stored.is_empty() {
            self.forget(session_id, tool_call_id);
            if let Some(existing) = self.find_answer(session_id, tool_call_id)? {
                return Ok(AnswerOutcome::AlreadyAnswered(existing));
            }
            return Err(StoreError::Backend(
                "the answer was neither stored nor found".into(),
            ));
        }
        self.remember(session_id, tool_call_id, Some(answer.clone()));
        Ok(AnswerOutcome::Stored)
    }

    fn find_answer(
        &self,
        session_id: &str,
        tool_call_id: &str,
    ) -> Result<Option<Answer>, StoreError> {
        if let Some(answer) = self.known_answer(session_id, tool_call_id) {
            return Ok(answer);
        }
        let key = format!("answer:{session_id}:{tool_call_id}");
        let rows = self
            .db
            .query("SELECT v FROM journal_meta WHERE k = ?", &[Arg::Text(key)])
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
            .db
            .query(INSERT_FIRST, &[Arg::Text(key), Arg::Text(instance.into())])
            .map_err(|e| backend("storing the claim", e))?;
        rows.first()
            .and_then(|r| text(r, 0))
            .ok_or_else(|| StoreError::Backend("the claim was not stored".into()))
    }

    fn route(&self, tool_call_id: &str, owner: &str) -> Result<bool, StoreError> {
        let key = format!("route:{tool_call_id}");
        let rows = self
            .db
            .query(
                "INSERT INTO journal_meta (k, v) VALUES (?, ?) ON CONFLICT (k) DO NOTHING RETURNING v",
                &[Arg::Text(key), Arg::Text(owner.into())],
            )
            .map_err(|e| backend("storing the route", e))?;
        Ok(!rows.is_empty())
    }

    fn routed(&self, tool_call_id: &str) -> Result<Option<String>, StoreError> {
        Ok(mark(&*self.db, &format!("route:{tool_call_id}")))
    }

    fn keep(&self, session_id: &str, key: &str, value: Option<&str>) -> Result<(), StoreError> {
        let key = format!("vault:{session_id}:{key}");
        super::set_mark(&*self.db, &key, value).map_err(|e| backend("keeping a value", e))
    }

    // A value that cannot be read is none: the tool asks for it again.
    fn kept(&self, session_id: &str, key: &str) -> Result<Option<String>, StoreError> {
        Ok(mark(&*self.db, &format!("vault:{session_id}:{key}")))
    }
}

/// The step attempt counter of the object's session.
pub struct SqliteAttempts {
    db: Rc<dyn Db>,
    host: Rc<dyn Host>,
}

impl SqliteAttempts {
    /// The counter in `db`; a failed write is logged through `host`.
    pub fn new(db: Rc<dyn Db>, host: Rc<dyn Host>) -> Self {
        Self { db, host }
    }
}

impl StepAttempts for SqliteAttempts {
    fn begin_step(&self, run_id: &str, step: u32) -> u32 {
        let key = format!("attempt:{run_id}:{step}");
        let rows = self.db.query(
            "INSERT INTO journal_meta (k, v) VALUES (?, '1') \
             ON CONFLICT (k) DO UPDATE SET v = CAST(v AS INTEGER) + 1 RETURNING CAST(v AS INTEGER)",
            &[Arg::Text(key)],
        );
        match rows {
            Ok(rows) => first_int(&rows).map_or(1, |n| n as u32),
            Err(e) => {
                let fields = [
                    ("what", LogValue::Str("begin_step")),
                    ("error", LogValue::Str(&e)),
                ];
                self.host.log(Level::Error, "journal_error", &fields);
                1
            }
        }
    }
}
