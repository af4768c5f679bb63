//! Child sessions for runs of the core: children as sessions in the same store, run by
//! a runner of their own, as the platform's objects run them (sub-agent and persistent
//! children's tests).

use futures::future::LocalBoxFuture;
use helix_edge_core::runner::{ChildOrder, Children, CreateSession, RunError, Runner};
use helix_edge_core::store::{MemoryStore, PendingCall, PendingKind, Store, StoreError};
use std::cell::RefCell;
use std::rc::Rc;

/// A runner over the shared in-memory store.
pub type R = Runner<Rc<MemoryStore>>;

/// Children as sessions in the same store, driven by the test.
pub struct LocalChildren {
    /// The children's runner.
    pub runner: Rc<R>,
    /// Starts whose message contains this fail (a child object that cannot be reached).
    pub unstartable: &'static str,
    /// Every order sent, in order.
    pub orders: RefCell<Vec<(String, ChildOrder)>>,
}

impl Children for LocalChildren {
    fn send<'a>(
        &'a self,
        child_id: &'a str,
        order: ChildOrder,
    ) -> LocalBoxFuture<'a, Result<(), String>> {
        self.orders
            .borrow_mut()
            .push((child_id.to_string(), order.clone()));
        Box::pin(async move {
            let result = match order {
                ChildOrder::Start { message, .. } if message.contains(self.unstartable) => {
                    return Err("the child's object is unreachable".into());
                }
                ChildOrder::Start {
                    agent,
                    message,
                    parent,
                    owner,
                    trace,
                } => self
                    .runner
                    .create(CreateSession {
                        parent: Some(parent),
                        owner,
                        trace,
                        ..CreateSession::new(child_id, agent, message)
                    })
                    .await
                    .map(drop),
                ChildOrder::Abort { reason } => self.runner.abort(child_id, Some(reason)).await,
                ChildOrder::Interrupt { reason } => self.runner.interrupt(child_id, reason).await,
                ChildOrder::Resume => self.runner.resume(child_id).await.map(drop),
                ChildOrder::Message {
                    message,
                    tool_call_id,
                } => {
                    self.runner
                        .parent_message(child_id, message, &tool_call_id)
                        .await
                }
                ChildOrder::Delete => self.runner.delete(child_id, true).await,
            };
            match result {
                Ok(()) | Err(RunError::Store(StoreError::Exists(_))) => Ok(()),
                Err(RunError::Store(StoreError::NotFound(_))) => Ok(()),
                Err(e) => Err(e.to_string()),
            }
        })
    }

    fn pending<'a>(
        &'a self,
        child_id: &'a str,
    ) -> LocalBoxFuture<'a, Result<Vec<PendingCall>, String>> {
        Box::pin(async move {
            let Some(loaded) = self
                .runner
                .store()
                .load(child_id)
                .await
                .map_err(|e| e.to_string())?
            else {
                return Ok(Vec::new());
            };
            let mut calls: Vec<PendingCall> = loaded
                .head
                .pending
                .iter()
                .filter(|p| p.kind != PendingKind::Child)
                .cloned()
                .collect();
            let below = self.runner.descendant_calls(&loaded.head).await;
            calls.extend(below.map_err(|e| e.to_string())?);
            Ok(calls)
        })
    }
}

impl LocalChildren {
    /// Children run by `runner`; starts whose message contains `unstartable` fail.
    pub fn new(runner: Rc<R>, unstartable: &'static str) -> Self {
        Self {
            runner,
            unstartable,
            orders: RefCell::new(Vec::new()),
        }
    }
}
