//! How an MCP server's authorization starts and where the user comes back from it.
//!
//! - **The start**: a pending `authorization` call's `authorizeUrl` is the worker's
//!   `GET /v1/sessions/{id}/authorize?state=…`, a session route: it takes the session's
//!   credentials (a bearer token or `?token=`, as a stream does), so only whoever may
//!   answer the call opens it. It answers with a redirect to the authorization server
//!   and a cookie for this flow ([`Binding`]): random, `HttpOnly`, `SameSite=Lax`,
//!   scoped to the callback, ten minutes.
//! - **The callback**: the worker's public `GET /v1/mcp/callback?code=…&state=…` (or
//!   `?error=…&state=…`). The state names the session (`{session}.{random}`); the flow's
//!   cookie must come with it — an authorization finishes only in the browser that
//!   started it (403 `authorization_not_yours` otherwise, nothing changed), so a link
//!   passed to someone else never connects their account to the session. Its object
//!   then answers every pending `authorization` call sent with that state — once: a
//!   state that no pending call carries (unknown, forged, used) is not found (404) and
//!   nothing changes.

use crate::api::ApiError;
use crate::runner::Submission;
use crate::store::{PendingCall, PendingKind};
use crate::tool::query_param;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::{Digest, Sha256};

/// The session object's internal route the worker passes a callback to.
pub const CALLBACK_PATH: &str = "/__internal/mcp-callback";

/// How long a started flow's cookie lasts (s): as long as its link is offered again.
const BINDING_SECONDS: u64 = 600;

/// The worker's start link for session `session_id`'s authorization sent with
/// `state`, on the origin (and path prefix) of the `redirect_uri` its callback is.
pub fn start_link(redirect_uri: &str, session_id: &str, state: &str) -> String {
    let base = redirect_uri
        .split("/v1/mcp/callback")
        .next()
        .unwrap_or_default();
    format!("{base}/v1/sessions/{session_id}/authorize?state={state}")
}

/// The cookie that ties a started flow to the browser that started it: named after the
/// state (two flows in one browser keep both), its value random; the session keeps
/// only its digest (under [`Binding::key`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    /// The cookie's name.
    pub name: String,
    /// Its value.
    pub value: String,
}

impl Binding {
    /// The cookie's name for a flow sent with `state`.
    pub fn name(state: &str) -> String {
        let digest = Sha256::digest(state.as_bytes());
        let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        format!("helix_mcp_{hex}")
    }

    /// A new binding for `state`, with `random` (32 random bytes) as its value.
    pub fn new(state: &str, random: &[u8]) -> Self {
        Self {
            name: Self::name(state),
            value: URL_SAFE_NO_PAD.encode(random),
        }
    }

    /// Where the session keeps the digest of the binding of `state`.
    pub fn key(state: &str) -> String {
        format!("mcp-binding:{}", Self::name(state))
    }

    /// What the session keeps: the value's digest.
    pub fn digest(value: &str) -> String {
        URL_SAFE_NO_PAD.encode(Sha256::digest(value.as_bytes()))
    }

    /// The `Set-Cookie` header that sets it, for the callback only (`secure` on https).
    pub fn set_cookie(&self, secure: bool) -> String {
        let secure = if secure { "; Secure" } else { "" };
        format!(
            "{}={}; Path=/v1/mcp/callback; Max-Age={BINDING_SECONDS}; HttpOnly; SameSite=Lax{secure}",
            self.name, self.value
        )
    }

    /// The value of the cookie named for `state` in a `Cookie` header, if any.
    pub fn from_cookies(header: &str, state: &str) -> Option<String> {
        let name = Self::name(state);
        header.split(';').find_map(|pair| {
            let (k, v) = pair.trim().split_once('=')?;
            (k == name && !v.is_empty()).then(|| v.to_string())
        })
    }

    /// Whether `presented` (the callback's cookie) is the binding whose digest `kept` is.
    pub fn holds(kept: Option<&str>, presented: Option<&str>) -> bool {
        match (kept, presented) {
            (Some(kept), Some(presented)) => {
                crate::auth::constant_time_eq(kept.as_bytes(), Self::digest(presented).as_bytes())
            }
            _ => false,
        }
    }
}

/// The start link of the `pending` call sent with `state` and where it leads (its
/// sign-in URL), if a call waits on that state.
pub fn sign_in_url<'a>(pending: &'a [PendingCall], state: &str) -> Option<(&'a str, &'a str)> {
    pending.iter().find_map(|p| {
        let request = p.request.as_ref()?;
        let start = request["authorizeUrl"].as_str()?;
        let sent = query_param(start, "state")?;
        let same = crate::auth::constant_time_eq(sent.as_bytes(), state.as_bytes());
        let sign_in = request["signInUrl"].as_str()?;
        (p.kind == PendingKind::Authorization && same).then_some((start, sign_in))
    })
}

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
    /// The flow's cookie the browser came back with ([`Binding`]), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binding: Option<String>,
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
            binding: None,
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
    fn a_flow_is_bound_to_the_browser_that_started_it() {
        let link = start_link("https://w.example/v1/mcp/callback", "s_1", "s_1.k3y");
        assert_eq!(
            link,
            "https://w.example/v1/sessions/s_1/authorize?state=s_1.k3y"
        );
        let binding = Binding::new("s_1.k3y", &[7; 32]);
        let other = Binding::new("s_1.other", &[7; 32]);
        assert_ne!(binding.name, other.name, "two flows, two cookies");
        let cookie = binding.set_cookie(true);
        assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax"));
        assert!(cookie.contains("Path=/v1/mcp/callback") && cookie.ends_with("; Secure"));
        let header = format!("a=1; {}={}; b=2", binding.name, binding.value);
        let presented = Binding::from_cookies(&header, "s_1.k3y");
        assert_eq!(presented.as_deref(), Some(binding.value.as_str()));
        assert_eq!(Binding::from_cookies(&header, "s_1.other"), None);
        let kept = Binding::digest(&binding.value);
        assert!(Binding::holds(Some(&kept), presented.as_deref()));
        assert!(!Binding::holds(Some(&kept), Some("forged")));
        assert!(
            !Binding::holds(Some(&kept), None),
            "no cookie, not finished"
        );
        assert!(!Binding::holds(None, presented.as_deref()), "never started");
        let mut call = waiting("a", "s_1.k3y");
        call.request.as_mut().unwrap()["signInUrl"] = json!("https://as/authorize?state=s_1.k3y");
        let pending = [waiting("b", "s_1.other"), call];
        let (_, sign_in) = sign_in_url(&pending, "s_1.k3y").unwrap();
        assert_eq!(sign_in, "https://as/authorize?state=s_1.k3y");
        assert_eq!(sign_in_url(&pending, "s_1.nope"), None);
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
