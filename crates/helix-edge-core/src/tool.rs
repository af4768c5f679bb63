//! Tools: what an agent can call. A tool has a name, a description, an input JSON Schema
//! and one way of running: on the server (an async function over typed input), on the
//! client (the client submits the result, optionally before a deadline), or — for
//! `finish_with` tools — on the server after the step's other tools, possibly ending the
//! run. Server tools may require approval: never, always, or when a predicate over the
//! input and state says so (failing closed).
//!
//! Typed input is the expected way: `#[derive(Deserialize, JsonSchema)]` on a struct;
//! the schema the model sees is derived from it, and arguments that do not deserialize
//! become a `tool_input_invalid` error the model can act on — never a crash.

use crate::error::{StateError, ToolError};
use futures::future::LocalBoxFuture;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::rc::Rc;

use crate::state::{PatchOp, StateWriter};

/// The future a tool's execute function returns.
pub type ToolFuture = LocalBoxFuture<'static, Result<Value, ToolError>>;
type ExecuteFn = Rc<dyn Fn(Value, ToolContext) -> ToolFuture>;
type ApprovalFn = Rc<dyn Fn(&Value, &Value) -> Result<bool, String>>;

/// Names the runtime keeps for itself.
pub const RESERVED_TOOL_NAMES: &[&str] = &["__finish__"];

/// When a call needs a human's approval before it runs.
#[derive(Clone, Default)]
pub enum Approval {
    /// Runs without asking.
    #[default]
    Never,
    /// Always asks.
    Always,
    /// Asks when the predicate over `(arguments, state)` says so. An error (or a panic,
    /// where panics can be caught) counts as "ask": approval fails closed.
    When(ApprovalFn),
}

/// How the tool is executed.
#[derive(Clone)]
pub(crate) enum Execution {
    /// By the worker.
    Server(ExecuteFn),
    /// By the client, which submits the result.
    Client {
        /// How long the client has to answer, in milliseconds.
        deadline_ms: Option<u64>,
    },
    /// As a child session running another agent.
    SubAgent {
        /// The child's agent (it has an output schema).
        agent: Rc<crate::agent::Agent>,
        /// How long the child may take before it is aborted, in milliseconds.
        timeout_ms: u64,
    },
}

/// How long a sub-agent may run before it is aborted (10 minutes).
pub const DEFAULT_SUBAGENT_TIMEOUT_MS: u64 = 600_000;

/// A tool an agent can call. Built with [`Tool::new`], [`Tool::raw`] or [`Tool::client`].
#[derive(Clone)]
pub struct Tool {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) input_schema: Value,
    pub(crate) approval: Approval,
    pub(crate) execution: Option<Execution>,
    pub(crate) finish_with: bool,
}

impl std::fmt::Debug for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// The JSON Schema of `I`, as the model sees it.
pub fn schema_of<I: JsonSchema>() -> Value {
    let mut schema = schemars::schema_for!(I).to_value();
    if let Some(obj) = schema.as_object_mut() {
        // Providers want a bare object schema; the meta-schema URI and title are noise.
        obj.remove("$schema");
        obj.remove("title");
    }
    schema
}

impl Tool {
    /// A server tool with typed input `I`; its schema is derived from `I`.
    pub fn new<I, O, F, Fut>(
        name: impl Into<String>,
        description: impl Into<String>,
        execute: F,
    ) -> Self
    where
        I: DeserializeOwned + JsonSchema + 'static,
        O: Serialize + 'static,
        F: Fn(I, ToolContext) -> Fut + 'static,
        Fut: Future<Output = Result<O, ToolError>> + 'static,
    {
        let name = name.into();
        let tool_name = name.clone();
        let execute = Rc::new(execute);
        let run: ExecuteFn = Rc::new(move |args: Value, ctx: ToolContext| {
            let input = serde_json::from_value::<I>(args).map_err(|e| ToolError::InputInvalid {
                tool: tool_name.clone(),
                reason: e.to_string(),
            });
            let execute = execute.clone();
            Box::pin(async move {
                let output = execute(input?, ctx).await?;
                serde_json::to_value(output).map_err(|e| ToolError::Failed(e.to_string()))
            })
        });
        Self::with_execution(
            name,
            description,
            schema_of::<I>(),
            Some(Execution::Server(run)),
        )
    }

