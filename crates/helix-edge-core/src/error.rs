//! Error types of the core, one enum per layer. Each error has a stable snake_case
//! [`code`](Coded::code) used in HTTP bodies and `error` chunks, a [`Category`] and a
//! `retryable` flag. Mapping errors to HTTP statuses is the API layer's job, not this one.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The family an error code belongs to (its code prefix).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    /// The model provider (`provider_*`).
    Provider,
    /// A tool call (`tool_*`).
    Tool,
    /// Session state and its persistence (`state_*`).
    State,
    /// Input that breaks the API's rules (`validation_error` and friends).
    Validation,
    /// The runtime itself (`framework_*`).
    Framework,
}

/// What every error of the crate tells about itself.
pub trait Coded {
    /// Stable snake_case code.
    fn code(&self) -> &'static str;
    /// The family of the code.
    fn category(&self) -> Category;
    /// Whether trying the same thing again later may succeed.
    fn retryable(&self) -> bool;
}

/// An error as it is recorded in a session, a run or an `error` chunk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorInfo {
    /// Stable code.
    pub code: String,
    /// Human sentence, safe to show.
    pub message: String,
    /// Whether retrying may help.
    pub retryable: bool,
}

impl ErrorInfo {
    /// Captures any coded error.
    pub fn of(err: &(impl Coded + fmt::Display)) -> Self {
        Self {
            code: err.code().into(),
            message: err.to_string(),
            retryable: err.retryable(),
        }
    }
}

/// A tool call that did not produce a result. The model sees these as tool errors.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// The model called a tool the agent does not have.
    #[error("Tool '{0}' does not exist")]
    NotFound(String),
    /// The arguments do not match the tool's input schema.
    #[error("Invalid input for tool '{tool}': {reason}")]
    InputInvalid {
        /// The tool.
        tool: String,
        /// What is wrong, for the model to fix.
        reason: String,
    },
    /// The result does not match the tool's declared output schema.
    #[error("Tool '{tool}' returned a result that does not match its output schema: {reason}")]
    OutputInvalid {
        /// The tool.
        tool: String,
        /// What is wrong.
        reason: String,
    },
    /// A server tool ran past its timeout; its signal was raised and it was stopped.
    #[error("Tool execution timed out after {ms} ms")]
    ExecutionTimedOut {
        /// The timeout.
        ms: u64,
    },
    /// The tool ran and failed.
    #[error("{message}")]
    Failed {
        /// What went wrong, as the model sees it.
        message: String,
        /// The error behind it, kept for the caller and the logs.
        #[source]
        source: Option<ErrorSource>,
    },
    /// The user denied the approval.
    #[error("Tool call was not approved by the user")]
    Denied,
    /// A client tool's deadline passed without an answer.
    #[error("Tool call timed out waiting for the client")]
    TimedOut,
    /// The client reported an error instead of a result.
    #[error("{0}")]
    Client(String),
    /// An approved call was claimed by a process that died before committing; it is not
    /// run again, so that it runs at most once.
    #[error("Tool execution was interrupted by a restart and was not retried")]
    Interrupted,
    /// The call was not executed because the run ended first.
    #[error("Tool call was not executed: {0}")]
    Skipped(String),
    /// A loaded skill does not allow the tool.
    #[error("Not run: while skill {skills} is loaded, only these tools may be called: {allowed}")]
    NotAllowed {
        /// The loaded skills that say which tools they allow.
        skills: String,
        /// The tools they allow.
        allowed: String,
    },
    /// The state write the tool attempted is invalid.
    #[error("{0}")]
    State(#[from] StateError),
    /// The step's calls do not form a valid plan; none of them ran.
    #[error("The calls of this step do not form a valid plan, so none of them ran: {0}")]
    PlanInvalid(String),
    /// A call this one depends on (in a plan) was denied or failed, so it did not run.
    #[error("Not run: it uses what call {call} ({tool}) stores, and that call did not succeed")]
    DependencyFailed {
        /// The call depended on.
        call: String,
        /// Its tool.
        tool: String,
    },
    /// The call asks the user something mid-call ([`crate::tool::Wait`]): the run
    /// suspends on it and the call goes on with the answer. Never a result.
    #[error("The call waits on the user")]
    Waiting(Box<crate::tool::Wait>),
    /// The result is too large to keep in the transcript.
    #[error(
        "The tool's result is {bytes} bytes, over the limit of {limit} bytes; ask for less (a narrower query, or \
         one page at a time)"
    )]
    ResultTooLarge {
        /// Its size as JSON.
        bytes: usize,
        /// [`crate::message::MAX_TOOL_RESULT_BYTES`].
        limit: usize,
    },
}

impl ToolError {
    /// A tool failure with `message` for the model.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::Failed {
            message: message.into(),
            source: None,
        }
    }

    /// A tool failure caused by `error`: the model sees its message, the error is kept
    /// as the source.
    pub fn caused_by(error: impl std::error::Error + 'static) -> Self {
        Self::Failed {
            message: error.to_string(),
            source: Some(ErrorSource(std::rc::Rc::new(error))),
        }
    }
}

