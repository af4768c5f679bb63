//! A scripted in-memory [`Transport`]: each `send` takes the next scripted answer; sleeps
//! advance a manual clock and are recorded, so retry timing is asserted exactly.

#![allow(dead_code)]

pub mod recorded;

use futures::future::LocalBoxFuture;
use helix_edge_core::provider::{BodyStream, HttpRequest, HttpResponse, Transport, TransportError};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;

/// One scripted answer.
pub enum Answer {
    /// Status, headers and body chunks (a chunk that is `Err` fails the read there).
    Http(
        u16,
        Vec<(String, String)>,
        Vec<Result<Vec<u8>, TransportError>>,
    ),
    /// The request fails before any answer.
    Fail(TransportError),
}

#[derive(Default)]
pub struct ChunkedTransport {
    answers: RefCell<VecDeque<Answer>>,
    pub sent: RefCell<Vec<HttpRequest>>,
    pub slept: RefCell<Vec<u64>>,
    pub warnings: RefCell<Vec<String>>,
    now: Cell<u64>,
}

impl ChunkedTransport {
    pub fn new(answers: Vec<Answer>) -> Self {
        Self {
            answers: RefCell::new(answers.into()),
            now: Cell::new(1_000_000),
            ..Self::default()
        }
    }

    /// One 200 answer with these body chunks.
    pub fn ok(chunks: Vec<Vec<u8>>) -> Self {
        Self::new(vec![Answer::Http(
            200,
            vec![],
            chunks.into_iter().map(Ok).collect(),
        )])
    }
}

struct Body(VecDeque<Result<Vec<u8>, TransportError>>);

impl BodyStream for Body {
    fn next(&mut self) -> LocalBoxFuture<'_, Option<Result<Vec<u8>, TransportError>>> {
        let next = self.0.pop_front();
        Box::pin(async move { next })
    }
}

impl Transport for ChunkedTransport {
    fn send<'a>(
        &'a self,
        request: &'a HttpRequest,
        _timeout: std::time::Duration,
    ) -> LocalBoxFuture<'a, Result<HttpResponse, TransportError>> {
        self.sent.borrow_mut().push(request.clone());
        let answer = self.answers.borrow_mut().pop_front();
        Box::pin(async move {
            match answer {
                Some(Answer::Http(status, headers, chunks)) => Ok(HttpResponse {
                    status,
                    headers,
                    body: Box::new(Body(chunks.into())),
                }),
                Some(Answer::Fail(e)) => Err(e),
                None => Err(TransportError::Network("no more scripted answers".into())),
            }
        })
    }

    fn sleep(&self, wait: std::time::Duration) -> LocalBoxFuture<'_, ()> {
        let ms = wait.as_millis() as u64;
        self.slept.borrow_mut().push(ms);
        self.now.set(self.now.get() + ms);
        Box::pin(async {})
    }

    fn now_ms(&self) -> u64 {
        self.now.get()
    }

    fn random(&self) -> f64 {
        0.5
    }

    fn warn(&self, message: &str) {
        self.warnings.borrow_mut().push(message.into());
    }
}

pub fn block<F: Future>(f: F) -> F::Output {
    futures::executor::block_on(f)
}
