//! A session's schedules and its queue of waiting messages, in the session object's own
//! SQLite (the `journal_meta` table: `schedule/{id}` and `queue/{position}` keys, so a
//! session without them costs no table). Every change that must not be half done — a
//! fire claimed together with the message it queues, a merge — is one transaction.
//!
//! **The claim protocol.** A due fire is claimed by one transaction that counts it on its
//! schedule, moves the schedule to its following fire (or removes it when spent) and puts
//! the fire's message in the queue, with the id its run will have. The queue's first
//! message starts once the session is idle; its entry is removed after the run started.
//! A crash after the claim leaves the message queued (it runs on wake-up); a crash after
//! the run started but before the entry was removed is recognised by the run's id
//! ([`Schedules::started`]) and the entry dropped, not run again. So each fire runs
//! exactly once.

use super::body::{MAX_SCHEDULES, Schedule};
use super::busy::{Decision, Queued, Source, WhenBusy, decide};
use crate::message::Message;
use crate::sqlite::{Db, Owned, text};
use crate::store::rows::Arg;

const SCHEDULES: (&str, &str) = ("schedule/", "schedule0");
const QUEUE: (&str, &str) = ("queue/", "queue0");
/// Positions of the queue's keys: the back grows up from here, the front down.
const MIDDLE: u64 = 1 << 40;

const UPSERT: &str = "INSERT INTO journal_meta (k, v) VALUES (?, ?) \
    ON CONFLICT (k) DO UPDATE SET v = excluded.v";
const DELETE: &str = "DELETE FROM journal_meta WHERE k = ?";

/// What became of a claimed fire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fired {
    /// Queued (its run starts when its turn comes; at once when the session is idle).
    Queued {
        /// The queued message.
        queue_id: String,
    },
    /// Queued first, and the current run is to be interrupted.
    Interrupting {
        /// The queued message.
        queue_id: String,
    },
    /// Merged into a message already queued.
    Merged {
        /// That message.
        queue_id: String,
    },
    /// Skipped: the session was busy (`reject`) or its queue full.
    Skipped,
}

/// Why a change was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    /// The session has [`MAX_SCHEDULES`] already.
    #[error("A session holds at most {MAX_SCHEDULES} schedules.")]
    TooMany,
    /// The storage failed.
    #[error("schedules: {0}")]
    Storage(String),
    /// A due fire of this schedule could not be claimed (the storage refused it).
    #[error("schedule {schedule_id}: its fire could not be claimed: {reason}")]
    Claim {
        /// The schedule.
        schedule_id: String,
        /// What the storage said.
        reason: String,
    },
}

/// The schedules and queue of the session whose object owns `db`.
pub struct Schedules<'a> {
    db: &'a dyn Db,
}

fn key(prefix: &str, id: impl std::fmt::Display) -> String {
    format!("{prefix}{id}")
}

fn upsert(k: String, value: &impl serde::Serialize) -> Result<Owned, TableError> {
    let json = serde_json::to_string(value).map_err(|e| TableError::Storage(e.to_string()))?;
    Ok((UPSERT.into(), vec![Arg::Text(k), Arg::Text(json)]))
}

impl<'a> Schedules<'a> {
    /// Over the object's SQLite.
    pub fn new(db: &'a dyn Db) -> Self {
        Self { db }
    }

    /// The `(key, value)` rows under `range`, in key order.
    fn rows(&self, (from, to): (&str, &str)) -> Result<Vec<(String, String)>, TableError> {
        let rows = self
            .db
            .query(
                "SELECT k, v FROM journal_meta WHERE k > ? AND k < ? ORDER BY k",
                &[Arg::Text(from.into()), Arg::Text(to.into())],
            )
            .map_err(TableError::Storage)?;
        Ok(rows
            .iter()
            .filter_map(|r| Some((text(r, 0)?, text(r, 1)?)))
            .collect())
    }

    /// Every schedule, soonest first. A row that does not read is left out.
    pub fn list(&self) -> Result<Vec<Schedule>, TableError> {
        let rows = self.rows(SCHEDULES)?;
        let mut all: Vec<Schedule> = rows
            .iter()
            .filter_map(|(_, v)| serde_json::from_str(v).ok())
            .collect();
        all.sort_by_key(|s| s.next_fire_ms);
        Ok(all)
    }

