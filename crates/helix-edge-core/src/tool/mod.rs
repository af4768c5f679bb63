//! Tools: what an agent can call. A tool has a name, a description, an input JSON Schema
//! and one way of running: on the server (an async function over typed input), on the
//! client (the client submits the result, optionally before a deadline), as a sub-agent
//! (a child session; with the feature `remote-subagents`, one on another deployment),
//! or — for `finish_with` tools — on the server after the step's
//! other tools, possibly ending the run. Server tools may require approval: never,
//! always, or when a predicate over the input and state says so (failing closed).
//!
//! Each way has its own builder ([`ServerTool`], [`ApprovalTool`], [`FinishTool`],
//! [`ClientTool`], [`ChildTool`]; a sub-agent's `SubAgentTool` is the agent module's), so an
//! option that does not apply cannot be set:
//! a client tool has no approval, a sub-agent no deadline, an approved tool no
//! `finish_with`. Every builder converts into a [`Tool`].
//!
//! Typed input is the expected way: `#[derive(Deserialize, JsonSchema)]` on a struct;
//! the schema the model sees is derived from it, and arguments that do not deserialize
//! become a `tool_input_invalid` error the model can act on — never a crash.

mod builders;
mod child;
pub mod companion;
mod context;
mod output_path;
#[cfg(feature = "remote-subagents")]
mod remote;
#[cfg(feature = "plans")]
mod stored;
pub(crate) mod wait;

pub use crate::abort::AbortSignal;
pub use builders::{ApprovalTool, ClientTool, FinishTool, ServerTool};
pub use child::{ChildCall, ChildTool, DEFAULT_TOKEN_VAR, DEFAULT_URL_VAR, RemoteAgent};
pub use context::{MAX_TOOL_ATTACHMENT_BYTES, ToolContext};
pub use output_path::{OUTPUT_PATH, OutputPath};
pub use wait::{Wait, check_answer, query_param};

use crate::error::ToolError;
use futures::future::LocalBoxFuture;
use schemars::JsonSchema;
use serde_json::Value;
use std::rc::Rc;
use std::time::Duration;

/// The future a tool's execute function returns.
pub type ToolFuture = LocalBoxFuture<'static, Result<Value, ToolError>>;
type ExecuteFn = Rc<dyn Fn(Value, ToolContext) -> ToolFuture>;
type ApprovalFn = Rc<dyn Fn(&Value, &Value) -> Result<bool, String>>;

/// Names the runtime keeps for itself.
pub const RESERVED_TOOL_NAMES: &[&str] = &["__finish__", "load_skill", "read_skill_file"];

/// How long a sub-agent may run before it is aborted (10 minutes).
pub const DEFAULT_SUBAGENT_TIMEOUT: Duration = Duration::from_secs(600);

/// When a call needs a human's approval before it runs.
#[derive(Clone, Default)]
pub enum Approval {
    /// Runs without asking.
    #[default]
    Never,
    /// Always asks.
    Always,
    /// Asks when the predicate over `(arguments, state)` says so. An error counts as
    /// "ask": approval fails closed.
    When(ApprovalFn),
}

/// What an approval predicate returns: a `bool`, or a `Result<bool, E>` whose error
/// means "ask" (approval fails closed). A predicate must not panic: a panic in wasm
/// aborts the worker instance (there is no unwinding); return an error instead.
pub trait ApprovalDecision {
    /// `Ok(true)` to ask, `Ok(false)` to run without asking, `Err(reason)` to ask.
    fn decide(self) -> Result<bool, String>;
}

impl ApprovalDecision for bool {
    fn decide(self) -> Result<bool, String> {
        Ok(self)
    }
}

impl<E: std::fmt::Display> ApprovalDecision for Result<bool, E> {
    fn decide(self) -> Result<bool, String> {
        self.map_err(|e| e.to_string())
    }
}

/// How the tool is executed.
#[derive(Clone)]
pub(crate) enum Execution {
    /// By the worker.
    Server(ExecuteFn),
    /// By the client, which submits the result.
    Client {
        /// How long the client has to answer.
        deadline: Option<Duration>,
    },
    /// By another session ([`ChildCall`]).
    Child(ChildCall),
}

