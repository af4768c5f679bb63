//! Stamps chunks with their common head (session, agent, run, step, time) and sends
//! them to the journal, live or staged.

use crate::chunk::{Chunk, ChunkBody, StreamEvent};
use crate::host::Host;
use crate::journal::StreamLog;
use crate::store::SessionHead;
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

    /// Emits `body` live; returns its sequence number.
    pub fn chunk(&self, body: ChunkBody) -> u64 {
        self.journal.emit(self.event(body))
    }
}
