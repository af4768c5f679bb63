//! A call that asks the user mid-call: a server tool returns `Err(wait.into())` with a
//! [`Wait`] — connect an account (`authorization`, with the URL to follow) or give some
//! input (`elicitation`, a message and the schema an answer matches). The run suspends
//! on it like on an approval, durably; the answer comes over `POST …/tool-results`, and
//! the same call runs again with it ([`ToolContext::answer`](super::ToolContext::answer)),
//! its place kept in the session's [`Vault`](crate::journal::Vault). A call may ask
//! more than once; each answer is used once.

use crate::error::ToolError;
use crate::store::{PendingCall, PendingKind};
use serde_json::{Value, json};

/// What a call asks the user mid-call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wait {
    pub(crate) kind: PendingKind,
    /// What the user is shown: an object, flattened into the pending call's view.
    pub(crate) request: Value,
}

impl Wait {
    /// Asks the user to connect an account at `server` by following `authorize_url`,
    /// which leads to `sign_in_url` (an OAuth authorization request; its `state` is what
    /// the answer must carry). For a server's OAuth `authorize_url` is the worker's start
    /// link, which binds the flow to who opens it; the two may also be the same.
    pub fn authorization(server: &str, authorize_url: String, sign_in_url: String) -> Self {
        Self {
            kind: PendingKind::Authorization,
            request: json!({
                "server": server,
                "authorizeUrl": authorize_url,
                "signInUrl": sign_in_url,
            }),
        }
    }

    /// Asks the user for input for `server`: `message`, answered with content that
    /// matches `requested_schema` (a JSON Schema object).
    pub fn elicitation(server: &str, message: String, requested_schema: Value) -> Self {
        Self {
            kind: PendingKind::Elicitation,
            request: json!({
                "server": server,
                "message": message,
                "requestedSchema": requested_schema,
            }),
        }
    }
}

/// What a view shows of a call's request: all of it but where the start link leads
/// (`signInUrl`: whoever opens it directly could not complete the flow anyway, but it is
/// the worker's to hand out, to the person who starts).
pub fn shown(request: Option<&Value>) -> Option<Value> {
    let mut shown = request?.clone();
    if let Some(fields) = shown.as_object_mut() {
        fields.remove("signInUrl");
    }
    Some(shown)
}

impl From<Wait> for ToolError {
    fn from(wait: Wait) -> Self {
        ToolError::Waiting(Box::new(wait))
    }
}

/// Checks the user's `answer` to `pending`, a call that asked mid-call: an `action` of
/// `accept`, `decline` or `cancel`; an accepted elicitation's `content` matches the
/// requested schema, an accepted authorization carries the `code` and the `state` of
/// the URL it was sent to (compared in constant time). Nothing else is taken.
pub fn check_answer(pending: &PendingCall, answer: &Value) -> Result<(), String> {
    let Some(fields) = answer.as_object() else {
        return Err("The answer is an object with an action.".into());
    };
    let action = fields.get("action").and_then(Value::as_str);
    let accepted = match action {
        Some("accept") => true,
        Some("decline" | "cancel") => false,
        _ => return Err("action is one of accept, decline, cancel.".into()),
    };
    let takes: &[&str] = match (pending.kind, accepted) {
        (PendingKind::Elicitation, true) => &["action", "content"],
        (PendingKind::Authorization, true) => &["action", "code", "state"],
        _ => &["action"],
    };
    if let Some(other) = fields.keys().find(|k| !takes.contains(&k.as_str())) {
        return Err(format!("'{other}' is not part of this answer."));
    }
    if !accepted {
        return Ok(());
    }
    let request = pending.request.as_ref().unwrap_or(&Value::Null);
    if pending.kind == PendingKind::Elicitation {
        let content = fields.get("content").filter(|c| c.is_object());
        let content = content.ok_or("An accepted answer has its content (an object).")?;
        return crate::schema::validate(&request["requestedSchema"], content)
            .map_err(|reason| format!("content does not match the requested schema: {reason}"));
    }
    let text = |key: &str| {
        fields
            .get(key)
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
    };
    let (Some(code), Some(state)) = (text("code"), text("state")) else {
        return Err("An accepted authorization carries its code and state.".into());
    };
    let sent = request["authorizeUrl"]
        .as_str()
        .and_then(|url| query_param(url, "state"));
    let matches =
        sent.is_some_and(|sent| crate::auth::constant_time_eq(sent.as_bytes(), state.as_bytes()));
    if !matches {
        return Err("The state is not the one this call sent the user with.".into());
    }
    if code.len() > 4096 {
        return Err("The code is longer than 4096 bytes.".into());
    }
    Ok(())
}

/// The value of query parameter `name` in `url`, as written (the URLs a call makes
/// carry URL-safe values).
pub fn query_param<'a>(url: &'a str, name: &str) -> Option<&'a str> {
    let (_, query) = url.split_once('?')?;
    let query = query.split('#').next()?;
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find_map(|(k, v)| (k == name).then_some(v))
}
