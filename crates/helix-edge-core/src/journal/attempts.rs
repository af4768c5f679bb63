//! Step attempts: how many times each step of a run has begun. A step that keeps
//! beginning without committing (a crash loop) fails its run instead of spending model
//! calls forever.

use std::cell::RefCell;
use std::collections::HashMap;

/// The attempt counter of a session's steps.
pub trait StepAttempts {
    /// Records that `step` of `run_id` begins; returns how many times it has begun.
    fn begin_step(&self, run_id: &str, step: u32) -> u32;
}

/// Step attempts in memory, for tests.
#[derive(Debug, Default)]
pub struct MemoryAttempts {
    attempts: RefCell<HashMap<(String, u32), u32>>,
}

impl StepAttempts for MemoryAttempts {
    fn begin_step(&self, run_id: &str, step: u32) -> u32 {
        let mut attempts = self.attempts.borrow_mut();
        let n = attempts.entry((run_id.into(), step)).or_insert(0);
        *n += 1;
        *n
    }
}
