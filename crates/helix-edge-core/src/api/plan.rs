//! What the worker does with a request, decided from its method and path — and, for a
//! chat, its body — before anything is sent on ([`plan`]): which session the credential
//! must reach, whether the body is read, and who answers. The worker only carries it
//! out.
//!
//! The order is part of the contract (SPEC §2, fail-closed): `GET /healthz` needs no
//! credentials; a bad session id is 400 at once; any other unknown path or method is
//! answered only after the credentials are checked (a caller without them learns
//! nothing about what exists); a chat names its session in its body, so its body is
//! read before the credentials are checked against that session.

use super::{ApiError, Operation, route};

/// Who answers a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The worker itself (`GET /v1/agents`, `GET /v1/openapi.json`, `GET /v1/sessions`).
    Worker,
    /// The worker parses and validates the body, then the new session's object creates
    /// it (`POST /v1/sessions`).
    Create,
    /// The object of the session the request names.
    Object,
}

/// A request's plan.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan<'a> {
    /// `GET /healthz`: answered at once, without credentials.
    Healthz,
    /// Refused once the credentials are checked (with no session to reach): an unknown
    /// path or method.
    Refuse(ApiError),
    /// An operation.
    Serve {
        /// What it asks for.
        operation: Operation,
        /// The session it is about (from the path; a chat's comes from its body).
        session: Option<&'a str>,
        /// Whether its body is read (and passed on).
        body: bool,
        /// Who answers it.
        target: Target,
    },
}

impl Operation {
    /// Whether the request carries a body the operation reads.
    pub fn reads_body(self) -> bool {
        matches!(
            self,
            Self::CreateSession
                | Self::SendMessage
                | Self::SubmitToolResult
                | Self::Interrupt
                | Self::Resume
                | Self::Abort
                | Self::Retry
                | Self::Fork
                | Self::ValidatePlan
                | Self::CreateSchedule
                | Self::Chat
                | Self::Decide
        )
    }

    /// Whether it may answer with the run's stream instead of its JSON (SPEC §2d, "one
    /// request fewer"): the operations that start or continue a run, asked with
    /// `Accept: text/event-stream` (see [`super::wants_stream`]).
    pub fn may_stream(self) -> bool {
        matches!(
            self,
            Self::CreateSession
                | Self::SendMessage
                | Self::SubmitToolResult
                | Self::Resume
                | Self::Retry
        )
    }

    /// Whether a worker serves it only with a feature (see [`Self::feature`]).
    pub fn is_optional(self) -> bool {
        self.feature().is_some()
    }

    /// The helix-edge cargo feature a worker serves it with, if it is optional.
    pub fn feature(self) -> Option<&'static str> {
        Some(match self {
            Self::Chat | Self::ChatStream => "chat",
            Self::OpenApi => "openapi",
            Self::ListRuns
            | Self::ListCheckpoints
            | Self::GetCheckpoint
            | Self::Retry
            | Self::Fork => "time-travel",
            Self::ValidatePlan => "plans",
            Self::ListSpans => "otel",
            Self::CreateSchedule
            | Self::ListSchedules
            | Self::DeleteSchedule
            | Self::ListAllSchedules => "schedules",
            Self::Inbox => "inbox",
            Self::Usage => "usage",
            Self::OidcProvider | Self::OidcToken => "users",
            Self::McpCallback | Self::McpAuthorize => "mcp",
            Self::ListNotifications | Self::DecisionPage | Self::Decide => "notify",
            _ => return None,
        })
    }

    /// Who answers it.
    pub fn target(self) -> Target {
        match self {
            Self::Healthz
            | Self::OpenApi
            | Self::ListAgents
            | Self::ListSessions
            | Self::ListAllSchedules
            | Self::Inbox
            | Self::Usage
            | Self::OidcProvider
            | Self::OidcToken
            | Self::McpCallback
            | Self::DecisionPage
            | Self::Decide => Target::Worker,
            Self::CreateSession => Target::Create,
            _ => Target::Object,
        }
    }
}