    /// Whether the session has no schedule, no queued message and no schedule in the
    /// record (one statement): then the end of a slice of work has nothing to do.
    pub fn quiet(&self) -> Result<bool, TableError> {
        let rows = self
            .db
            .query(
                "SELECT COUNT(*) FROM journal_meta WHERE (k > ? AND k < ?) OR (k > ? AND k < ?) \
                 OR (k = ? AND v <> '[]')",
                &[
                    Arg::Text(SCHEDULES.0.into()),
                    Arg::Text(SCHEDULES.1.into()),
                    Arg::Text(QUEUE.0.into()),
                    Arg::Text(QUEUE.1.into()),
                    Arg::Text(super::record::SENT.into()),
                ],
            )
            .map_err(TableError::Storage)?;
        Ok(rows.first().and_then(|r| crate::sqlite::int(r, 0)) == Some(0))
    }

    /// When the soonest schedule fires next (ms), if any.
    pub fn next_fire(&self) -> Result<Option<u64>, TableError> {
        Ok(self.list()?.first().map(|s| s.next_fire_ms))
    }

    /// Adds `schedule`, unless the session has [`MAX_SCHEDULES`] already.
    pub fn create(&self, schedule: &Schedule) -> Result<(), TableError> {
        if self.rows(SCHEDULES)?.len() >= MAX_SCHEDULES {
            return Err(TableError::TooMany);
        }
        let row = upsert(key(SCHEDULES.0, &schedule.schedule_id), schedule)?;
        self.db.atomically(&[row]).map_err(TableError::Storage)
    }

    /// Removes schedule `id`; whether it existed.
    pub fn delete(&self, id: &str) -> Result<bool, TableError> {
        let k = key(SCHEDULES.0, id);
        let existed = self.rows(SCHEDULES)?.iter().any(|(row, _)| *row == k);
        let statement = (DELETE.to_string(), vec![Arg::Text(k)]);
        self.db
            .atomically(&[statement])
            .map_err(TableError::Storage)?;
        Ok(existed)
    }

    /// Removes every schedule and queued message (the session was aborted or deleted).
    pub fn clear(&self) -> Result<(), TableError> {
        let statements: Vec<Owned> = [SCHEDULES, QUEUE]
            .iter()
            .map(|(from, to)| {
                let sql = "DELETE FROM journal_meta WHERE k > ? AND k < ?".to_string();
                (
                    sql,
                    vec![Arg::Text((*from).into()), Arg::Text((*to).into())],
                )
            })
            .collect();
        self.db.atomically(&statements).map_err(TableError::Storage)
    }

    /// The queue, first to run first, with each entry's key.
    fn entries(&self) -> Result<Vec<(String, Queued)>, TableError> {
        let rows = self.rows(QUEUE)?;
        Ok(rows
            .into_iter()
            .filter_map(|(k, v)| Some((k, serde_json::from_str(&v).ok()?)))
            .collect())
    }

    /// The messages waiting, first to run first.
    pub fn queue(&self) -> Result<Vec<Queued>, TableError> {
        Ok(self.entries()?.into_iter().map(|(_, q)| q).collect())
    }

    /// The statement that puts `queued` at the back of the queue (or the front), with
    /// the position counter's update.
    fn push(&self, queued: &Queued, front: bool) -> Result<Vec<Owned>, TableError> {
        let (mark, step): (&str, i64) = if front {
            ("queue_front", -1)
        } else {
            ("queue_back", 1)
        };
        let current = crate::sqlite::mark(self.db, mark).and_then(|v| v.parse::<u64>().ok());
        let position = current.unwrap_or(MIDDLE).saturating_add_signed(step);
        let k = key(QUEUE.0, format!("{position:020}"));
        Ok(vec![
            upsert(k, queued)?,
            (
                UPSERT.into(),
                vec![Arg::Text(mark.into()), Arg::Text(position.to_string())],
            ),
        ])
    }

    /// The statements that carry out `decision` for a message: queue it, or merge it
    /// into the queued message it names. `None` when the decision queues nothing.
    fn place(
        &self,
        decision: &Decision,
        queued: Queued,
        queue: &[(String, Queued)],
    ) -> Result<Option<(Vec<Owned>, String)>, TableError> {
        let id = queued.queue_id.clone();
        Ok(Some(match decision {
            Decision::Start | Decision::Queue => (self.push(&queued, false)?, id),
            Decision::Interrupt => (self.push(&queued, true)?, id),
            Decision::MergeInto(into) => {
                let Some((k, entry)) = queue.iter().find(|(_, q)| q.queue_id == *into) else {
                    return Ok(None);
                };
                let mut entry = entry.clone();
                entry.messages.extend(queued.messages);
                entry.merged += 1;
                (vec![upsert(k.clone(), &entry)?], into.clone())
            }
            Decision::Refuse | Decision::Full(_) => return Ok(None),
        }))
    }