/// The error behind a [`ToolError::Failed`]: shared, so the tool error stays cheap to
/// clone. Two sources are equal when they say the same.
#[derive(Clone)]
pub struct ErrorSource(std::rc::Rc<dyn std::error::Error>);

impl fmt::Debug for ErrorSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for ErrorSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

impl std::error::Error for ErrorSource {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl PartialEq for ErrorSource {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}

impl Eq for ErrorSource {}

impl Coded for ToolError {
    fn code(&self) -> &'static str {
        match self {
            Self::NotFound(_) => "tool_not_found",
            Self::InputInvalid { .. } => "tool_input_invalid",
            Self::OutputInvalid { .. } => "tool_output_invalid",
            Self::ExecutionTimedOut { .. } => "tool_timeout",
            Self::Failed { .. } => "tool_execution_failed",
            Self::Denied => "tool_denied",
            Self::TimedOut => "tool_timeout",
            Self::Client(_) => "tool_client_error",
            Self::Interrupted => "tool_interrupted",
            Self::Skipped(_) => "tool_skipped",
            Self::NotAllowed { .. } => "tool_not_allowed",
            Self::State(e) => e.code(),
            Self::ResultTooLarge { .. } => "tool_result_too_large",
            Self::PlanInvalid(_) => "tool_plan_invalid",
            Self::DependencyFailed { .. } => "tool_dependency_failed",
            Self::Waiting(_) => "tool_waiting",
        }
    }
    fn category(&self) -> Category {
        match self {
            Self::State(_) => Category::State,
            _ => Category::Tool,
        }
    }
    fn retryable(&self) -> bool {
        matches!(
            self,
            Self::Failed { .. }
                | Self::TimedOut
                | Self::ExecutionTimedOut { .. }
                | Self::Interrupted
        )
    }
}

/// A state write that cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    /// The path is not a valid JSON Pointer or does not lead where the operation needs.
    #[error("Invalid state path '{path}': {reason}")]
    InvalidPath {
        /// The JSON Pointer.
        path: String,
        /// Why it does not apply.
        reason: String,
    },
    /// The state must stay a JSON object.
    #[error("The state must be a JSON object")]
    NotAnObject,
    /// A patch operation did not apply.
    #[error("Patch operation on '{path}' did not apply: {reason}")]
    PatchFailed {
        /// The operation's path.
        path: String,
        /// Why.
        reason: String,
    },
    /// The state does not have the agent's state type.
    #[error("The state does not match its type: {0}")]
    TypeMismatch(String),
}

impl Coded for StateError {
    fn code(&self) -> &'static str {
        match self {
            Self::InvalidPath { .. } => "state_invalid_path",
            Self::NotAnObject => "state_not_an_object",
            Self::PatchFailed { .. } => "state_patch_failed",
            Self::TypeMismatch(_) => "state_type_mismatch",
        }
    }
    fn category(&self) -> Category {
        Category::State
    }
    fn retryable(&self) -> bool {
        false
    }
}

/// A model call that failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// 429 from the provider.
    #[error("The model provider is rate limiting requests")]
    RateLimited {
        /// Milliseconds the provider asked to wait, if it said.
        retry_after_ms: Option<u64>,
    },
    /// 5xx or an overloaded provider.
    #[error("The model provider is unavailable (status {status})")]
    Unavailable {
        /// HTTP status.
        status: u16,
    },
    /// The provider refused the credentials.
    #[error("The model provider rejected the credentials (status {status})")]
    Auth {
        /// HTTP status.
        status: u16,
    },
    /// The provider rejected the request as malformed.
    #[error("The model provider rejected the request: {message}")]
    BadRequest {
        /// The provider's own words, with secrets removed.
        message: String,
    },
    /// No answer in time.
    #[error("The model provider did not answer in time")]
    Timeout,
    /// The connection failed.
    #[error("Could not reach the model provider: {0}")]
    Network(String),
    /// The stream ended without its terminal event.
    #[error("The model stream ended before it was complete")]
    Truncated,
    /// The stream or body could not be decoded.
    #[error("The model sent a malformed response: {0}")]
    Corrupt(String),
    /// The provider reported an error inside the stream.
    #[error("The model provider reported an error: {message}")]
    Stream {
        /// The provider's message.
        message: String,
        /// Whether the provider says it is transient.
        retryable: bool,
    },
    /// No provider is configured the way the agent needs.
    #[error("The model is not configured: {0}")]
    NotConfigured(String),
    /// The answer is larger than a transcript message may be.
    #[error("The model's answer is larger than the limit of {limit} bytes")]
    TooLarge {
        /// [`crate::provider::MAX_OUTPUT_BYTES`].
        limit: usize,
    },
    /// The model refused to answer.
    #[error("The model refused to answer{}", detail(.0))]
    Refused(Option<String>),
    /// The provider filtered the answer.
    #[error("The provider filtered the model's answer")]
    ContentFiltered,
    /// The answer reached the output token limit before it was finished.
    #[error("The model's answer was cut off at its output token limit")]
    MaxTokens,
    /// The model's answer ended with an error stop reason.
    #[error("The model's answer ended with an error")]
    StopError,
    /// The model's answer ended for a reason the provider did not explain.
    #[error("The model's answer ended for an unknown reason")]
    StopUnknown,
    /// A scripted or demo model has nothing more to say.
    #[error("The model has no answer: {0}")]
    Exhausted(String),
    /// A request that ends with the assistant's own message: the model would only
    /// continue (or repeat) its answer. Never sent ([`crate::model::ModelRequest::check`]).
    #[error("The request ends with the assistant's message; there is nothing to answer")]
    NothingToAnswer,
}

