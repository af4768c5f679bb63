//! The session object's own SQLite storage: the session's store and commit log
//! ([`ObjectStore`]), the three parts of its journal ([`SqlStreamLog`], [`SqlAttempts`],
//! [`SqlSuspension`]), the SSE clients the stream fans out to, and the marks the object
//! keeps (its session id, a child's relay and report cursors).

mod attempts;
mod clients;
pub mod sql;
mod store;
mod stream;
mod suspension;

pub use attempts::SqlAttempts;
pub use clients::CLIENT_QUEUE;
pub use sql::Sql;
pub use store::{DEFAULT_BACKLOG_COMMITS, ObjectStore};
pub use stream::SqlStreamLog;
pub use suspension::SqlSuspension;