    /// A server tool over raw JSON arguments, validated against `input_schema` first.
    pub fn raw<F, Fut>(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
        execute: F,
    ) -> Self
    where
        F: Fn(Value, ToolContext) -> Fut + 'static,
        Fut: Future<Output = Result<Value, ToolError>> + 'static,
    {
        let name = name.into();
        let tool_name = name.clone();
        let schema = input_schema.clone();
        let execute = Rc::new(execute);
        let run: ExecuteFn = Rc::new(move |args: Value, ctx: ToolContext| {
            let checked =
                crate::schema::validate(&schema, &args).map_err(|reason| ToolError::InputInvalid {
                    tool: tool_name.clone(),
                    reason,
                });
            let execute = execute.clone();
            Box::pin(async move {
                checked?;
                execute(args, ctx).await
            })
        });
        Self::with_execution(
            name,
            description,
            input_schema,
            Some(Execution::Server(run)),
        )
    }

    /// A client-executed tool with typed input `I` (used for its schema).
    pub fn client<I: JsonSchema>(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self::client_raw(name, description, schema_of::<I>())
    }

    /// A client-executed tool with an explicit input schema.
    pub fn client_raw(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
    ) -> Self {
        Self::with_execution(
            name,
            description,
            input_schema,
            Some(Execution::Client { deadline_ms: None }),
        )
    }

    /// A sub-agent tool: each call runs `agent` as a child session of its own, with the
    /// call's arguments (typed input `I`, JSON text) as the child's first message; the
    /// child's output is the call's result. `agent` must have an output schema (checked
    /// when the parent agent is built). The description defaults to the agent's.
    pub fn subagent<I: JsonSchema>(name: impl Into<String>, agent: crate::agent::Agent) -> Self {
        let description = agent.description().to_string();
        Self::with_execution(
            name,
            description,
            schema_of::<I>(),
            Some(Execution::SubAgent {
                agent: Rc::new(agent),
                timeout_ms: DEFAULT_SUBAGENT_TIMEOUT_MS,
            }),
        )
    }

    /// Replaces the description the model sees.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// For sub-agent tools: abort the child and fail the call after `ms` milliseconds.
    pub fn timeout_ms(mut self, ms: u64) -> Self {
        if let Some(Execution::SubAgent { timeout_ms, .. }) = &mut self.execution {
            *timeout_ms = ms;
        }
        self
    }

    fn with_execution(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
        execution: Option<Execution>,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            input_schema,
            approval: Approval::Never,
            execution,
            finish_with: false,
        }
    }

    /// Every call needs approval.
    pub fn approval_always(mut self) -> Self {
        self.approval = Approval::Always;
        self
    }

    /// A call needs approval when `predicate(input, state)` is true. Arguments that do
    /// not deserialize into `I` need approval too (fail closed).
    pub fn approval_when<I, F>(mut self, predicate: F) -> Self
    where
        I: DeserializeOwned + 'static,
        F: Fn(&I, &Value) -> bool + 'static,
    {
        self.approval = Approval::When(Rc::new(move |args: &Value, state: &Value| {
            let input = I::deserialize(args).map_err(|e| e.to_string())?;
            Ok(predicate(&input, state))
        }));
        self
    }

    /// For client tools: the client must answer within `ms` milliseconds, or the call
    /// resolves as a "timed out" tool error.
    pub fn deadline_ms(mut self, ms: u64) -> Self {
        if let Some(Execution::Client { deadline_ms }) = &mut self.execution {
            *deadline_ms = Some(ms);
        }
        self
    }

    /// Runs after the step's other tools, seeing their writes; if it succeeds, its
    /// result becomes the run's output and the run completes.
    pub fn finish_with(mut self) -> Self {
        self.finish_with = true;
        self
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tool's description.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The input JSON Schema the model sees.
    pub fn input_schema(&self) -> &Value {
        &self.input_schema
    }

    /// Whether the client executes it.
    pub fn is_client(&self) -> bool {
        matches!(self.execution, Some(Execution::Client { .. }))
    }

    /// The client deadline, if any.
    pub fn client_deadline_ms(&self) -> Option<u64> {
        match self.execution {
            Some(Execution::Client { deadline_ms }) => deadline_ms,
            _ => None,
        }
    }

    /// For sub-agent tools: the child's agent and its timeout in milliseconds.
    pub fn subagent_of(&self) -> Option<(&Rc<crate::agent::Agent>, u64)> {
        match &self.execution {
            Some(Execution::SubAgent { agent, timeout_ms }) => Some((agent, *timeout_ms)),
            _ => None,
        }
    }

    /// The approval policy.
    pub fn approval(&self) -> &Approval {
        &self.approval
    }

    /// Whether a call with `args` needs approval in `state`. Fails closed.
    pub fn needs_approval(&self, args: &Value, state: &Value) -> bool {
        match &self.approval {
            Approval::Never => false,
            Approval::Always => true,
            Approval::When(predicate) => {
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    predicate(args, state)
                }));
                !matches!(outcome, Ok(Ok(false)))
            }
        }
    }

    /// Runs the tool (server tools only).
    pub(crate) fn execute(&self, args: Value, ctx: ToolContext) -> ToolFuture {
        match &self.execution {
            Some(Execution::Server(run)) => run(args, ctx),
            _ => {
                let name = self.name.clone();
                Box::pin(
                    async move { Err(ToolError::Failed(format!("'{name}' is not a server tool"))) },
                )
            }
        }
    }

    /// Whether the tool has something to run or is client-executed.
    pub(crate) fn has_execution(&self) -> bool {
        self.execution.is_some()
    }
}

