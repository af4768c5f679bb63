//! Where the user comes back from an MCP server's authorization: the worker's public
//! `GET /v1/mcp/callback?code=…&state=…` (or `?error=…&state=…`). The state names the
//! session (`{session}.{random}`); its object answers every pending `authorization`
//! call sent with that state — once: a state that no pending call carries (unknown,
//! forged, used) is not found (404) and nothing changes. The state is the credential: the
//! route takes no other.

use crate::api::ApiError;
use crate::runner::Submission;
use crate::store::{PendingCall, PendingKind};
use crate::tool::query_param;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The session object's internal route the worker passes a callback to.
pub const CALLBACK_PATH: &str = "/__internal/mcp-callback";

/// A callback's query, as the worker passes it on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Callback {
    /// The state the user was sent with.
    pub state: String,
    /// The authorization code, when the user connected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// The authorization server's error, when they did not (`access_denied`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Callback {
    /// The callback of query `pairs`: a state, and a code or an error.
    pub fn parse(pairs: &[(String, String)]) -> Result<Self, ApiError> {
        let get = |name: &str| {
            let found = pairs.iter().find(|(k, _)| k == name);
            found.map(|(_, v)| v.clone()).filter(|v| !v.is_empty())
        };
        let callback = Self {
            state: get("state").ok_or_else(|| ApiError::validation("state is missing."))?,
            code: get("code"),
            error: get("error"),
        };
        match callback.session_id() {
            None => Err(ApiError::validation(
                "state is not one this deployment sends.",
            )),
            Some(_) => Ok(callback),
        }
    }

    /// The session its state names (`{session}.{random}`, the random part URL-safe).
    pub fn session_id(&self) -> Option<&str> {
        let (session, random) = self.state.rsplit_once('.')?;
        let url_safe = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
        let random = !random.is_empty() && random.len() <= 256 && random.bytes().all(url_safe);
        (random && crate::auth::valid_session_id(session)).then_some(session)
    }

    /// Its answers to the `pending` calls: one to each authorization sent with its
    /// state (compared in constant time), none when no call carries it. With a code
    /// the user connected; `access_denied` declines; anything else (another error, or
    /// neither) cancels.
    pub fn submissions(&self, pending: &[PendingCall]) -> Vec<Submission> {
        let answer = match (&self.code, self.error.as_deref()) {
            (Some(code), _) => json!({ "action": "accept", "code": code, "state": self.state }),
            (None, Some("access_denied")) => json!({ "action": "decline" }),
            (None, _) => json!({ "action": "cancel" }),
        };
        let sent_with_it = |p: &&PendingCall| {
            let url = p.request.as_ref().and_then(|r| r["authorizeUrl"].as_str());
            let state = url.and_then(|url| query_param(url, "state"));
            let same = |s: &str| crate::auth::constant_time_eq(s.as_bytes(), self.state.as_bytes());
            p.kind == PendingKind::Authorization && state.is_some_and(same)
        };
        pending
            .iter()
            .filter(sent_with_it)
            .map(|p| Submission::Input {
                tool_call_id: p.tool_call_id.clone(),
                kind: PendingKind::Authorization,
                answer: answer.clone(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn waiting(id: &str, state: &str) -> PendingCall {
        PendingCall {
            tool_call_id: id.into(),
            tool_name: "files__connect".into(),
            arguments: json!({}),
            kind: PendingKind::Authorization,
            deadline: None,
            since: 1,
            output_path: None,
            approvers: None,
            request: Some(
                json!({ "authorizeUrl": format!("https://as/authorize?a=1&state={state}") }),
            ),
        }
    }

    #[test]
    fn a_callback_answers_the_calls_sent_with_its_state_and_no_other() {
        let callback = Callback::parse(&pairs(&[("code", "c0de"), ("state", "s_1.k3y")])).unwrap();
        assert_eq!(callback.session_id(), Some("s_1"));
        let pending = [
            waiting("a", "s_1.k3y"),
            waiting("b", "s_1.other"),
            waiting("c", "s_1.k3y"),
        ];
        let answered: Vec<String> = callback
            .submissions(&pending)
            .iter()
            .map(|s| s.call_id().to_string())
            .collect();
        assert_eq!(answered, ["a", "c"]);
        let denied =
            Callback::parse(&pairs(&[("error", "access_denied"), ("state", "s_1.k3y")])).unwrap();
        match &denied.submissions(&pending)[0] {
            Submission::Input { answer, .. } => assert_eq!(answer, &json!({"action": "decline"})),
            other => panic!("{other:?}"),
        }
        let neither = Callback::parse(&pairs(&[("state", "s_1.k3y")])).unwrap();
        match &neither.submissions(&pending)[0] {
            Submission::Input { answer, .. } => assert_eq!(answer, &json!({"action": "cancel"})),
            other => panic!("{other:?}"),
        }
        for bad in [
            pairs(&[("code", "c")]),
            pairs(&[("code", "c"), ("state", "nodot")]),
            pairs(&[("code", "c"), ("state", "bad/id.k")]),
            pairs(&[("code", "c"), ("state", "s_1.")]),
            pairs(&[("code", "c"), ("state", "s_1.a.b/c")]),
        ] {
            assert!(Callback::parse(&bad).is_err(), "{bad:?}");
        }
        let stranger = Callback::parse(&pairs(&[("code", "c"), ("state", "s_1.forged")])).unwrap();
        assert!(stranger.submissions(&pending).is_empty());
    }
}
