//! The stream log: a session's SSE events in order, and the bookkeeping that keeps the
//! stream consistent with committed state across crashes.
//!
//! # Protocol
//! - Live chunks (text deltas, tool starts and ends) are [`emit`](StreamLog::emit)ted as
//!   they happen; until the step commits they are *unconfirmed*.
//! - Chunks that must only be seen once the commit is durable (state patches,
//!   suspension, `end`) are [`stage`](StreamLog::stage)d under the commit's unique id,
//!   then [`release`](StreamLog::release)d after the commit succeeds, or
//!   [`discard`](StreamLog::discard)ed when it fails. Release also confirms everything
//!   emitted before, and drops batches of rival writes of the same or older versions
//!   (they lost the compare-and-set).
//! - After a restart, [`recover`](StreamLog::recover) is given the durable head's version
//!   and commit id: the batch of that commit is released if it was not yet (nothing
//!   lost); every other batch is dropped (nothing invented); unconfirmed live chunks are
//!   reported so the runner can send `stream_resync`.

use crate::chunk::StreamEvent;
use std::cell::{Cell, RefCell};

/// What [`StreamLog::recover`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recovery {
    /// The first sequence number of live chunks from a step that never committed.
    pub torn_from: Option<u64>,
}

/// One stored event as the stream sends it: its sequence number, SSE event name and
/// data (one JSON object).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Gap-free from 1.
    pub seq: u64,
    /// `chunk`, `end` or `fail`.
    pub event: String,
    /// The JSON data.
    pub data: String,
}

/// A session's stream buffer.
pub trait StreamLog {
    /// Appends a live event; returns its sequence number (gap-free from 1).
    fn emit(&self, event: StreamEvent) -> u64;
    /// The sequence number the next appended event gets.
    fn next_sequence(&self) -> u64;
    /// Holds `events` back until commit `commit_id` (creating `version`) lands.
    fn stage(&self, commit_id: &str, version: u64, events: Vec<StreamEvent>);
    /// Commit `commit_id` landed: appends its batch and confirms everything so far.
    fn release(&self, commit_id: &str);
    /// Commit `commit_id` failed: drops its batch.
    fn discard(&self, commit_id: &str);
    /// Brings the log in line with the durable head (`version`, `commit_id`).
    fn recover(&self, version: u64, commit_id: &str) -> Recovery;
    /// Marks every event so far as confirmed at `version` (after a resync).
    fn confirm(&self, version: u64);
    /// The first sequence number of live chunks no commit has confirmed yet, if any.
    fn unconfirmed_from(&self) -> Option<u64>;
    /// The stored events after sequence `after`, in order (the oldest may have been
    /// dropped by retention).
    fn replay(&self, after: u64) -> Vec<Frame>;
}

/// A stream log in memory, for tests. Survives "restarts" of runners that share it.
#[derive(Debug, Default)]
pub struct MemoryStreamLog {
    events: RefCell<Vec<StreamEvent>>,
    /// Events up to this count are confirmed.
    confirmed: Cell<usize>,
    staged: RefCell<Vec<(String, u64, Vec<StreamEvent>)>>,
}

impl MemoryStreamLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every event so far, in sequence order (sequence = index + 1).
    pub fn events(&self) -> Vec<StreamEvent> {
        self.events.borrow().clone()
    }
}

impl StreamLog for MemoryStreamLog {
    fn emit(&self, event: StreamEvent) -> u64 {
        let mut events = self.events.borrow_mut();
        events.push(event);
        events.len() as u64
    }

    fn next_sequence(&self) -> u64 {
        self.events.borrow().len() as u64 + 1
    }

    fn stage(&self, commit_id: &str, version: u64, events: Vec<StreamEvent>) {
        self.staged
            .borrow_mut()
            .push((commit_id.into(), version, events));
    }

    fn release(&self, commit_id: &str) {
        let mut staged = self.staged.borrow_mut();
        let mut events = self.events.borrow_mut();
        if let Some(pos) = staged.iter().position(|(id, _, _)| id == commit_id) {
            let (_, version, batch) = staged.remove(pos);
            events.extend(batch);
            staged.retain(|(_, v, _)| *v > version);
        }
        self.confirmed.set(events.len());
    }

    fn discard(&self, commit_id: &str) {
        self.staged
            .borrow_mut()
            .retain(|(id, _, _)| id != commit_id);
    }

    fn recover(&self, _version: u64, commit_id: &str) -> Recovery {
        let landed = self
            .staged
            .borrow()
            .iter()
            .any(|(id, _, _)| id == commit_id);
        if landed {
            self.release(commit_id);
        }
        self.staged.borrow_mut().clear();
        let len = self.events.borrow().len();
        let confirmed = self.confirmed.get();
        Recovery {
            torn_from: (len > confirmed).then_some(confirmed as u64 + 1),
        }
    }

    fn confirm(&self, _version: u64) {
        self.confirmed.set(self.events.borrow().len());
    }

    fn unconfirmed_from(&self) -> Option<u64> {
        let confirmed = self.confirmed.get();
        (self.events.borrow().len() > confirmed).then_some(confirmed as u64 + 1)
    }

    fn replay(&self, after: u64) -> Vec<Frame> {
        let events = self.events.borrow();
        let frame = |(i, e): (usize, &StreamEvent)| Frame {
            seq: i as u64 + 1,
            event: e.name().into(),
            data: e.data_json(),
        };
        events
            .iter()
            .enumerate()
            .map(frame)
            .skip(after as usize)
            .collect()
    }
}
