//! The persistence contract of a session: a small trait every backend implements (the
//! in-memory one here for native tests, D1 in the platform), the records it stores, and
//! a conformance suite written once and run against every backend.
//!
//! Invariants every backend keeps:
//! - `create` is atomic: of concurrent creators of one id, exactly one wins.
//! - `commit` is one atomic write guarded by the session version (compare-and-set): the
//!   messages, the state change, the new head, the run and the checkpoint land together
//!   or not at all, and a stale version is [`StoreError::Stale`], never an overwrite.
//!
//! Which D1 database (shard) holds a session's rows is [`shards`]'s decision.
//!
//! Answers to pending calls are not here: they are the suspension context, kept by the
//! session's own object with its stream ([`crate::journal::Suspension`]).

mod answers;
pub mod conformance;
mod memory;
pub mod migrations;
mod owner;
mod planned;
#[cfg(feature = "retention")]
pub mod retention;
pub mod rows;
pub mod shards;
mod sql_failure;

pub use answers::{
    Answer, Approvers, CallWait, PendingCall, PendingKind, PendingView, WaitOutcome, pending_calls,
};
pub use memory::MemoryStore;
pub use owner::Owner;

use crate::chunk::{RunStatus, SuspendReason};
use crate::error::{Category, Coded, ErrorInfo};
use crate::message::Message;
use crate::model::{StopReason, Usage};
use crate::state::PatchOp;
use crate::wire::wire_enum;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

wire_enum! {
    /// Status of a session (SPEC §2).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum SessionStatus {
        /// Running or suspended (pending calls mean "awaiting the client").
        Active = "active",
        /// Stopped at a step boundary on request; resumable.
        Interrupted = "interrupted",
        /// The last run completed.
        Completed = "completed",
        /// The last run failed; `retry` can restore a checkpoint.
        Failed = "failed",
        /// Stopped for good.
        Aborted = "aborted",
    }
}

/// One run (turn) of a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunRecord {
    /// Stable id through suspensions and resumptions.
    pub run_id: String,
    /// 1-based turn number within the session.
    pub turn: u32,
    /// Where it stands.
    pub status: RunStatus,
    /// Model steps taken in this run.
    pub step_count: u32,
    /// Start time (ms).
    pub started_at: u64,
    /// End time (ms), once terminal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<u64>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorInfo>,
    /// Tokens used by the run's model calls.
    #[serde(default)]
    pub usage: Usage,
    /// The same tokens, per model: the one that answered, as its provider named it in
    /// the answer, else the one asked for ([`crate::model::Model::name`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub usage_by_model: BTreeMap<String, Usage>,
    /// Corrective nudges sent because a required output was missing.
    #[serde(default)]
    pub nudges: u32,
    /// Where the run's own input starts in the transcript (the index of its first user
    /// message; for a retry, that of the run it redoes).
    #[serde(default)]
    pub input_at: u64,
    /// The output a run that finished in the same step as sub-agent calls completes
    /// with once those sub-agents have ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deferred_output: Option<Value>,
    /// The model options the request that started it gave (`providerOptions`, as given;
    /// read by [`crate::provider_options`]): every model call of the run applies them over
    /// the agent's settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Value>,
    /// Its trace, kept through its suspensions (absent on runs recorded before traces).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<crate::trace::RunTrace>,
}

/// Where a child session reports: the parent session and the parent's tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParentRef {
    /// The parent session.
    pub session_id: String,
    /// The parent's sub-agent call this child answers.
    pub tool_call_id: String,
    /// The root of the session tree (where clients submit answers).
    pub root_id: String,
}

/// Where a forked session branched from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForkOrigin {
    /// The session it was forked from.
    pub session_id: String,
    /// The checkpoint of that session it starts from.
    pub checkpoint_id: String,
    /// That checkpoint's step count.
    pub step_count: u32,
}

/// A parent's durable reference to one of its child sessions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubSession {
    /// The child session.
    pub child_id: String,
    /// The child's agent.
    pub agent: String,
    /// The parent's call it answers.
    pub tool_call_id: String,
    /// Running, or how it ended for the parent.
    pub status: ChildStatus,
    /// When the parent recorded it (ms).
    pub created_at: u64,
    /// Last status change (ms).
    pub updated_at: u64,
    /// For a persistent child: the name the parent calls it by (its id is
    /// `{parent}-agent-{name}`), and `tool_call_id` is the call that started its current
    /// turn. `None` for a sub-agent call's child.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// For a persistent child: how the parent waits on its turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<ChildMode>,
}

