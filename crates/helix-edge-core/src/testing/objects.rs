//! An object store in memory, for skills kept in a store ([`StoredSkills`]) in tests:
//! what an R2 bucket or a KV namespace is on the platform.
//!
//! [`StoredSkills`]: crate::skill::StoredSkills

use crate::skill::{FileBytes, SkillStore};
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

    /// Deletes `key`.
    pub fn delete(&self, key: &str) {
        self.0.borrow_mut().remove(key);
    }
}

impl SkillStore for MemoryObjects {
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
}
