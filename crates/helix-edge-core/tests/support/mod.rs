//! A world for runs of the core in its tests: the testing kit's [`Scenario`] over the
//! tests' own agents ([`agents`]), whose tools record their executions, and every check
//! that holds for any run (`assert_consistent`, which replays the stream with an
//! independent RFC 6902 implementation).

#![allow(dead_code, unused_imports)]

pub mod agents;
pub mod children;

pub use agents::*;
pub use helix_edge_core::testing::{
    SESSION, Scenario, TestRunner, block, chunks_of, drive, drive_and_crash, owned,
    run_until_stalled, yield_now,
};

use helix_edge_core::chunk::{ChunkBody, StreamEvent};
use helix_edge_core::runner::{CreateSession, Progress};
use helix_edge_core::state::PatchOp;
use serde_json::Value;
use std::ops::{Deref, DerefMut};

/// Approves (`yes`) or denies the pending call `call` of the test session.
pub fn approve(runner: &TestRunner, call: &str, yes: bool) {
    answer(runner, call, yes, None);
}

/// Approves or denies the pending call `call` of the test session, with `reason`.
pub fn answer(runner: &TestRunner, call: &str, yes: bool, reason: Option<&str>) {
    block(runner.submit(
        SESSION,
        helix_edge_core::runner::Submission::Approval {
            tool_call_id: call.into(),
            approved: yes,
            reason: reason.map(Into::into),
        },
    ))
    .unwrap_or_else(|e| panic!("answering {call}: {e}"));
}

/// A request to create the test session.
pub fn create_request(agent: &str, message: &str) -> CreateSession {
    CreateSession::new(SESSION, agent, message)
}

/// The tests' scenario, with the record of which tools ran.
pub struct World {
    pub scenario: Scenario,
    pub exec: Executions,
}

impl Deref for World {
    type Target = Scenario;
    fn deref(&self) -> &Scenario {
        &self.scenario
    }
}

impl DerefMut for World {
    fn deref_mut(&mut self) -> &mut Scenario {
        &mut self.scenario
    }
}

impl World {
    pub fn new() -> Self {
        let exec = Executions::default();
        let scenario = Scenario::new(world_agents(&exec));
        Self { scenario, exec }
    }
}

/// Drives; each time the drive stalls the clock moves `step_ms` forward (firing the
/// timers it passes), at most `steps` times.
pub fn drive_advancing(world: &World, runner: &TestRunner, step_ms: u64, steps: u32) -> Progress {
    helix_edge_core::testing::drive_advancing(&world.host, runner, step_ms, steps)
}

/// Replays every `state_patch` in the stream that no `stream_resync` disowned (a torn
/// step's live patches) from `initial`.
pub fn replay(events: &[StreamEvent], initial: &Value) -> Value {
    let mut state = initial.clone();
    for body in chunks_of(&owned(events)) {
        if let ChunkBody::StatePatch { patches, .. } = body {
            let patch: json_patch::Patch =
                serde_json::from_value(serde_json::to_value(&patches).unwrap()).unwrap();
            json_patch::patch(&mut state, &patch).unwrap();
        }
    }
    state
}

/// What must hold after any run: the stream's patches replay to the stored state, the
/// stream has no `end`/`fail` before the last terminal one, tool call ids are answered
/// exactly once in the transcript, and messages are contiguous.
pub fn assert_consistent(world: &World, initial: &Value) {
    let session = world.session();
    assert_eq!(
        replay(&world.journal.events(), initial),
        session.state,
        "replayed patches == stored state"
    );
    world.scenario.assert_consistent(initial);
}

pub fn patch_paths(world: &World) -> Vec<String> {
    world
        .chunks()
        .into_iter()
        .flat_map(|c| match c {
            ChunkBody::StatePatch { patches, .. } => patches
                .iter()
                .map(|p| PatchOp::path(p).to_string())
                .collect(),
            _ => Vec::new(),
        })
        .collect()
}

/// The tool messages the model saw in its `n`th call, by call id.
pub fn results_seen(w: &World, n: usize) -> Vec<(String, bool, Value)> {
    w.model.seen()[n]
        .messages
        .iter()
        .filter_map(|m| match m {
            helix_edge_core::message::Message::Tool {
                tool_call_id,
                is_error,
                content,
                ..
            } => Some((tool_call_id.clone(), *is_error, content.clone())),
            _ => None,
        })
        .collect()
}

/// The session as `GET /v1/sessions/{id}` shows it.
pub fn session_view(w: &World) -> Value {
    serde_json::to_value(helix_edge_core::api::SessionView::from(w.session())).unwrap()
}
