//! What a running tool sees: the session's state (read, and written as RFC 6902
//! operations, each write streamed as it is made), its ids and the step's time, a way
//! to emit custom stream events, files to give the model with its result, the run's
//! abort signal, the session's vault, and the user's answer to what it asked mid-call.

use crate::abort::AbortSignal;
use crate::attachment::{Attachment, MAX_ATTACHMENTS};
use crate::error::{StateError, ToolError};
use crate::journal::Vault;
use crate::state::{PatchOp, StateWriter, apply_change};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::cell::RefCell;
use std::rc::Rc;

/// Sends a `custom` chunk: `(event_name, data)`.
pub(crate) type EmitFn = Rc<dyn Fn(String, Value)>;

/// Streams a write as it is made: `(base, operations)`, `base` the state the call's
/// view started from.
pub(crate) type ShowFn = Rc<dyn Fn(&Value, Vec<PatchOp>)>;

/// What a running tool can see and do: read and update the session state, emit custom
/// events, check for abort. Cheap to clone; never holds a borrow across an await.
#[derive(Clone)]
pub struct ToolContext {
    inner: Rc<ContextInner>,
}

struct ContextInner {
    session_id: String,
    tool_call_id: String,
    now_ms: u64,
    base: Rc<Value>,
    state: RefCell<StateWriter>,
    emit: EmitFn,
    show: ShowFn,
    abort: AbortSignal,
    attachments: RefCell<Vec<Attachment>>,
    /// The most bytes one inline attachment holds (decoded), and the call's in all
    /// (base64): raised where large attachments are kept in a store.
    attachment_limits: std::cell::Cell<(usize, usize)>,
    /// The user's answer to what the call asked mid-call, when it runs again with it.
    answer: Option<Value>,
    vault: Vault,
}

/// The base64 text a call's attachments hold at most, together: with its result (at
/// most [`MAX_TOOL_RESULT_BYTES`](crate::message::MAX_TOOL_RESULT_BYTES)) a tool
/// message stays one D1 row. Larger files go by `url`.
pub const MAX_TOOL_ATTACHMENT_BYTES: usize = 1024 * 1024;

impl ToolContext {
    /// A context over the committed state `base`.
    pub(crate) fn new(
        session_id: &str,
        tool_call_id: &str,
        now_ms: u64,
        base: Rc<Value>,
        (emit, show): (EmitFn, ShowFn),
        abort: AbortSignal,
        (answer, vault): (Option<Value>, Vault),
    ) -> Self {
        Self {
            inner: Rc::new(ContextInner {
                session_id: session_id.into(),
                tool_call_id: tool_call_id.into(),
                now_ms,
                state: RefCell::new(StateWriter::new(base.clone())),
                base,
                emit,
                show,
                abort,
                attachments: RefCell::new(Vec::new()),
                attachment_limits: std::cell::Cell::new((
                    crate::attachment::MAX_ATTACHMENT_BYTES,
                    MAX_TOOL_ATTACHMENT_BYTES,
                )),
                answer,
                vault,
            }),
        }
    }

    /// The session the call belongs to.
    pub fn session_id(&self) -> &str {
        &self.inner.session_id
    }

    /// The call's id.
    pub fn tool_call_id(&self) -> &str {
        &self.inner.tool_call_id
    }

    /// The user's answer to what this call asked mid-call ([`Wait`](super::Wait)), when
    /// it runs again with it: for an elicitation `{"action", "content"?}`, for an
    /// authorization `{"action", "code"?, "state"?}`. `None` on a call's first run.
    pub fn answer(&self) -> Option<&Value> {
        self.inner.answer.as_ref()
    }

    /// The session's vault: what its tools keep privately and durably (credentials, a
    /// waiting call's place), never in the record, the stream or the transcript.
    pub fn vault(&self) -> &Vault {
        &self.inner.vault
    }

    /// The time the step started, in milliseconds since the Unix epoch.
    pub fn now_ms(&self) -> u64 {
        self.inner.now_ms
    }

