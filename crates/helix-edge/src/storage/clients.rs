//! The SSE clients connected to a session's object: each has a bounded queue of
//! frames; a client that is gone or too far behind is dropped (it resumes with
//! `Last-Event-ID`, losing nothing).

use futures::channel::mpsc;
use std::cell::RefCell;

/// Frames a slow client may have queued before it is disconnected.
pub const CLIENT_QUEUE: usize = 1_024;

/// The frames queued for one connected client; an empty frame means "close".
pub type ClientSender = mpsc::Sender<Vec<u8>>;

/// One SSE frame.
pub fn frame(seq: u64, event: &str, data: &str) -> Vec<u8> {
    format!("id: {seq}\nevent: {event}\ndata: {data}\n\n").into_bytes()
}

/// The connected clients of one session.
#[derive(Default)]
pub struct Clients(RefCell<Vec<ClientSender>>);

impl Clients {
    /// Adds a client.
    pub fn add(&self, tx: ClientSender) {
        self.0.borrow_mut().push(tx);
    }

    /// Sends a frame to every client, dropping those that are gone or too far behind.
    pub fn broadcast(&self, frame: Vec<u8>) {
        self.0
            .borrow_mut()
            .retain_mut(|tx| tx.try_send(frame.clone()).is_ok());
    }

    /// Ends every connected stream (after `end` or `fail`).
    pub fn close(&self) {
        for mut tx in self.0.borrow_mut().drain(..) {
            let _ = tx.try_send(Vec::new());
        }
    }

    /// Sends `: ping` to every client; returns how many are connected.
    pub fn ping(&self) -> usize {
        self.broadcast(b": ping\n\n".to_vec());
        self.0.borrow().len()
    }
}