/// A tool an agent can call, built with [`Tool::new`], [`Tool::raw`], [`Tool::client`],
/// [`Tool::client_raw`], `Tool::subagent` (in [`crate::agent`]) or `Tool::remote_subagent`.
#[derive(Clone)]
pub struct Tool {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) input_schema: Value,
    /// What a result must match, when declared.
    pub(crate) output_schema: Option<Value>,
    /// Constrained decoding of the arguments, where the provider supports it.
    pub(crate) strict: bool,
    pub(crate) approval: Approval,
    /// Who may approve, when a role is required (default: whoever reaches the session).
    pub(crate) approvers: Option<crate::store::Approvers>,
    /// How long a call waits for its approval before it is denied (default: forever).
    pub(crate) approval_deadline: Option<Duration>,
    pub(crate) execution: Execution,
    pub(crate) finish_with: bool,
    /// How long a server call may run (default: the agent's `tool_timeout`).
    pub(crate) timeout: Option<Duration>,
    /// Whether and where its results are stored in the state.
    pub(crate) output_path: OutputPath,
    /// Whether state references in its arguments are resolved (default: yes).
    pub(crate) state_refs: bool,
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
    fn with_execution(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
        execution: Execution,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            input_schema,
            output_schema: None,
            strict: false,
            approval: Approval::Never,
            approvers: None,
            approval_deadline: None,
            execution,
            finish_with: false,
            timeout: None,
            output_path: OutputPath::Off,
            state_refs: true,
        }
    }

    /// The schema its results must match, if declared.
    pub fn output_schema(&self) -> Option<&Value> {
        self.output_schema.as_ref()
    }

    /// A result that breaks the declared output schema, as the error the model sees.
    pub(crate) fn check_output(&self, result: &Value) -> Result<(), ToolError> {
        match &self.output_schema {
            Some(schema) => {
                crate::schema::validate(schema, result).map_err(|reason| ToolError::OutputInvalid {
                    tool: self.name.clone(),
                    reason,
                })
            }
            None => Ok(()),
        }
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
        matches!(self.execution, Execution::Client { .. })
    }

    /// How long a server call may run, if the tool sets it (otherwise the agent's
    /// `tool_timeout` applies).
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// How long a call waits for its approval before it is denied, if it is bounded.
    pub fn approval_deadline(&self) -> Option<Duration> {
        self.approval_deadline
    }

    /// The client deadline, if any.
    pub fn client_deadline(&self) -> Option<Duration> {
        match self.execution {
            Execution::Client { deadline } => deadline,
            _ => None,
        }
    }

    /// For sub-agent tools: the name of the child's agent and its timeout.
    pub fn subagent_of(&self) -> Option<(&str, Duration)> {
        match self.child_call()? {
            ChildCall::SubAgent { agent, timeout } => Some((agent, *timeout)),
            _ => None,
        }
    }

    /// For remote sub-agent tools: the remote agent.
    pub fn remote_of(&self) -> Option<&Rc<RemoteAgent>> {
        match self.child_call()? {
            ChildCall::Remote { remote, .. } => Some(remote),
            _ => None,
        }
    }

    /// For tools whose calls run a child session (a sub-agent, here or remote): the
    /// name of the child's agent.
    pub(crate) fn child_agent(&self) -> Option<&str> {
        match self.child_call()? {
            ChildCall::SubAgent { agent, .. } => Some(agent),
            ChildCall::Remote { remote, .. } => Some(remote.agent()),
            ChildCall::Companion(_) => None,
        }
    }

    /// For tools whose calls another session answers: how long a call may wait (a
    /// child's timeout; a companion call waits at most [`DEFAULT_SUBAGENT_TIMEOUT`]).
    pub(crate) fn child_deadline(&self) -> Option<Duration> {
        match self.child_call()? {
            ChildCall::SubAgent { timeout, .. } | ChildCall::Remote { timeout, .. } => {
                Some(*timeout)
            }
            ChildCall::Companion(_) => Some(DEFAULT_SUBAGENT_TIMEOUT),
        }
    }

    /// For companion tools: what it does.
    pub fn companion_op(&self) -> Option<companion::CompanionOp> {
        match self.child_call()? {
            ChildCall::Companion(op) => Some(*op),
            _ => None,
        }
    }

    /// Whether it runs after the step's other tools and, when it succeeds, ends the run
    /// with its result as the output.
    pub fn is_finish_with(&self) -> bool {
        self.finish_with
    }

    /// Whether and where its results are stored in the state (`_outputPath`).
    pub fn output_path(&self) -> &OutputPath {
        &self.output_path
    }

    /// Whether state references in its arguments are resolved before it runs.
    pub fn takes_state_refs(&self) -> bool {
        self.state_refs
    }

    /// The approval policy.
    pub fn approval(&self) -> &Approval {
        &self.approval
    }

    /// Who may approve its calls, when a role is required.
    pub fn approvers(&self) -> Option<&crate::store::Approvers> {
        self.approvers.as_ref()
    }

    /// Whether a call with `args` needs approval in `state`. Fails closed.
    pub fn needs_approval(&self, args: &Value, state: &Value) -> bool {
        match &self.approval {
            Approval::Never => false,
            Approval::Always => true,
            Approval::When(predicate) => !matches!(predicate(args, state), Ok(false)),
        }
    }

    /// Runs the tool (server tools only).
    pub(crate) fn execute(&self, args: Value, ctx: ToolContext) -> ToolFuture {
        match &self.execution {
            Execution::Server(run) => run(args, ctx),
            _ => {
                let name = self.name.clone();
                let message = format!("'{name}' is not a server tool");
                Box::pin(async move { Err(ToolError::failed(message)) })
            }
        }
    }
}

/// Whether `name` is a valid tool or agent name: 1–64 of `[A-Za-z0-9_-]`.
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}
