//! The runtime-independent parts of the HTTP API (SPEC §2): the route table, request
//! bodies and their validation, response bodies, the JSON error body and the mapping of
//! every error to a status. The platform layer only moves bytes. It must not touch
//! `worker::`.

mod bodies;
mod document;
mod error;
#[cfg(feature = "inbox")]
mod inbox;
mod input;
mod list;
mod plan;
mod routes;
mod streamed;
mod url;
#[cfg(feature = "usage")]
mod usage;
mod views;

pub use crate::store::{PendingView, pending_calls};
pub use bodies::{
    CreateSessionBody, ForkBody, MessageBody, ReasonBody, RetryBody, ToolResultBody,
    ValidatePlanBody, parse_body,
};
pub use document::document;
pub use error::ApiError;
#[cfg(feature = "inbox")]
pub use inbox::{InboxCursor, InboxItem, InboxPage, InboxQuery};
pub use input::{
    Input, InputObject, MAX_INPUT_MESSAGES, NOT_BLANK, RichInput, UserInput, check_history,
    is_blank,
};
pub use list::{
    Cursor, DEFAULT_LIMIT, ListQuery, MAX_LIMIT, SessionList, SessionSummary, page_size,
    take_partial,
};
pub use plan::{Plan, Target, plan};
pub use routes::{Operation, ROUTES, Route, RouteSpec, route};
pub use streamed::{answer_headers, wants_stream};
pub use url::{
    MessagesQuery, StreamQuery, form_pairs, origin, page, path_and_query, percent_decode,
    query_pairs,
};
#[cfg(feature = "usage")]
pub use usage::{GroupBy, MAX_GROUPS, UsageGroup, UsageQuery, UsageReport};
pub use views::{
    AgentsView, CheckpointAt, CheckpointView, CreatedView, MessagePage, ResumeReason, RunView,
    SessionView,
};

/// The OpenAPI 3.1 document of the v1 API (`api/openapi.json`, minified when built),
/// served at `GET /v1/openapi.json` with the hosted agents filled in ([`document`]). `tests/openapi.rs` keeps it in line with
/// [`ROUTES`] and the body types here; the end-to-end fuzzer checks the running worker
/// against it.
pub const OPENAPI: &str = include_str!(concat!(env!("OUT_DIR"), "/openapi.min.json"));

/// Body of `GET /healthz`.
pub const HEALTHZ_BODY: &str = r#"{"ok":true}"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn healthz_body_is_ok_true() {
        let v: serde_json::Value = serde_json::from_str(HEALTHZ_BODY).unwrap();
        assert_eq!(v, serde_json::json!({"ok": true}));
    }

    #[test]
    fn the_embedded_document_is_the_source_without_its_whitespace() {
        let source: serde_json::Value =
            serde_json::from_str(include_str!("../../api/openapi.json")).unwrap();
        let embedded: serde_json::Value = serde_json::from_str(OPENAPI).unwrap();
        assert_eq!(source, embedded);
        assert!(!OPENAPI.contains('\n'));
    }
}
