//! An object store in memory, for tests of what reads and writes one (skills kept in a
//! store, large attachments): what an R2 bucket or a KV namespace is on the platform.

use crate::objects::{FileBytes, ObjectStore};
use futures::future::{LocalBoxFuture, ready};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ops::Range;
use std::rc::Rc;

/// Objects by key, in memory; clones share them (edit a skill while an agent reads it).
#[derive(Debug, Clone, Default)]
pub struct MemoryObjects(Rc<RefCell<BTreeMap<String, Vec<u8>>>>);

impl MemoryObjects {
    /// Puts `text` at `key`.
    pub fn put(&self, key: &str, text: &str) {
        self.0
            .borrow_mut()
            .insert(key.into(), text.as_bytes().to_vec());
    }

    /// The object at `key`, as text.
    pub fn text(&self, key: &str) -> Option<String> {
        let map = self.0.borrow();
        map.get(key)
            .map(|b| String::from_utf8_lossy(b).into_owned())
    }

    /// Every key.
    pub fn all_keys(&self) -> Vec<String> {
        self.0.borrow().keys().cloned().collect()
    }

    /// Deletes `key`.
    pub fn delete(&self, key: &str) {
        self.0.borrow_mut().remove(key);
    }
}

impl ObjectStore for MemoryObjects {
    fn keys<'a>(&'a self, prefix: &'a str) -> LocalBoxFuture<'a, Result<Vec<String>, String>> {
        let map = self.0.borrow();
        let keys = map.keys().filter(|k| k.starts_with(prefix)).cloned();
        Box::pin(ready(Ok(keys.collect())))
    }

    fn get<'a>(
        &'a self,
        key: &'a str,
        range: Option<Range<u64>>,
    ) -> LocalBoxFuture<'a, Result<Option<FileBytes>, String>> {
        let found = self.0.borrow().get(key).map(|b| FileBytes::of(b, range));
        Box::pin(ready(Ok(found)))
    }

    fn put<'a>(&'a self, key: &'a str, bytes: Vec<u8>) -> LocalBoxFuture<'a, Result<(), String>> {
        self.0.borrow_mut().insert(key.into(), bytes);
        Box::pin(ready(Ok(())))
    }
}