    fn writer(&self) -> Result<std::cell::RefMut<'_, StateWriter>, StateError> {
        // Only reachable by calling the context from inside an `update` closure.
        self.inner
            .state
            .try_borrow_mut()
            .map_err(|_| StateError::PatchFailed {
                path: String::new(),
                reason: "the state is already being updated".into(),
            })
    }

    /// A copy of the state as this call sees it (pre-step state plus its own writes).
    pub fn state(&self) -> Value {
        self.writer()
            .map(|mut w| w.current().clone())
            .unwrap_or(Value::Null)
    }

    /// Reads the state without copying it. `None` only if called from inside `update`.
    pub fn read<R>(&self, f: impl FnOnce(&Value) -> R) -> Option<R> {
        let mut writer = self.writer().ok()?;
        Some(f(writer.current()))
    }

    /// A copy of the value at `pointer`, if present.
    pub fn get(&self, pointer: &str) -> Option<Value> {
        self.writer().ok()?.current().pointer(pointer).cloned()
    }

    /// Makes a write and streams its operations (a `state_patch` with this call's id).
    fn write(
        &self,
        f: impl FnOnce(&mut StateWriter) -> Result<(), StateError>,
    ) -> Result<(), StateError> {
        let ops = {
            let mut writer = self.writer()?;
            let from = writer.ops().len();
            f(&mut writer)?;
            writer.ops()[from..].to_vec()
        };
        if !ops.is_empty() {
            (self.inner.show)(&self.inner.base, ops);
        }
        Ok(())
    }

    /// Appends to the array at `pointer`.
    pub fn append(&self, pointer: &str, value: Value) -> Result<(), StateError> {
        self.write(|w| w.append(pointer, value))
    }

    /// Sets the value at `pointer` (replace or add).
    pub fn set(&self, pointer: &str, value: Value) -> Result<(), StateError> {
        self.write(|w| w.set(pointer, value))
    }

    /// Removes the value at `pointer`.
    pub fn remove(&self, pointer: &str) -> Result<(), StateError> {
        self.write(|w| w.remove(pointer))
    }

    /// Applies an arbitrary mutation; its patches are derived by diffing.
    pub fn update(&self, f: impl FnOnce(&mut Value)) -> Result<(), StateError> {
        self.write(|w| w.update(f))
    }

    /// The state as the agent's state type `S` (this call's view of it).
    pub fn state_as<S: DeserializeOwned>(&self) -> Result<S, StateError> {
        S::deserialize(self.writer()?.current())
            .map_err(|e| StateError::TypeMismatch(e.to_string()))
    }

    /// Updates the state through its type: reads it as `S`, lets `f` change it, and
    /// records the change as patch operations (keys `S` does not know are kept).
    pub fn update_as<S: Serialize + DeserializeOwned>(
        &self,
        f: impl FnOnce(&mut S),
    ) -> Result<(), StateError> {
        let mut typed: S = self.state_as()?;
        let as_json =
            |s: &S| serde_json::to_value(s).map_err(|e| StateError::TypeMismatch(e.to_string()));
        let before = as_json(&typed)?;
        f(&mut typed);
        let after = as_json(&typed)?;
        self.update(|state| apply_change(state, &before, &after))
    }

    /// Emits a `custom` chunk on the session's stream.
    pub fn emit(&self, event_name: impl Into<String>, data: Value) {
        (self.inner.emit)(event_name.into(), data)
    }

    /// Whether the call should stop: its timeout passed, or the run was interrupted or
    /// aborted while it runs.
    pub fn is_aborted(&self) -> bool {
        self.inner.abort.is_aborted()
    }

    /// The call's abort signal (for work that must notice it while it waits).
    #[allow(dead_code, reason = "read by MCP tools (feature `mcp`)")]
    pub(crate) fn signal(&self) -> &AbortSignal {
        &self.inner.abort
    }

    /// Gives the model a file with this call's result — an image the tool rendered, a
    /// document it fetched — inline (`data`, base64) or by `url`. The tool message
    /// keeps it in the transcript and each provider gets it in its own form. Checked
    /// here: a valid attachment, at most [`MAX_ATTACHMENTS`] per call, and at most
    /// [`MAX_TOOL_ATTACHMENT_BYTES`] of inline data in all (a failed call keeps none) —
    /// or, for an agent that keeps large attachments in a store (feature
    /// `attachment-store`), that module's larger limits.
    pub fn attach(&self, attachment: Attachment) -> Result<(), ToolError> {
        let refuse = |why: String| Err(ToolError::failed(format!("attachment refused: {why}")));
        let (each, all) = self.inner.attachment_limits.get();
        if let Err(why) = attachment.validate_up_to(each) {
            return refuse(why);
        }
        let mut attachments = self.inner.attachments.borrow_mut();
        if attachments.len() >= MAX_ATTACHMENTS {
            return refuse(format!(
                "a call gives at most {MAX_ATTACHMENTS} attachments"
            ));
        }
        let inline = |a: &Attachment| a.data.as_ref().map_or(0, String::len);
        let total: usize = attachments.iter().map(inline).sum::<usize>() + inline(&attachment);
        if total > all {
            return refuse(format!(
                "a call's inline attachments hold at most {all} bytes of base64 in all; pass a url instead"
            ));
        }
        attachments.push(attachment);
        Ok(())
    }

    /// Lets [`attach`](Self::attach) take inline attachments of up to `each` bytes
    /// (decoded), `all` bytes of base64 in all: where they are kept in a store.
    #[allow(
        dead_code,
        reason = "called where large attachments are kept in a store (feature `attachment-store`)"
    )]
    pub(crate) fn raise_attachment_limits(&self, each: usize, all: usize) {
        self.inner.attachment_limits.set((each, all));
    }

    /// Gives back attachments taken with [`take_attachments`](Self::take_attachments).
    #[allow(
        dead_code,
        reason = "called where large attachments are kept in a store (feature `attachment-store`)"
    )]
    pub(crate) fn restore_attachments(&self, attachments: Vec<Attachment>) {
        *self.inner.attachments.borrow_mut() = attachments;
    }

    /// The files given with the result ([`attach`](Self::attach)).
    pub(crate) fn take_attachments(&self) -> Vec<Attachment> {
        std::mem::take(&mut *self.inner.attachments.borrow_mut())
    }

    /// The writes made through this context, in order.
    pub(crate) fn take_writes(&self) -> Vec<PatchOp> {
        self.writer()
            .map(|mut w| std::mem::take(&mut *w).into_ops())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::AbortSignal;

    #[test]
    fn a_calls_signal_is_raised_with_its_runs_but_not_the_other_way() {
        let run = AbortSignal::new();
        let (a, b) = (run.child(), run.child());
        a.abort();
        assert!(a.is_aborted());
        assert!(
            !run.is_aborted() && !b.is_aborted(),
            "a timeout is one call's"
        );
        run.abort();
        assert!(b.is_aborted(), "an abort reaches every call");
    }
}
