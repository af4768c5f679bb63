//! The platform's object stores as the core's [`ObjectStore`]: an R2 bucket ([`R2`]) or
//! a KV namespace ([`Kv`]), for skills kept outside the worker (`StoredSkills`, feature
//! `skill-store`) and large tool attachments (feature `attachment-store`).
//!
//! ```ignore
//! if let Ok(bucket) = env.bucket("FILES") {
//!     writer = writer.skill_provider(StoredSkills::new(helix_edge::objects::R2(bucket), "skills/"));
//! }
//! ```

use futures::future::LocalBoxFuture;
pub use helix_edge_core::objects::{FileBytes, ObjectStore};
use std::ops::Range;
use worker::{Bucket, KvStore, Range as R2Range};

/// An R2 bucket: listed page by page, files read by byte range where asked.
pub struct R2(pub Bucket);

/// A KV namespace: listed page by page; a range of a value is cut from all of it.
pub struct Kv(pub KvStore);

impl ObjectStore for R2 {
    fn keys<'a>(&'a self, prefix: &'a str) -> LocalBoxFuture<'a, Result<Vec<String>, String>> {
        Box::pin(async move {
            let mut keys = Vec::new();
            let mut cursor = None;
            loop {
                let mut list = self.0.list().prefix(prefix);
                if let Some(cursor) = cursor.take() {
                    list = list.cursor(cursor);
                }
                let page = list.execute().await.map_err(|e| e.to_string())?;
                keys.extend(page.objects().iter().map(worker::Object::key));
                match page.cursor() {
                    Some(next) if page.truncated() => cursor = Some(next),
                    _ => return Ok(keys),
                }
            }
        })
    }

    fn get<'a>(
        &'a self,
        key: &'a str,
        range: Option<Range<u64>>,
    ) -> LocalBoxFuture<'a, Result<Option<FileBytes>, String>> {
        Box::pin(async move {
            let mut get = self.0.get(key);
            if let Some(range) = &range {
                get = get.range(R2Range::OffsetWithLength {
                    offset: range.start,
                    length: range.end.saturating_sub(range.start).max(1),
                });
            }
            let object = match get.execute().await {
                Ok(object) => object,
                // A range past the end is refused: the caller learns the size.
                Err(e) => {
                    let head = self.0.head(key).await.map_err(|_| e.to_string())?;
                    return match head {
                        Some(head) if range.is_some_and(|r| r.start >= head.size()) => {
                            Ok(Some(FileBytes {
                                bytes: Vec::new(),
                                offset: head.size(),
                                total: head.size(),
                            }))
                        }
                        Some(_) => Err(e.to_string()),
                        None => Ok(None),
                    };
                }
            };
            let Some(object) = object else {
                return Ok(None);
            };
            let total = object.size();
            let offset = range.map_or(0, |r| r.start.min(total));
            let body = object.body().ok_or("the object has no body")?;
            let bytes = body.bytes().await.map_err(|e| e.to_string())?;
            Ok(Some(FileBytes {
                bytes,
                offset,
                total,
            }))
        })
    }

    fn put<'a>(&'a self, key: &'a str, bytes: Vec<u8>) -> LocalBoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            self.0
                .put(key, bytes)
                .execute()
                .await
                .map_err(|e| e.to_string())?;
            Ok(())
        })
    }
}

impl ObjectStore for Kv {
    fn keys<'a>(&'a self, prefix: &'a str) -> LocalBoxFuture<'a, Result<Vec<String>, String>> {
        Box::pin(async move {
            let mut keys = Vec::new();
            let mut cursor = None;
            loop {
                let mut list = self.0.list().prefix(prefix.into());
                if let Some(cursor) = cursor.take() {
                    list = list.cursor(cursor);
                }
                let page = list.execute().await.map_err(|e| e.to_string())?;
                keys.extend(page.keys.into_iter().map(|k| k.name));
                match page.cursor {
                    Some(next) if !page.list_complete => cursor = Some(next),
                    _ => return Ok(keys),
                }
            }
        })
    }

    fn get<'a>(
        &'a self,
        key: &'a str,
        range: Option<Range<u64>>,
    ) -> LocalBoxFuture<'a, Result<Option<FileBytes>, String>> {
        Box::pin(async move {
            let value = self.0.get(key).bytes().await.map_err(|e| e.to_string())?;
            Ok(value.map(|bytes| FileBytes::of(&bytes, range)))
        })
    }

    fn put<'a>(&'a self, key: &'a str, bytes: Vec<u8>) -> LocalBoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let put = self.0.put_bytes(key, &bytes).map_err(|e| e.to_string())?;
            put.execute().await.map_err(|e| e.to_string())
        })
    }
}
