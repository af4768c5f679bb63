//! One piece of background work per session at a time, in this isolate: a guard holds
//! the session's place in a thread-local list and gives it back however the work ends
//! (a dropped future included). The OTLP export and the notifications' delivery use it.

use std::cell::RefCell;
use std::thread::LocalKey;

/// The sessions whose work of one kind is under way.
pub(crate) type Sessions = RefCell<Vec<String>>;

/// Session `id`'s place in a [`Sessions`] list, while it is held.
pub(crate) struct Busy {
    list: &'static LocalKey<Sessions>,
    id: String,
}

impl Busy {
    /// The place of session `id` in `list`, or `None` when its work is under way already.
    pub(crate) fn take(list: &'static LocalKey<Sessions>, id: &str) -> Option<Self> {
        list.with_borrow_mut(|sessions| {
            if sessions.iter().any(|s| s == id) {
                return None;
            }
            sessions.push(id.to_string());
            Some(Self {
                list,
                id: id.to_string(),
            })
        })
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.list
            .with_borrow_mut(|sessions| sessions.retain(|s| *s != self.id));
    }
}