wire_enum! {
    /// How a parent waits on a persistent child's turns.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum ChildMode {
        /// `spawnAgent` and `sendMessage` suspend the parent until the child's turn
        /// ends; their result is the turn's output.
        Blocking = "blocking",
        /// `spawnAgent` and `sendMessage` answer at once; the parent gets a notice, as a
        /// message at its next step, when the child's turn ends.
        NonBlocking = "non_blocking",
    }
}

wire_enum! {
    /// Where a child session stands for its parent.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum ChildStatus {
        /// The parent waits on it.
        Running = "running",
        /// It ended with output.
        Completed = "completed",
        /// It ended without output (failed, aborted, or could not be started).
        Failed = "failed",
        /// It did not end within the call's timeout and was aborted.
        TimedOut = "timed_out",
        /// A persistent child its parent ended for good.
        Terminated = "terminated",
    }
}

/// The durable head of a session: everything but its state, transcript and answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionHead {
    /// Session id.
    pub id: String,
    /// Agent name.
    pub agent: String,
    /// Status.
    pub status: SessionStatus,
    /// Compare-and-set guard, bumped by every commit.
    pub version: u64,
    /// Unique id of the commit that wrote this head: tells a journal whose staged
    /// stream events belong to the durable state after a crash.
    #[serde(default)]
    pub commit_id: String,
    /// Model steps over all runs.
    pub step_count: u32,
    /// Transcript length.
    pub message_count: u64,
    /// The current (latest) run.
    pub run: RunRecord,
    /// Calls the run waits on.
    pub pending: Vec<PendingCall>,
    /// Why it waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspended_reason: Option<SuspendReason>,
    /// Output of the last completed run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// Error of the last failed run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorInfo>,
    /// The newest checkpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_id: Option<String>,
    /// Creation time (ms).
    pub created_at: u64,
    /// Last commit time (ms).
    pub updated_at: u64,
    /// For a child session: where it reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<ParentRef>,
    /// For a fork: where it branched from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<ForkOrigin>,
    /// Who owns it, when a user created it (or its root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<Owner>,
}

/// A restorable point: the state and transcript length after a commit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointRecord {
    /// Checkpoint id.
    pub id: String,
    /// Session step count at that point.
    pub step_count: u32,
    /// Transcript length at that point.
    pub message_count: u64,
    /// When (ms).
    pub timestamp: u64,
    /// Where the run stood when it was taken.
    pub status: CheckpointStatus,
    /// The run that made it.
    pub run_id: String,
    /// For a model step's checkpoint: the call's token usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// For a model step's checkpoint: why the model stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<StopReason>,
    /// For a resumption's checkpoint: how long each answered call waited.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waits: Vec<CallWait>,
}

wire_enum! {
    /// Where the run stood when a checkpoint was taken.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum CheckpointStatus {
        /// The run went on.
        Active = "active",
        /// The run suspended: its transcript has unanswered calls, so it cannot be restored.
        Suspended = "suspended",
        /// The run completed.
        Completed = "completed",
        /// The run failed.
        Failed = "failed",
    }
}

impl CheckpointRecord {
    /// Whether `retry` may restore it (no unanswered calls in its transcript).
    pub fn restorable(&self) -> bool {
        self.status != CheckpointStatus::Suspended
    }
}

/// A session as the runner loads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    /// The head.
    pub head: SessionHead,
    /// The current state.
    pub state: Value,
    /// A requested interrupt not yet honoured.
    pub interrupt: Option<InterruptRequest>,
}

/// A durable request to stop at the next step boundary.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterruptRequest {
    /// The reason given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A turn queued behind this one (a persistent child's next message from its
    /// parent), started once this one stops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub then: Option<FollowUp>,
    /// Honoured once the calls the run waits on are answered, at the boundary of the
    /// step that takes their results (the calls that a message with `whenBusy:
    /// interrupt` cancelled), not before.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub after_calls: bool,
}

impl InterruptRequest {
    /// A plain interrupt, for `reason`.
    pub fn because(reason: Option<String>) -> Self {
        Self {
            reason,
            then: None,
            after_calls: false,
        }
    }
}

/// A turn waiting for the current one to stop: a message, for a parent's call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FollowUp {
    /// The parent's message.
    pub message: String,
    /// The parent's call the turn answers.
    pub tool_call_id: String,
}

/// How a commit changes the state.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum StateChange {
    /// Unchanged.
    #[default]
    None,
    /// Patched, in order.
    Patch(Vec<PatchOp>),
    /// Replaced wholesale (checkpoint restore).
    Replace(Value),
}