impl Coded for ProviderError {
    fn code(&self) -> &'static str {
        match self {
            Self::RateLimited { .. } => "provider_rate_limited",
            Self::Unavailable { .. } => "provider_unavailable",
            Self::Auth { .. } => "provider_auth",
            Self::BadRequest { .. } => "provider_bad_request",
            Self::Timeout => "provider_timeout",
            Self::Network(_) => "provider_network",
            Self::Truncated => "provider_truncated",
            Self::Corrupt(_) => "provider_corrupt_response",
            Self::Stream { .. } => "provider_stream_error",
            Self::NotConfigured(_) => "provider_not_configured",
            Self::Exhausted(_) => "provider_exhausted",
            Self::NothingToAnswer => "provider_nothing_to_answer",
            Self::TooLarge { .. } => "provider_output_too_large",
            Self::Refused(_) => "provider_refused",
            Self::ContentFiltered => "provider_content_filtered",
            Self::MaxTokens => "provider_max_tokens",
            Self::StopError => "provider_stop_error",
            Self::StopUnknown => "provider_stop_unknown",
        }
    }
    fn category(&self) -> Category {
        Category::Provider
    }
    fn retryable(&self) -> bool {
        match self {
            Self::RateLimited { .. }
            | Self::Unavailable { .. }
            | Self::Timeout
            | Self::Network(_)
            | Self::Truncated => true,
            Self::Stream { retryable, .. } => *retryable,
            Self::StopError => true,
            _ => false,
        }
    }
}

/// `: detail` when there is one.
fn detail(detail: &Option<String>) -> String {
    detail.as_ref().map_or(String::new(), |d| format!(": {d}"))
}

/// An agent or tool definition that cannot be used. Raised when the agent is defined.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DefinitionError {
    /// Names are 1–64 characters of `[A-Za-z0-9_-]`.
    #[error("Invalid tool name '{0}': use 1-64 characters of A-Z, a-z, 0-9, _ and -")]
    InvalidToolName(String),
    /// Names the runtime uses itself.
    #[error("Tool name '{0}' is reserved")]
    ReservedToolName(String),
    /// Two tools with one name.
    #[error("Tool '{0}' is defined twice")]
    DuplicateTool(String),
    /// Two agents registered under one name.
    #[error("Agent '{0}' is registered twice")]
    DuplicateAgent(String),
    /// Agents need a name of the same form as tools.
    #[error("Invalid agent name '{0}'")]
    InvalidAgentName(String),
    /// The initial state must be a JSON object.
    #[error("Agent '{0}': the initial state must be a JSON object")]
    StateNotAnObject(String),
    /// Schemas must be JSON objects.
    #[error("'{0}': the schema must be a JSON object")]
    InvalidSchema(String),
    /// A sub-agent's result is its structured output, so it needs an output schema.
    #[error("Sub-agent tool '{0}' runs an agent without an output schema")]
    SubAgentWithoutOutput(String),
    /// An output path the agent's state does not have.
    #[error("Tool '{tool}': output path '{path}' is not a place in the agent's state")]
    UnknownOutputPath {
        /// The tool.
        tool: String,
        /// The path.
        path: String,
    },
    /// A skill that breaks the rules, two skills of one name, or a preloaded skill the
    /// agent does not have.
    #[error("Agent '{agent}': {reason}")]
    InvalidSkill {
        /// The agent.
        agent: String,
        /// What is wrong.
        reason: String,
    },
    /// A saved plan that breaks the rules (see `SavedPlan`).
    #[error("Agent '{agent}': {reason}")]
    InvalidPlan {
        /// The agent.
        agent: String,
        /// What is wrong.
        reason: String,
    },
    /// An MCP server declared with an invalid name or prefix, twice, or with a prefix
    /// the agent's own tools start with.
    #[error("Agent '{agent}': {reason}")]
    InvalidMcpServer {
        /// The agent.
        agent: String,
        /// What is wrong.
        reason: String,
    },
    /// An approval role that cannot be a role claim's (`not_by_owner` without
    /// `approval_by_role` leaves it empty).
    #[error("Tool '{0}': an approval role is 1-256 bytes without whitespace")]
    InvalidApprovalRole(String),
    /// A sub-agent tool in a worker built without helix-edge's `subagents` feature.
    #[error(
        "Sub-agent tool '{0}' needs helix-edge's `subagents` feature, which this worker was built without"
    )]
    SubAgentsNotBuilt(String),
}

impl Coded for DefinitionError {
    fn code(&self) -> &'static str {
        "framework_invalid_definition"
    }
    fn category(&self) -> Category {
        Category::Framework
    }
    fn retryable(&self) -> bool {
        false
    }
}
