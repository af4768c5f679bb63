//! Decision links' pages (feature `notify`): `GET /v1/decisions/{token}` shows the call
//! the link decides and a button; only the button's `POST` decides — once, as the
//! session's answer `decidedBy: {"subject": "decision-link"}`. The signed link is the
//! credential ([`crate::notify::verify_decision`]); a link that is altered (404),
//! expired (410), or whose call no longer waits (409) decides nothing, and a role-gated
//! call is never decided by a link alone (403).

use crate::api::{ApiError, form_pairs};
use crate::app::App;
use crate::auth::AuthConfig;
use crate::http::{ObjectRequest, RawRequest, call_object, internal, read_body};
use crate::notify::{DECISION_CALL_PATH, Decision, LinkError, call_page, message, verify_decision};
use crate::setup::Setup;
use crate::store::{PendingCall, PendingKind};
use serde_json::{Value, json};
use worker::{Env, Headers, Response};

type Reply = std::result::Result<Response, ApiError>;

/// The longest token a link may carry (as the OpenAPI document says).
const MAX_TOKEN: usize = 600;

/// The page's answer: a status and its HTML.
type Page = (u16, String);

/// `GET` or `POST /v1/decisions/{token}`, if `path` is one.
pub(crate) async fn route(req: &RawRequest, path: &str, env: &Env, app: &App) -> Option<Reply> {
    let token = path.strip_prefix("/v1/decisions/")?;
    if token.is_empty() || token.contains('/') {
        return None;
    }
    let (status, html) = match req.method().as_str() {
        // Longer than any link this deployment makes: not one of its links.
        _ if token.len() > MAX_TOKEN => (404, message("Not a decision link", "Check the link.")),
        "GET" => show(token, env, app).await,
        "POST" => decide(req, token, env, app).await,
        _ => {
            let refused = message("Not allowed", "Open the link, then use its button.");
            let resp = html_response(405, refused).and_then(|resp| {
                let headers = resp.headers().clone();
                headers
                    .set("allow", "GET, POST")
                    .map_err(|e| internal("headers", e))?;
                Ok(resp.with_headers(headers))
            });
            return Some(resp);
        }
    };
    Some(html_response(status, html))
}

/// The link's decision and the call it decides, or the page that says why there is none.
async fn open(token: &str, env: &Env, app: &App) -> Result<(Decision, String, PendingCall), Page> {
    let refused = |status, title, text| Err((status, message(title, text)));
    let key = match Setup::get(env, app).map(|s| s.auth.clone()) {
        Ok(AuthConfig::Token(key)) => key,
        _ => {
            return refused(
                503,
                "Not available",
                "Decision links need the deployment's API_TOKEN.",
            );
        }
    };
    let now_secs = worker::Date::now().as_millis() / 1000;
    let decision = match verify_decision(&key, token, now_secs) {
        Ok(decision) => decision,
        Err(LinkError::Expired) => {
            return refused(
                410,
                "This link has expired",
                "Decide in the console instead.",
            );
        }
        Err(LinkError::Invalid) => return refused(404, "Not a decision link", "Check the link."),
    };
    let asked = json!({ "call": decision.call }).to_string().into_bytes();
    let request = ObjectRequest::post(DECISION_CALL_PATH, asked);
    let found = match call_object(env, app.sessions(), &decision.session, request).await {
        Ok(mut resp) if resp.status_code() == 200 => resp.json::<Value>().await.unwrap_or_default(),
        Ok(resp) if resp.status_code() == 404 => Value::Null,
        Ok(resp) => {
            let text = format!("The session could not be read ({}).", resp.status_code());
            return refused(503, "Try again", &text);
        }
        Err(e) => return Err((e.status, message("Try again", &e.message))),
    };
    let call = serde_json::from_value::<PendingCall>(found["call"].clone()).ok();
    // The very call the link was made for: the same id, waiting since the same instant.
    let call = call.filter(|p| p.since == decision.since && p.kind == PendingKind::Approval);
    let Some(call) = call else {
        let text = "It was decided (through this link or otherwise), it expired, or its run ended.";
        return refused(409, "No longer waiting", text);
    };
    let agent = found["agent"].as_str().unwrap_or_default().to_string();
    Ok((decision, agent, call))
}

/// `GET`: the call and the button; nothing is decided.
async fn show(token: &str, env: &Env, app: &App) -> Page {
    match open(token, env, app).await {
        Ok((decision, agent, call)) => (200, call_page(&decision, &agent, &call)),
        Err(page) => page,
    }
}

/// `POST`: the decision, made once.
async fn decide(req: &RawRequest, token: &str, env: &Env, app: &App) -> Page {
    let (decision, _, call) = match open(token, env, app).await {
        Ok(opened) => opened,
        Err(page) => return page,
    };
    if call.approvers.is_some() {
        let text = "Only holders of a role may decide this call: sign in to the console and decide it there.";
        return (403, message("Sign in to decide", text));
    }
    let reason = match read_body(req).await {
        Ok(body) => form_pairs(&String::from_utf8_lossy(&body))
            .into_iter()
            .find_map(|(k, v)| (k == "reason").then_some(v)),
        Err(e) => return (e.status, message("Not decided", &e.message)),
    };
    let mut answer = json!({
        "kind": "approval-response", "toolCallId": decision.call, "approved": decision.approve,
        "decidedBy": { "subject": helix_edge_core::store::Owner::DECISION_LINK },
    });
    if let Some(reason) = reason.filter(|r| !r.trim().is_empty()) {
        answer["reason"] = reason.chars().take(2000).collect::<String>().into();
    }
    let path = format!("/v1/sessions/{}/tool-results", decision.session);
    let body = answer.to_string().into_bytes();
    let sent = call_object(
        env,
        app.sessions(),
        &decision.session,
        ObjectRequest::post(&path, body),
    );
    match sent.await {
        Ok(resp) if resp.status_code() == 202 => {
            let title = if decision.approve {
                "Approved"
            } else {
                "Denied"
            };
            (
                200,
                message(
                    title,
                    "Thank you: the run goes on. You can close this page.",
                ),
            )
        }
        Ok(resp) if resp.status_code() == 409 => {
            let text = "It was decided already (through this link or otherwise).";
            (409, message("No longer waiting", text))
        }
        Ok(mut resp) => {
            let status = resp.status_code();
            let error: Value = resp.json().await.unwrap_or_default();
            let text = error["error"]["message"]
                .as_str()
                .unwrap_or("The decision was refused.");
            (status, message("Not decided", text))
        }
        Err(e) => (e.status, message("Not decided", &e.message)),
    }
}

/// A page for the browser: no script, nothing loaded, its form posting to itself only.
fn html_response(status: u16, html: String) -> Reply {
    let headers = Headers::new();
    let set = |k: &str, v: &str| headers.set(k, v).map_err(|e| internal("headers", e));
    set("content-type", "text/html; charset=utf-8")?;
    set(
        "content-security-policy",
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
    )?;
    set("cache-control", "no-store")?;
    set("referrer-policy", "no-referrer")?;
    set("x-robots-tag", "noindex")?;
    Ok(Response::ok(html)
        .map_err(|e| internal("decision page", e))?
        .with_status(status)
        .with_headers(headers))
}
