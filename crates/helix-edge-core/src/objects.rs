//! Objects by key in a store outside the session (an R2 bucket or a KV namespace on the
//! platform, [`MemoryObjects`](crate::testing::MemoryObjects) in tests): what skills
//! kept in a store are read from (feature `skill-store`) and where large tool
//! attachments are kept (feature `attachment-store`).

use futures::future::LocalBoxFuture;
use std::ops::Range;

/// Objects by key.
pub trait ObjectStore {
    /// Every key that starts with `prefix` (all pages of the store's listing).
    fn keys<'a>(&'a self, prefix: &'a str) -> LocalBoxFuture<'a, Result<Vec<String>, String>>;

    /// The object at `key`, whole or the bytes of `range` (clipped to it); `None` when
    /// there is none.
    fn get<'a>(
        &'a self,
        key: &'a str,
        range: Option<Range<u64>>,
    ) -> LocalBoxFuture<'a, Result<Option<FileBytes>, String>>;

    /// Writes `bytes` at `key`, replacing what was there.
    fn put<'a>(&'a self, key: &'a str, bytes: Vec<u8>) -> LocalBoxFuture<'a, Result<(), String>>;
}

/// Bytes of an object.
#[derive(Debug, Clone, PartialEq)]
pub struct FileBytes {
    /// The bytes read.
    pub bytes: Vec<u8>,
    /// Where they start in the object.
    pub offset: u64,
    /// The object's size.
    pub total: u64,
}

impl FileBytes {
    /// `range` of `content` (clipped to it), or all of it.
    pub fn of(content: &[u8], range: Option<Range<u64>>) -> Self {
        let total = content.len() as u64;
        let range = range.unwrap_or(0..total);
        let (start, end) = (range.start.min(total), range.end.min(total));
        let bytes = content
            .get(start as usize..end.max(start) as usize)
            .unwrap_or_default();
        Self {
            bytes: bytes.to_vec(),
            offset: start,
            total,
        }
    }
}
