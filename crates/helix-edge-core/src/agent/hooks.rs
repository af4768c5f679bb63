//! Hooks: async callbacks around a run's tool calls, messages and suspensions, each
//! told where it fires ([`HookContext`]: the session, the run, the agent, the step and
//! the call) and able to write the state through it. A hook's writes join the step's
//! (or the resumption's) commit like a tool's: applied after what came before them,
//! streamed as `state_patch` once durable, and replayed identically after a crash (a
//! step that did not commit runs again, its hooks with it). A hook that fails, or takes
//! longer than [`HOOK_TIMEOUT`], is logged (`hook_failed`) and its writes are dropped;
//! the commit goes on. `before_tool`'s writes go with its call's (the call does not see
//! them), and like them are dropped if the call fails.
//!
//! The order is canonical: `on_message` for the model's message; `before_tool` as each
//! server call starts (parallel calls run together); then, once every call of the step
//! is done, per call in the model's order (not the order they finished in)
//! `on_state_change` (if it wrote) → `on_message` → `after_tool`; and
//! `on_agent_suspended` when the step suspends, before its commit. A resumed step fires
//! `on_agent_resumed` first, then the same sequence for its approved, denied, answered
//! and timed-out calls.

use crate::chunk::SuspendReason;
use crate::error::StateError;
use crate::message::{Message, ToolCall};
use crate::state::{PatchOp, StateWriter};
use crate::store::PendingCall;
use futures::future::LocalBoxFuture;
use serde_json::Value;
use std::cell::RefCell;
use std::rc::Rc;

/// How long a hook may take: one that takes longer has failed (logged, its writes
/// dropped), so that a hook stuck on the network never holds the session's work.
pub const HOOK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// What a hook returns: done, or why it failed (logged; its writes are dropped).
pub type HookFuture<'a> = LocalBoxFuture<'a, Result<(), Box<dyn std::error::Error>>>;

/// A hook that does nothing.
pub fn done<'a>() -> HookFuture<'a> {
    Box::pin(async { Ok(()) })
}

/// Why a run suspended, and on which calls.
#[derive(Debug, Clone, Copy)]
pub struct Suspension<'a> {
    /// `client_tool` (approvals, client tools, questions asked mid-call) or
    /// `awaiting_children` (sub-agents).
    pub reason: SuspendReason,
    /// The calls it waits on.
    pub calls: &'a [PendingCall],
}

/// Where a hook fires, and the state as it stands there, which the hook may write.
pub struct HookContext {
    /// The session.
    pub session_id: String,
    /// The run (stable through its suspensions).
    pub run_id: String,
    /// The session's agent.
    pub agent: String,
    /// The step (the session's step count, 1-based, of the step the hook is part of).
    pub step: u32,
    /// The tool call the hook is about, if any.
    pub call: Option<ToolCall>,
    state: RefCell<StateWriter>,
}

impl HookContext {
    pub(crate) fn new(place: HookPlace<'_>, call: Option<&ToolCall>, state: Rc<Value>) -> Self {
        Self {
            session_id: place.session_id.into(),
            run_id: place.run_id.into(),
            agent: place.agent.into(),
            step: place.step,
            call: call.cloned(),
            state: RefCell::new(StateWriter::new(state)),
        }
    }

    /// The state with this hook's writes so far.
    pub fn state(&self) -> Value {
        self.state.borrow_mut().current().clone()
    }

    /// Sets the value at `path` (a JSON pointer; its parent must exist).
    pub fn set(&self, path: &str, value: Value) -> Result<(), StateError> {
        self.state.borrow_mut().set(path, value)
    }

    /// Appends `value` to the array at `path`.
    pub fn append(&self, path: &str, value: Value) -> Result<(), StateError> {
        self.state.borrow_mut().append(path, value)
    }

    /// Removes the value at `path`.
    pub fn remove(&self, path: &str) -> Result<(), StateError> {
        self.state.borrow_mut().remove(path)
    }

    /// The writes made, in order.
    pub(crate) fn into_writes(self) -> Vec<PatchOp> {
        self.state.into_inner().into_ops()
    }
}

/// The session, run, agent and step a hook fires in.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HookPlace<'a> {
    pub session_id: &'a str,
    pub run_id: &'a str,
    pub agent: &'a str,
    pub step: u32,
}

/// Callbacks around a run (see the module docs for their order). All have empty
/// defaults; each returns a future (`Box::pin(async move { … })`).
pub trait Hooks {
    /// Before a server tool executes (`ctx.call`).
    fn before_tool<'a>(&'a self, _ctx: &'a HookContext) -> HookFuture<'a> {
        done()
    }
    /// After a tool call (`ctx.call`) wrote the state, with its writes.
    fn on_state_change<'a>(
        &'a self,
        _ctx: &'a HookContext,
        _writes: &'a [PatchOp],
    ) -> HookFuture<'a> {
        done()
    }
    /// For each message the run adds to the transcript (`ctx.call` is a result's call).
    fn on_message<'a>(&'a self, _ctx: &'a HookContext, _message: &'a Message) -> HookFuture<'a> {
        done()
    }
    /// After a tool call's (`ctx.call`) result is known.
    fn after_tool<'a>(&'a self, _ctx: &'a HookContext, _result: &'a Message) -> HookFuture<'a> {
        done()
    }
    /// When the run suspends at a human-in-the-loop boundary: why, and on which calls.
    fn on_agent_suspended<'a>(
        &'a self,
        _ctx: &'a HookContext,
        _suspension: Suspension<'a>,
    ) -> HookFuture<'a> {
        done()
    }
    /// When a suspended run resumes.
    fn on_agent_resumed<'a>(&'a self, _ctx: &'a HookContext) -> HookFuture<'a> {
        done()
    }
}

/// One hook to fire.
#[derive(Clone, Copy)]
pub(crate) enum Hook<'a> {
    BeforeTool,
    StateChange(&'a [PatchOp]),
    Message(&'a Message),
    AfterTool(&'a Message),
    Suspended(Suspension<'a>),
    Resumed,
}

impl<'a> Hook<'a> {
    /// Its name, as logs give it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Hook::BeforeTool => "before_tool",
            Hook::StateChange(_) => "on_state_change",
            Hook::Message(_) => "on_message",
            Hook::AfterTool(_) => "after_tool",
            Hook::Suspended(_) => "on_agent_suspended",
            Hook::Resumed => "on_agent_resumed",
        }
    }

    /// Calls it on `hooks`.
    pub(crate) fn call(self, hooks: &'a dyn Hooks, ctx: &'a HookContext) -> HookFuture<'a> {
        match self {
            Hook::BeforeTool => hooks.before_tool(ctx),
            Hook::StateChange(writes) => hooks.on_state_change(ctx, writes),
            Hook::Message(message) => hooks.on_message(ctx, message),
            Hook::AfterTool(result) => hooks.after_tool(ctx, result),
            Hook::Suspended(suspension) => hooks.on_agent_suspended(ctx, suspension),
            Hook::Resumed => hooks.on_agent_resumed(ctx),
        }
    }
}
