//! The session object's own SQLite storage on the Workers runtime: [`Sql`], the core's
//! [`Db`](crate::sqlite::Db) over `SqlStorage`. The store, the journal, the replica
//! and the SSE fan-out over it are the core's ([`crate::sqlite`]); here they are named
//! for the object.

mod sql;

pub use sql::Sql;

use crate::d1::D1;

/// The session's store in its object, replicating to D1.
pub type ObjectStore = crate::sqlite::SqliteStore<D1>;
/// The session's replication to D1.
pub type ObjectReplica = crate::sqlite::Replica<D1>;