/// One atomic write of a session.
#[derive(Debug, Clone, PartialEq)]
pub struct Commit {
    /// The new head (its `version` is ignored: the store sets `expected + 1`).
    pub head: SessionHead,
    /// Drop messages from this index on before appending (checkpoint restore).
    pub truncate_messages_to: Option<u64>,
    /// Messages appended; `head.message_count` must equal the new length.
    pub messages: Vec<Message>,
    /// The state change.
    pub state: StateChange,
    /// A checkpoint of the state after this commit.
    pub checkpoint: Option<CheckpointRecord>,
    /// Clears a requested interrupt (it was honoured).
    pub clear_interrupt: bool,
    /// Child-session references to record or update (by child id).
    pub subsessions: Vec<SubSession>,
}

/// A new session.
#[derive(Debug, Clone, PartialEq)]
pub struct NewSession {
    /// Its head (version 1).
    pub head: SessionHead,
    /// Initial state.
    pub state: Value,
    /// Initial transcript.
    pub messages: Vec<Message>,
    /// The checkpoint of the starting point, so that even a first step can be retried.
    pub checkpoint: CheckpointRecord,
}

/// What `answer` did.
#[derive(Debug, Clone, PartialEq)]
pub enum AnswerOutcome {
    /// Stored: this answer is the one that counts.
    Stored,
    /// An answer was already stored; it stands.
    AlreadyAnswered(Answer),
}

/// A storage failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// `create` lost: the id is taken.
    #[error("Session '{0}' already exists")]
    Exists(String),
    /// No such session.
    #[error("Session '{0}' not found")]
    NotFound(String),
    /// The version moved: someone else committed first.
    #[error("The session changed concurrently (expected version {expected})")]
    Stale {
        /// The version the writer expected.
        expected: u64,
    },
    /// The backend failed.
    #[error("Storage failed: {0}")]
    Backend(String),
    /// Stored data does not decode.
    #[error("Stored data is corrupt: {0}")]
    Corrupt(String),
    /// The database lacks tables or columns this version needs: migrations are missing.
    #[error("{}", schema_message(.missing))]
    SchemaOutdated {
        /// The migrations this worker ships that the database has not applied.
        missing: Vec<String>,
    },
    /// Too many commits wait to reach the queryable record (D1); the session takes no
    /// more until they do.
    #[error(
        "The session's storage is catching up ({commits} commits, {bytes} bytes wait to be replicated); try again"
    )]
    Backlog {
        /// Commits waiting.
        commits: u64,
        /// Their size.
        bytes: u64,
    },
    /// A write would exceed a storage size limit; nothing was written.
    #[error("The {what} is {bytes} bytes, over the storage limit of {limit} bytes")]
    TooLarge {
        /// What was too large ("state change", "session state", "message"…).
        what: &'static str,
        /// Its size.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
}

impl Coded for StoreError {
    fn code(&self) -> &'static str {
        match self {
            Self::Exists(_) => "session_exists",
            Self::NotFound(_) => "session_not_found",
            Self::Stale { .. } => "state_stale",
            Self::Backend(_) => "framework_storage",
            Self::Corrupt(_) => "framework_storage_corrupt",
            Self::SchemaOutdated { .. } => "schema_outdated",
            Self::Backlog { .. } => "storage_backlog",
            Self::TooLarge { .. } => "content_too_large",
        }
    }
    fn category(&self) -> Category {
        match self {
            Self::Stale { .. } => Category::State,
            _ => Category::Framework,
        }
    }
    fn retryable(&self) -> bool {
        matches!(
            self,
            Self::Stale { .. }
                | Self::Backend(_)
                | Self::SchemaOutdated { .. }
                | Self::Backlog { .. }
        )
    }
}

fn schema_message(missing: &[String]) -> String {
    match missing {
        [] => "The database schema does not match this worker's migrations; apply them with \
               `wrangler d1 migrations apply`"
            .into(),
        names => format!(
            "The database schema is behind this worker: apply migration {} with `wrangler d1 \
             migrations apply`",
            names.join(", ")
        ),
    }
}