/// The plan for `method` and `path` (without the query); `Err` is refused before the
/// credentials are checked (a malformed session id).
pub fn plan<'a>(method: &str, path: &'a str) -> Result<Plan<'a>, ApiError> {
    match route(method, path) {
        Ok(route) if route.operation == Operation::Healthz => Ok(Plan::Healthz),
        Ok(route) => Ok(Plan::Serve {
            operation: route.operation,
            session: route.session,
            body: route.operation.reads_body(),
            target: route.operation.target(),
        }),
        // Fail closed: a caller without credentials learns nothing about other paths.
        Err(e) if e.status != 400 && path != "/healthz" => Ok(Plan::Refuse(e)),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served(method: &str, path: &str) -> (Operation, Option<String>, bool, Target) {
        match plan(method, path) {
            Ok(Plan::Serve {
                operation,
                session,
                body,
                target,
            }) => (operation, session.map(str::to_string), body, target),
            other => panic!("{method} {path}: {other:?}"),
        }
    }

    #[test]
    fn healthz_needs_no_credentials_and_its_other_methods_are_refused_before_them() {
        assert_eq!(plan("GET", "/healthz"), Ok(Plan::Healthz));
        let wrong = plan("POST", "/healthz").unwrap_err();
        assert_eq!((wrong.status, wrong.code), (405, "method_not_allowed"));
    }

    #[test]
    fn unknown_paths_and_methods_are_refused_only_after_the_credentials() {
        for (method, path, status) in [
            ("GET", "/nope", 404),
            ("GET", "/v1/sessions/s/nope", 404),
            ("PUT", "/v1/sessions/s/messages", 405),
        ] {
            match plan(method, path) {
                Ok(Plan::Refuse(e)) => assert_eq!(e.status, status, "{method} {path}"),
                other => panic!("{method} {path}: {other:?}"),
            }
        }
        let bad = plan("GET", "/v1/sessions/bad%20id").unwrap_err();
        assert_eq!((bad.status, bad.code), (400, "invalid_session_id"));
    }

    #[test]
    fn session_routes_go_to_their_object_and_read_a_body_only_when_they_take_one() {
        assert_eq!(
            served("GET", "/v1/sessions/s1"),
            (
                Operation::GetSession,
                Some("s1".into()),
                false,
                Target::Object
            )
        );
        assert_eq!(
            served("POST", "/v1/sessions/s1/tool-results"),
            (
                Operation::SubmitToolResult,
                Some("s1".into()),
                true,
                Target::Object
            )
        );
        for op in ["messages", "interrupt", "resume", "abort", "retry", "fork"] {
            let (_, _, body, target) = served("POST", &format!("/v1/sessions/s1/{op}"));
            assert!(body && target == Target::Object, "{op}");
        }
        for op in ["messages", "stream", "runs", "checkpoints"] {
            let (_, _, body, _) = served("GET", &format!("/v1/sessions/s1/{op}"));
            assert!(!body, "{op}");
        }
        assert_eq!(
            served("DELETE", "/v1/sessions/s1"),
            (
                Operation::DeleteSession,
                Some("s1".into()),
                false,
                Target::Object
            )
        );
    }

    #[test]
    fn features_serve_the_optional_operations_and_a_worker_without_one_names_it() {
        let optional = [
            ("POST", "/v1/chat", "`chat`"),
            ("GET", "/v1/chat/c1/stream", "`chat`"),
            ("GET", "/v1/openapi.json", "`openapi`"),
            ("GET", "/v1/sessions/s1/runs", "`time-travel`"),
            ("GET", "/v1/sessions/s1/checkpoints", "`time-travel`"),
            ("POST", "/v1/sessions/s1/retry", "`time-travel`"),
            ("POST", "/v1/sessions/s1/fork", "`time-travel`"),
            ("POST", "/v1/sessions/s1/plans/validate", "`plans`"),
            ("POST", "/v1/sessions/s1/schedules", "`schedules`"),
            ("GET", "/v1/sessions/s1/schedules", "`schedules`"),
            ("DELETE", "/v1/sessions/s1/schedules/sc1", "`schedules`"),
            ("GET", "/v1/auth/oidc", "`users`"),
            ("POST", "/v1/auth/oidc/token", "`users`"),
        ];
        for (method, path, feature) in optional {
            let operation = served(method, path).0;
            assert!(operation.is_optional(), "{method} {path}");
            let refused = ApiError::not_served(operation);
            assert_eq!((refused.status, refused.code), (404, "not_found"));
            assert!(refused.message.contains(feature), "{}", refused.message);
        }
        for (method, path) in [
            ("GET", "/v1/sessions/s1"),
            ("GET", "/v1/sessions/s1/messages"),
            ("POST", "/v1/sessions/s1/resume"),
            ("DELETE", "/v1/sessions/s1"),
        ] {
            assert!(!served(method, path).0.is_optional(), "{method} {path}");
        }
    }

    #[test]
    fn the_worker_answers_its_own_routes_and_parses_a_create() {
        assert_eq!(served("GET", "/v1/agents").3, Target::Worker);
        assert_eq!(served("GET", "/v1/sessions").3, Target::Worker);
        assert_eq!(served("GET", "/v1/openapi.json").3, Target::Worker);
        assert_eq!(
            served("POST", "/v1/sessions"),
            (Operation::CreateSession, None, true, Target::Create)
        );
    }

    #[test]
    fn a_chat_names_its_session_in_its_body() {
        assert_eq!(
            served("POST", "/v1/chat"),
            (Operation::Chat, None, true, Target::Object)
        );
        assert_eq!(
            served("GET", "/v1/chat/c1/stream"),
            (
                Operation::ChatStream,
                Some("c1".into()),
                false,
                Target::Object
            )
        );
    }

    #[test]
    fn only_what_starts_or_continues_a_run_answers_with_its_stream() {
        let streams = [
            ("POST", "/v1/sessions"),
            ("POST", "/v1/sessions/s/messages"),
            ("POST", "/v1/sessions/s/tool-results"),
            ("POST", "/v1/sessions/s/resume"),
            ("POST", "/v1/sessions/s/retry"),
        ];
        for (method, path) in streams {
            assert!(
                route(method, path).unwrap().operation.may_stream(),
                "{path}"
            );
        }
        for (method, path) in [
            ("POST", "/v1/sessions/s/interrupt"),
            ("POST", "/v1/sessions/s/abort"),
            ("POST", "/v1/sessions/s/fork"),
            ("GET", "/v1/sessions/s"),
        ] {
            assert!(
                !route(method, path).unwrap().operation.may_stream(),
                "{path}"
            );
        }
    }
}
