//! The error every route answers with, and the mapping of every error to a status.

use crate::auth::AuthError;
use crate::error::Coded;
use crate::runner::RunError;
use crate::store::StoreError;
use serde::Serialize;

/// An error as every route answers it: `{"error": {"code", "message", "retryable"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApiError {
    /// HTTP status to answer with; not part of the body.
    #[serde(skip)]
    pub status: u16,
    /// Stable snake_case code that clients match on.
    pub code: &'static str,
    /// A human sentence, safe to show: never secrets or internal detail.
    pub message: String,
    /// Whether the same request may succeed if sent again later.
    pub retryable: bool,
    /// For 405: the methods the path allows (the `Allow` header); not part of the body.
    #[serde(skip)]
    pub allow: Option<String>,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    error: &'a ApiError,
}

impl ApiError {
    /// An error with every field given.
    pub fn new(
        status: u16,
        code: &'static str,
        message: impl Into<String>,
        retryable: bool,
    ) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            retryable,
            allow: None,
        }
    }

    /// An error that a client must fix before retrying.
    pub fn client(status: u16, code: &'static str, message: impl Into<String>) -> Self {
        Self::new(status, code, message, false)
    }

    /// A 400 `validation_error`: the request breaks a rule of the API.
    pub fn validation(message: impl Into<String>) -> Self {
        Self::client(400, "validation_error", message)
    }

    /// The queryable record could not be read on these shards (D1 bindings): the
    /// answer would be short, so there is none.
    pub fn storage_unavailable(shards: &[String]) -> Self {
        let message = format!(
            "The record could not be read on {}; try again later, or ask with partial=true for what the other databases hold.",
            shards.join(", ")
        );
        Self::new(503, "storage_unavailable", message, true)
    }

    /// No route matches the path.
    pub fn route_not_found(path: &str) -> Self {
        Self::client(404, "not_found", format!("No route for {path}."))
    }

    /// The route of `operation` exists in the API but this worker was built without the
    /// feature that serves it (404, naming the feature).
    pub fn not_served(operation: super::Operation) -> Self {
        let feature = operation.feature().unwrap_or("a");
        let message = format!(
            "This worker does not serve this route: it was built without helix-edge's `{feature}` feature."
        );
        Self::client(404, "not_found", message)
    }

    /// The route exists but not for this method; `allow` lists the methods it has.
    pub fn method_not_allowed(method: &str, path: &str, allow: String) -> Self {
        let message = format!("{method} is not allowed on {path}; use {allow}.");
        Self {
            allow: Some(allow),
            ..Self::client(405, "method_not_allowed", message)
        }
    }

    /// The JSON body of this error.
    pub fn body(&self) -> String {
        // Serialising a struct of strings and a bool cannot fail; the fallback keeps the
        // request path free of panics all the same.
        serde_json::to_string(&ErrorBody { error: self }).unwrap_or_else(|_| {
            r#"{"error":{"code":"framework_error","message":"error","retryable":true}}"#.into()
        })
    }
}

impl From<AuthError> for ApiError {
    fn from(e: AuthError) -> Self {
        match e {
            AuthError::NotConfigured => Self::new(
                503,
                "auth_not_configured",
                "Authentication is not configured: set API_TOKEN (or ALLOW_UNAUTHENTICATED for local demos).",
                false,
            ),
            AuthError::Unauthorized => Self::client(
                401,
                "unauthorized",
                "Missing, invalid or expired credentials.",
            ),
            AuthError::Forbidden => Self::client(
                403,
                "forbidden",
                "These credentials do not grant access here.",
            ),
        }
    }
}

impl From<RunError> for ApiError {
    fn from(e: RunError) -> Self {
        let status = match &e {
            RunError::Store(StoreError::Exists(_)) => 409,
            RunError::Store(StoreError::NotFound(_)) => 404,
            RunError::Store(StoreError::Stale { .. }) => 409,
            RunError::Store(
                StoreError::Backend(_)
                | StoreError::SchemaOutdated { .. }
                | StoreError::Backlog { .. },
            ) => 503,
            RunError::Store(StoreError::Corrupt(_)) => 500,
            RunError::Store(StoreError::TooLarge { .. }) => 413,
            RunError::AgentNotFound(_)
            | RunError::ToolCallNotFound(_)
            | RunError::CheckpointNotFound(_) => 404,
            RunError::Busy(_)
            | RunError::Aborted
            | RunError::NotResumable(_)
            | RunError::AlreadyResolved(_)
            | RunError::CheckpointNotRestorable(_)
            | RunError::RunEnded(_)
            | RunError::SubAgentSession(_) => 409,
            RunError::KindMismatch { .. } | RunError::Invalid(_) | RunError::ResultInvalid(_) => {
                400
            }
            RunError::NotAnswerer { .. } => 403,
            RunError::Provider(_) => 502,
            RunError::RemoteUnavailable(_) | RunError::AgentNotConfigured { .. } => 503,
        };
        // Internal detail stays in the logs; clients get the safe sentence.
        let message = match &e {
            RunError::Store(StoreError::Backend(_)) => {
                "Storage is unavailable; try again.".to_string()
            }
            RunError::Store(StoreError::Corrupt(_)) => "Stored data could not be read.".to_string(),
            other => other.to_string(),
        };
        Self::new(status, e.code(), message, e.retryable())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_body_has_the_spec_shape_and_no_status() {
        let body = ApiError::route_not_found("/nope").body();
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"error": {
                "code": "not_found",
                "message": "No route for /nope.",
                "retryable": false
            }})
        );
    }

    #[test]
    fn run_errors_map_to_the_documented_statuses_and_never_500_for_client_input() {
        let cases = [
            (
                RunError::Store(StoreError::Exists("s".into())),
                409,
                "session_exists",
            ),
            (
                RunError::Store(StoreError::NotFound("s".into())),
                404,
                "session_not_found",
            ),
            (RunError::AgentNotFound("x".into()), 404, "agent_not_found"),
            (
                RunError::AgentNotConfigured {
                    agent: "x".into(),
                    needs: "X_URL".into(),
                },
                503,
                "agent_not_configured",
            ),
            (
                RunError::ToolCallNotFound("c".into()),
                404,
                "tool_call_not_found",
            ),
            (
                RunError::AlreadyResolved("c".into()),
                409,
                "tool_call_already_resolved",
            ),
            (
                RunError::KindMismatch {
                    call: "c".into(),
                    expected: "x",
                },
                400,
                "kind_mismatch",
            ),
            (RunError::Busy("x"), 409, "session_busy"),
        ];
        for (err, status, code) in cases {
            let api = ApiError::from(err);
            assert_eq!((api.status, api.code), (status, code));
        }
        let backend = ApiError::from(RunError::Store(StoreError::Backend(
            "D1_ERROR: secret detail".into(),
        )));
        assert_eq!((backend.status, backend.retryable), (503, true));
        assert!(
            !backend.message.contains("secret"),
            "internal detail stays in the logs"
        );
    }
}
