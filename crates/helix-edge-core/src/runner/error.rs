//! Why a runner operation was refused or failed, coded for the API's error body.

use crate::error::{Category, Coded, ProviderError};
use crate::store::StoreError;

/// Why an operation was refused or failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RunError {
    /// Storage failed or the session does not exist.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No agent of that name.
    #[error("Agent '{0}' does not exist")]
    AgentNotFound(String),
    /// The agent is offered but needs configuration this deployment lacks.
    #[error("Agent '{agent}' is not configured on this deployment: set {needs}")]
    AgentNotConfigured {
        /// The agent.
        agent: String,
        /// What to set.
        needs: String,
    },
    /// A run is active or calls are pending.
    #[error("The session is busy: {0}")]
    Busy(&'static str),
    /// The session was aborted; nothing more can happen in it.
    #[error("The session was aborted")]
    Aborted,
    /// The session's status does not allow the operation.
    #[error("A {0} session cannot be resumed")]
    NotResumable(&'static str),
    /// No pending call with that id.
    #[error("Tool call '{0}' is not pending")]
    ToolCallNotFound(String),
    /// The call was already answered; the first answer stands.
    #[error("Tool call '{0}' was already resolved")]
    AlreadyResolved(String),
    /// An approval for a client tool, or a result for an approval.
    #[error("Tool call '{call}' expects {expected}")]
    KindMismatch {
        /// The call.
        call: String,
        /// What it expects.
        expected: &'static str,
    },
    /// The call's answer is not the asker's to give (an approval that needs a role).
    #[error("Tool call '{call}' is answered only by {who}")]
    NotAnswerer {
        /// The call.
        call: String,
        /// Who may answer it.
        who: String,
    },
    /// No checkpoint with that id.
    #[error("Checkpoint '{0}' does not exist")]
    CheckpointNotFound(String),
    /// The checkpoint has unanswered calls in its transcript.
    #[error("Checkpoint '{0}' was taken while calls were pending and cannot be restored")]
    CheckpointNotRestorable(String),
    /// The run ended at the checkpoint: a retry from it without a message would only
    /// ask the model to answer its own final answer.
    #[error(
        "The run ended at checkpoint '{0}': there is nothing to continue. Retry with a message, or from an earlier checkpoint"
    )]
    RunEnded(String),
    /// The request is malformed in a way the API layer could not see.
    #[error("{0}")]
    Invalid(String),
    /// A client tool's result does not match the tool's output schema.
    #[error("{0}")]
    ResultInvalid(String),
    /// The model could not be set up for the agent.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// A remote sub-agent's deployment could not be reached to pass an answer on.
    #[error("The remote sub-agent's deployment could not be reached: {0}")]
    RemoteUnavailable(String),
    /// A sub-agent's session goes only with its parent's; the id is the root's.
    #[error("This is a sub-agent's session: it is deleted with its root session '{0}'")]
    SubAgentSession(String),
}

impl Coded for RunError {
    fn code(&self) -> &'static str {
        match self {
            Self::Store(e) => e.code(),
            Self::AgentNotFound(_) => "agent_not_found",
            Self::AgentNotConfigured { .. } => "agent_not_configured",
            Self::Busy(_) => "session_busy",
            Self::Aborted => "session_aborted",
            Self::NotResumable(_) => "session_not_resumable",
            Self::ToolCallNotFound(_) => "tool_call_not_found",
            Self::AlreadyResolved(_) => "tool_call_already_resolved",
            Self::KindMismatch { .. } => "kind_mismatch",
            Self::NotAnswerer { .. } => "forbidden",
            Self::CheckpointNotFound(_) => "checkpoint_not_found",
            Self::CheckpointNotRestorable(_) => "checkpoint_not_restorable",
            Self::RunEnded(_) => "checkpoint_run_ended",
            Self::Invalid(_) => "validation_error",
            Self::ResultInvalid(_) => "tool_output_invalid",
            Self::Provider(e) => e.code(),
            Self::SubAgentSession(_) => "session_is_subagent",
            Self::RemoteUnavailable(_) => "subagent_remote_unavailable",
        }
    }
    fn category(&self) -> Category {
        match self {
            Self::Store(e) => e.category(),
            Self::Provider(_) => Category::Provider,
            _ => Category::Validation,
        }
    }
    fn retryable(&self) -> bool {
        match self {
            Self::Store(e) => e.retryable(),
            Self::Provider(e) => e.retryable(),
            Self::Busy(_) => true,
            Self::RemoteUnavailable(_) => true,
            _ => false,
        }
    }
}
