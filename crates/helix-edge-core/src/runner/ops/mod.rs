//! The runner's request-driven operations, each validated against durable state and
//! making at most one commit (the work itself happens in `drive`):
//! - `create`: a session and its first run;
//! - `answer`: an answer to a pending call, stored here or routed to the child that has
//!   the call;
//! - `run`: a new run (a follow-up message, a queued follow-up turn);
//! - `control`: interrupt, resume, abort;
//! - `branch`: retry from a checkpoint, fork into a new session;
//! - `delete`: erase the session and its children;
//! - `check`: a plan checked against the session, nothing run.
//!
//! `requests` has the requests and answers they share.

pub(crate) mod answer;
mod branch;
mod check;
mod control;
mod create;
mod delete;
mod requests;
mod run;

pub use requests::{CreateSession, Created, Routed, Submission};
pub(crate) use requests::{check_options, ensure_idle, head_only, new_run};