/// The persistence operations of sessions. Single-threaded runtime: no `Send` bound.
#[allow(async_fn_in_trait)]
pub trait Store {
    /// Creates a session; [`StoreError::Exists`] if the id is taken.
    async fn create(&self, session: NewSession) -> Result<(), StoreError>;
    /// Loads a session, or `None`.
    async fn load(&self, id: &str) -> Result<Option<Loaded>, StoreError>;
    /// Messages `offset..offset+limit` of the transcript.
    async fn messages(&self, id: &str, offset: u64, limit: u64)
    -> Result<Vec<Message>, StoreError>;
    /// The whole transcript (`count` messages), for a drive that gives it back with
    /// [`Store::give_back`] when it ends: a store that keeps it in memory lends it out
    /// instead of copying it, so a drive's cost does not grow with the session.
    async fn lend_transcript(&self, id: &str, count: u64) -> Result<Vec<Message>, StoreError> {
        self.messages(id, 0, count).await
    }
    /// Takes back the transcript that [`Store::lend_transcript`] lent, as it stands at
    /// session `version` (every message committed since appended); ignored when it is not
    /// the store's latest.
    fn give_back(&self, _id: &str, _version: u64, _transcript: Vec<Message>) {}
    /// Commits atomically if the version is still `expected_version`; returns the new one.
    async fn commit(
        &self,
        id: &str,
        expected_version: u64,
        commit: Commit,
    ) -> Result<u64, StoreError>;
    /// Requests an interrupt at the next step boundary.
    async fn request_interrupt(
        &self,
        id: &str,
        request: InterruptRequest,
    ) -> Result<(), StoreError>;
    /// All runs, oldest first.
    async fn runs(&self, id: &str) -> Result<Vec<RunRecord>, StoreError>;
    /// All checkpoints, oldest first.
    async fn checkpoints(&self, id: &str) -> Result<Vec<CheckpointRecord>, StoreError>;
    /// A checkpoint and the state it holds.
    async fn checkpoint_state(
        &self,
        id: &str,
        checkpoint_id: &str,
    ) -> Result<Option<(CheckpointRecord, Value)>, StoreError>;
    /// The child sessions `parent_id` recorded, oldest first.
    async fn subsessions(&self, parent_id: &str) -> Result<Vec<SubSession>, StoreError>;
    /// Removes the session and everything recorded for it: head, state, transcript,
    /// runs, checkpoints and its child records (not the children themselves). Removing a
    /// session that does not exist does nothing.
    async fn delete(&self, id: &str) -> Result<(), StoreError>;
}

/// Records `updates` in `list`: a known child's record is replaced (keeping when it was
/// first recorded), a new one appended.
pub(crate) fn upsert_subsessions(list: &mut Vec<SubSession>, updates: Vec<SubSession>) {
    for update in updates {
        match list.iter_mut().find(|s| s.child_id == update.child_id) {
            Some(known) => {
                let created_at = known.created_at;
                *known = update;
                known.created_at = created_at;
            }
            None => list.push(update),
        }
    }
}

/// Shares one store between runners (tests, and runners that borrow the platform's).
macro_rules! forward_store {
    ($($ty:ty),*) => {$(
        impl<T: Store> Store for $ty {
            async fn create(&self, session: NewSession) -> Result<(), StoreError> {
                (**self).create(session).await
            }
            async fn load(&self, id: &str) -> Result<Option<Loaded>, StoreError> {
                (**self).load(id).await
            }
            async fn messages(&self, id: &str, offset: u64, limit: u64) -> Result<Vec<Message>, StoreError> {
                (**self).messages(id, offset, limit).await
            }
            async fn lend_transcript(&self, id: &str, count: u64) -> Result<Vec<Message>, StoreError> {
                (**self).lend_transcript(id, count).await
            }
            fn give_back(&self, id: &str, version: u64, transcript: Vec<Message>) {
                (**self).give_back(id, version, transcript)
            }
            async fn commit(&self, id: &str, expected_version: u64, commit: Commit) -> Result<u64, StoreError> {
                (**self).commit(id, expected_version, commit).await
            }
            async fn request_interrupt(&self, id: &str, request: InterruptRequest) -> Result<(), StoreError> {
                (**self).request_interrupt(id, request).await
            }
            async fn runs(&self, id: &str) -> Result<Vec<RunRecord>, StoreError> {
                (**self).runs(id).await
            }
            async fn checkpoints(&self, id: &str) -> Result<Vec<CheckpointRecord>, StoreError> {
                (**self).checkpoints(id).await
            }
            async fn checkpoint_state(
                &self,
                id: &str,
                checkpoint_id: &str,
            ) -> Result<Option<(CheckpointRecord, Value)>, StoreError> {
                (**self).checkpoint_state(id, checkpoint_id).await
            }
            async fn subsessions(&self, parent_id: &str) -> Result<Vec<SubSession>, StoreError> {
                (**self).subsessions(parent_id).await
            }
            async fn delete(&self, id: &str) -> Result<(), StoreError> {
                (**self).delete(id).await
            }
        }
    )*};
}

forward_store!(&T, std::rc::Rc<T>);
