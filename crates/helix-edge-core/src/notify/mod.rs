//! Notifications of calls that wait on a person, and decisions from where the person is
//! (SPEC §2d): when a call starts waiting (an approval, a client call, a question) the
//! session's object owes each configured sink a notification, and another when the call
//! stops waiting, so that a channel can update its message. What is owed is written to
//! the object's durable outbox and delivered after the slice, at least once, retried with
//! backoff; a dead sink never blocks or slows the run.
//!
//! - `config`: the sinks a deployment configures (`NOTIFY_WEBHOOK_URL`, …).
//! - `payload`: a notification's body: JSON, or a Slack message with Approve / Deny
//!   buttons.
//! - `sign`: Standard Webhooks signatures, and decision links (signed, expiring).
//! - `outbox`: the outbox in the object's SQLite: what is owed, delivered or given up.
//! - `page`: a decision link's pages (the call and a button; only the button decides).

mod config;
mod outbox;
mod page;
mod payload;
mod sign;

pub use config::{Format, Notify, Webhook};
pub use outbox::{Delivered, Delivery, MAX_ATTEMPTS, Outbox, Waiting};
pub use page::{call_page, message};
pub use payload::{Event, EventKind, body};
pub use sign::{
    DECISION_CALL_PATH, Decision, LinkError, decision_token, signature, verify_decision,
};