/// Whether `name` is a valid tool or agent name: 1–64 of `[A-Za-z0-9_-]`.
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A cooperative cancellation flag a tool can poll.
#[derive(Debug, Clone, Default)]
pub struct AbortSignal(Rc<Cell<bool>>);

impl AbortSignal {
    /// A signal that is not raised.
    pub fn new() -> Self {
        Self::default()
    }

    /// Raises the signal.
    pub fn abort(&self) {
        self.0.set(true);
    }

    /// Whether it was raised.
    pub fn is_aborted(&self) -> bool {
        self.0.get()
    }
}

/// Sends a `custom` chunk: `(event_name, data)`.
pub(crate) type EmitFn = Rc<dyn Fn(String, Value)>;

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
    state: RefCell<StateWriter>,
    emit: EmitFn,
    abort: AbortSignal,
}

impl ToolContext {
    /// A context over the committed state `base`.
    pub(crate) fn new(
        session_id: &str,
        tool_call_id: &str,
        now_ms: u64,
        base: Rc<Value>,
        emit: EmitFn,
        abort: AbortSignal,
    ) -> Self {
        Self {
            inner: Rc::new(ContextInner {
                session_id: session_id.into(),
                tool_call_id: tool_call_id.into(),
                now_ms,
                state: RefCell::new(StateWriter::new(base)),
                emit,
                abort,
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

    /// Appends to the array at `pointer`.
    pub fn append(&self, pointer: &str, value: Value) -> Result<(), StateError> {
        self.writer()?.append(pointer, value)
    }

    /// Sets the value at `pointer` (replace or add).
    pub fn set(&self, pointer: &str, value: Value) -> Result<(), StateError> {
        self.writer()?.set(pointer, value)
    }

    /// Removes the value at `pointer`.
    pub fn remove(&self, pointer: &str) -> Result<(), StateError> {
        self.writer()?.remove(pointer)
    }

    /// Applies an arbitrary mutation; its patches are derived by diffing.
    pub fn update(&self, f: impl FnOnce(&mut Value)) -> Result<(), StateError> {
        self.writer()?.update(f)
    }

    /// Emits a `custom` chunk on the session's stream.
    pub fn emit(&self, event_name: impl Into<String>, data: Value) {
        (self.inner.emit)(event_name.into(), data)
    }

    /// Whether the run was interrupted or aborted while the tool runs.
    pub fn is_aborted(&self) -> bool {
        self.inner.abort.is_aborted()
    }

    /// The writes made through this context, in order.
    pub(crate) fn take_writes(&self) -> Vec<PatchOp> {
        self.writer()
            .map(|mut w| std::mem::take(&mut *w).into_ops())
            .unwrap_or_default()
    }
}