    /// Queues `queued` by `policy` while the session is `busy`: the decision taken (see
    /// [`decide`]), carried out in one transaction. [`Decision::Start`] queues nothing: the
    /// caller starts the run itself (and a start that fails leaves nothing behind).
    pub fn enqueue(
        &self,
        queued: Queued,
        policy: WhenBusy,
        busy: bool,
    ) -> Result<Decision, TableError> {
        let queue = self.entries()?;
        let waiting: Vec<Queued> = queue.iter().map(|(_, q)| q.clone()).collect();
        let decision = decide(policy, busy, &waiting, &queued);
        if decision == Decision::Start {
            return Ok(decision);
        }
        if let Some((statements, _)) = self.place(&decision, queued, &queue)? {
            self.db
                .atomically(&statements)
                .map_err(TableError::Storage)?;
        }
        Ok(decision)
    }

    /// Claims every fire due at `now_ms` while the session is `busy` (see the module):
    /// each is counted on its schedule, which moves to its following fire, and its
    /// message queued by the schedule's policy (`default` when it has none), in one
    /// transaction per fire. `new_ids` gives each queued message its id and its run's.
    pub fn claim_due(
        &self,
        now_ms: u64,
        busy: bool,
        default: WhenBusy,
        mut new_ids: impl FnMut() -> (String, String),
    ) -> Result<Vec<(Schedule, Fired)>, TableError> {
        let mut claimed = Vec::new();
        for mut schedule in self.list()? {
            if schedule.next_fire_ms > now_ms {
                break;
            }
            let queue = self.entries()?;
            let waiting: Vec<Queued> = queue.iter().map(|(_, q)| q.clone()).collect();
            let (queue_id, run_id) = new_ids();
            let queued = Queued {
                queue_id,
                run_id,
                messages: schedule.messages.clone(),
                options: None,
                source: Source::Schedule {
                    schedule_id: schedule.schedule_id.clone(),
                    due_ms: schedule.next_fire_ms,
                },
                queued_at: now_ms,
                merged: 0,
            };
            let policy = schedule.when_busy.unwrap_or(default);
            let decision = decide(policy, busy, &waiting, &queued);
            let placed = self.place(&decision, queued, &queue)?;
            let (mut statements, fired) = match placed {
                Some((statements, id)) => {
                    schedule.fired += 1;
                    let fired = match decision {
                        Decision::Interrupt => Fired::Interrupting { queue_id: id },
                        Decision::MergeInto(_) => Fired::Merged { queue_id: id },
                        _ => Fired::Queued { queue_id: id },
                    };
                    (statements, fired)
                }
                None => {
                    schedule.skipped += 1;
                    (Vec::new(), Fired::Skipped)
                }
            };
            let k = key(SCHEDULES.0, &schedule.schedule_id);
            match schedule.following(now_ms) {
                Some(next) => {
                    schedule.next_fire_ms = next;
                    statements.push(upsert(k, &schedule)?);
                }
                None => statements.push((DELETE.into(), vec![Arg::Text(k)])),
            }
            self.db
                .atomically(&statements)
                .map_err(|reason| TableError::Claim {
                    schedule_id: schedule.schedule_id.clone(),
                    reason,
                })?;
            claimed.push((schedule, fired));
        }
        Ok(claimed)
    }

    /// The first queued message, if any.
    pub fn first(&self) -> Result<Option<Queued>, TableError> {
        Ok(self.queue()?.into_iter().next())
    }

    /// Whether `queued`'s run has started: the session has a run with its id.
    pub fn started(&self, session_id: &str, queued: &Queued) -> Result<bool, TableError> {
        let rows = self
            .db
            .query(
                "SELECT 1 FROM runs WHERE session_id = ? AND run_id = ?",
                &[
                    Arg::Text(session_id.into()),
                    Arg::Text(queued.run_id.clone()),
                ],
            )
            .map_err(TableError::Storage)?;
        Ok(!rows.is_empty())
    }

    /// Removes queued message `queue_id` (its run started, or it was withdrawn).
    pub fn remove(&self, queue_id: &str) -> Result<bool, TableError> {
        let Some((k, _)) = self
            .entries()?
            .into_iter()
            .find(|(_, q)| q.queue_id == queue_id)
        else {
            return Ok(false);
        };
        let statement = (DELETE.to_string(), vec![Arg::Text(k)]);
        self.db
            .atomically(&[statement])
            .map_err(TableError::Storage)?;
        Ok(true)
    }
}

/// A message for the queue, from `POST …/messages`.
pub fn from_message(
    queue_id: String,
    run_id: String,
    messages: Vec<Message>,
    options: Option<serde_json::Value>,
    now_ms: u64,
) -> Queued {
    Queued {
        queue_id,
        run_id,
        messages,
        options,
        source: Source::Message,
        queued_at: now_ms,
        merged: 0,
    }
}
