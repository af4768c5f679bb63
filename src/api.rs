//! The runtime-independent parts of the HTTP API (SPEC §2): the JSON error body and the
//! fixed bodies of simple routes. Mapping errors to statuses happens here too, so that
//! the platform layer only moves bytes. It must not touch `worker::`.

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
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    error: &'a ApiError,
}

impl ApiError {
    /// An error that a client must fix before retrying.
    pub fn client(status: u16, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            retryable: false,
        }
    }

    /// No route matches the path.
    pub fn route_not_found(path: &str) -> Self {
        Self::client(404, "not_found", format!("No route for {path}."))
    }

    /// The route exists but not for this method.
    pub fn method_not_allowed(method: &str, path: &str) -> Self {
        Self::client(
            405,
            "method_not_allowed",
            format!("{method} is not allowed on {path}."),
        )
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

/// Body of `GET /healthz`.
pub const HEALTHZ_BODY: &str = r#"{"ok":true}"#;

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
    fn healthz_body_is_ok_true() {
        let v: serde_json::Value = serde_json::from_str(HEALTHZ_BODY).unwrap();
        assert_eq!(v, serde_json::json!({"ok": true}));
    }
}
