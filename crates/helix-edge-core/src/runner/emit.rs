//! Stamps chunks with their common head (session, agent, run, step, time) and sends
//! them to the journal, live or staged; keeps what the step's live patches have shown
//! ([`Shown`]).

use super::shown::Shown;
use crate::agent::HookPlace;
use crate::chunk::{Chunk, ChunkBody, StreamEvent};
use crate::host::Host;
use crate::journal::StreamLog;
use crate::state::PatchOp;
use crate::store::SessionHead;
use serde_json::Value;
use std::cell::RefCell;
use std::rc::Rc;

/// A chunk factory for one session, run and step.
#[derive(Clone)]
pub(crate) struct Emitter {
    journal: Rc<dyn StreamLog>,
    host: Rc<dyn Host>,
    session_id: String,
    agent_type: String,
    run_id: String,
    step: Option<u32>,
    shown: Rc<RefCell<Shown>>,
}

impl Emitter {
    pub fn new(
        journal: Rc<dyn StreamLog>,
        host: Rc<dyn Host>,
        head: &SessionHead,
        step: Option<u32>,
    ) -> Self {
        Self {
            journal,
            host,
            session_id: head.id.clone(),
            agent_type: head.agent.clone(),
            run_id: head.run.run_id.clone(),
            step,
            shown: Rc::default(),
        }
    }

    /// A stream event for `body` (to stage).
    pub fn event(&self, body: ChunkBody) -> StreamEvent {
        StreamEvent::Chunk(Chunk {
            session_id: self.session_id.clone(),
            agent_type: self.agent_type.clone(),
            run_id: self.run_id.clone(),
            step: self.step,
            timestamp: self.host.now_ms(),
            body,
        })
    }

    /// A stream event for `body` naming another agent (`subagent_*` name the child's).
    pub fn event_as(&self, agent_type: &str, body: ChunkBody) -> StreamEvent {
        let mut event = self.event(body);
        if let StreamEvent::Chunk(chunk) = &mut event {
            chunk.agent_type = agent_type.to_string();
        }
        event
    }

    /// Emits `body` live as [`event_as`](Self::event_as) builds it.
    pub fn chunk_as(&self, agent_type: &str, body: ChunkBody) -> u64 {
        self.journal.emit(self.event_as(agent_type, body))
    }

    /// The session the chunks belong to.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The run the chunks belong to.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Where the chunks belong: what a hook fired here is told.
    pub fn place(&self) -> HookPlace<'_> {
        HookPlace {
            session_id: &self.session_id,
            run_id: &self.run_id,
            agent: &self.agent_type,
            step: self.step.unwrap_or(0),
        }
    }

    /// Emits `body` live; returns its sequence number.
    pub fn chunk(&self, body: ChunkBody) -> u64 {
        self.journal.emit(self.event(body))
    }

    /// Streams call `tool_call_id`'s write (made on `base`) live, if it applies to what
    /// the step has shown; `checked` when the call's own writer made it.
    pub fn live_patch(
        &self,
        tool_call_id: &str,
        base: &Value,
        patches: Vec<PatchOp>,
        checked: bool,
    ) {
        let (merged, write) = self
            .shown
            .borrow_mut()
            .show(base, tool_call_id, patches, checked);
        for (patches, tool_call_id) in [
            (merged, None),
            (write.unwrap_or_default(), Some(tool_call_id)),
        ] {
            if !patches.is_empty() {
                self.chunk(ChunkBody::StatePatch {
                    patches,
                    tool_call_id: tool_call_id.map(String::from),
                });
            }
        }
    }

    /// Before a phase's writes (one list per call) merge into `state`.
    pub fn merging(&self, state: &Value, writes: &[Vec<PatchOp>]) {
        self.shown.borrow_mut().merging(state, writes);
    }

    /// Writes merged into the step's state, as they applied.
    pub fn merged(&self, applied: &[PatchOp]) {
        self.shown.borrow_mut().merged(applied);
    }

    /// The patch the step's commit streams: what turns the shown state into
    /// `committed`, reached by `ops` from the step's start ([`Shown::committed`]).
    pub fn committed_patch(&self, ops: &[PatchOp], committed: &Value) -> Vec<PatchOp> {
        self.shown.take().committed(ops, committed)
    }
}
