//! A notification's body. helix-edge's JSON:
//! `{"id","type":"call.waiting"|"call.resolved","timestamp","session":{"id","agent","runId"},
//! "call":{"toolCallId","toolName","kind","arguments","approvers"?,"deadline"?,"since"},
//! "links":{"session","approve"?,"deny"?}}` — or, for a Slack incoming webhook, a message
//! whose Approve / Deny buttons are the decision links.

use super::Format;
use crate::store::PendingCall;
use serde_json::{Value, json};

/// What happened to the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// It started waiting on a person.
    Waiting,
    /// It stopped waiting (answered, expired, or its run ended).
    Resolved,
}

impl EventKind {
    /// Its `type`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Waiting => "call.waiting",
            Self::Resolved => "call.resolved",
        }
    }
}

/// A notification, before its format.
#[derive(Debug, Clone)]
pub struct Event<'a> {
    /// Its idempotency key (also `webhook-id`).
    pub id: &'a str,
    /// What happened.
    pub kind: EventKind,
    /// When it happened (ms).
    pub at: u64,
    /// The session.
    pub session: &'a str,
    /// Its agent.
    pub agent: &'a str,
    /// The run the call waits in.
    pub run_id: &'a str,
    /// The call.
    pub call: &'a PendingCall,
    /// The session's link.
    pub session_link: String,
    /// The call's decision links (approve, deny), for an approval.
    pub decide: Option<(String, String)>,
}

/// The body of `event` in `format`.
pub fn body(event: &Event<'_>, format: Format) -> String {
    match format {
        Format::Json => json_body(event).to_string(),
        Format::Slack => slack_body(event).to_string(),
    }
}

fn json_body(e: &Event<'_>) -> Value {
    let c = e.call;
    let mut call = json!({
        "toolCallId": c.tool_call_id, "toolName": c.tool_name, "kind": c.kind.as_str(),
        "arguments": c.arguments, "since": c.since,
    });
    if let Some(approvers) = &c.approvers {
        call["approvers"] = json!({ "role": approvers.role, "notOwner": approvers.not_owner });
    }
    if let Some(deadline) = c.deadline {
        call["deadline"] = deadline.into();
    }
    let mut links = json!({ "session": e.session_link });
    if let Some((approve, deny)) = &e.decide {
        links["approve"] = approve.as_str().into();
        links["deny"] = deny.as_str().into();
    }
    json!({
        "id": e.id, "type": e.kind.as_str(), "timestamp": e.at,
        "session": { "id": e.session, "agent": e.agent, "runId": e.run_id },
        "call": call, "links": links,
    })
}

fn slack_body(e: &Event<'_>) -> Value {
    let c = e.call;
    let (tool, agent, session) = (
        slack_text(&c.tool_name),
        slack_text(e.agent),
        slack_text(e.session),
    );
    let what = match (e.kind, c.kind.as_str()) {
        (EventKind::Resolved, _) => format!("`{tool}` in {session} no longer waits."),
        (EventKind::Waiting, "approval") => format!("*{agent}* asks to run `{tool}`."),
        (EventKind::Waiting, _) => format!("*{agent}* waits on you for `{tool}`."),
    };
    // What the model wrote is shown as text, never as Slack markup (no mention, no link,
    // no way out of the code block), and within a section's 3000 characters.
    let arguments = serde_json::to_string_pretty(&c.arguments).unwrap_or_default();
    let mut arguments = slack_text(&arguments).replace("```", "` ` `");
    if arguments.chars().count() > MAX_SHOWN {
        arguments = arguments.chars().take(MAX_SHOWN).collect::<String>() + "…";
    }
    let mut blocks = vec![json!({
        "type": "section",
        "text": { "type": "mrkdwn", "text": format!("{what}\n```{arguments}```") },
    })];
    if let Some(approvers) = &c.approvers {
        let text = format!("Approvers: holders of the role `{}`.", approvers.role);
        blocks.push(json!({ "type": "context", "elements": [{ "type": "mrkdwn", "text": text }] }));
    }
    let mut buttons = Vec::new();
    if let (EventKind::Waiting, Some((approve, deny))) = (e.kind, &e.decide) {
        buttons.push(button("Approve", approve, Some("primary")));
        buttons.push(button("Deny", deny, Some("danger")));
    }
    buttons.push(button("Open the session", &e.session_link, None));
    blocks.push(json!({ "type": "actions", "elements": buttons }));
    json!({ "text": what, "blocks": blocks })
}

/// The most characters of the arguments a Slack message shows (a section holds 3000).
const MAX_SHOWN: usize = 2500;

/// `text` as Slack shows text, not markup (`&`, `<`, `>` escaped as its API asks).
fn slack_text(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn button(text: &str, url: &str, style: Option<&str>) -> Value {
    let mut b =
        json!({ "type": "button", "text": { "type": "plain_text", "text": text }, "url": url });
    if let Some(style) = style {
        b["style"] = style.into();
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Approvers, PendingKind};

    fn call() -> PendingCall {
        PendingCall {
            tool_call_id: "c1".into(),
            tool_name: "delete_file".into(),
            arguments: json!({ "path": "/x" }),
            kind: PendingKind::Approval,
            deadline: None,
            since: 5,
            output_path: None,
            approvers: Some(Approvers {
                role: "finance".into(),
                not_owner: true,
            }),
            request: Some(json!({ "signInUrl": "secret" })),
        }
    }

    fn event(call: &PendingCall, kind: EventKind) -> Event<'_> {
        Event {
            id: "s1:c1:waiting:0",
            kind,
            at: 9,
            session: "s1",
            agent: "assistant",
            run_id: "r1",
            call,
            session_link: "https://w/v1/sessions/s1".into(),
            decide: Some(("https://w/a".into(), "https://w/d".into())),
        }
    }

    #[test]
    fn the_json_body_names_the_call_its_session_and_links() {
        let call = call();
        let body: Value =
            serde_json::from_str(&body(&event(&call, EventKind::Waiting), Format::Json)).unwrap();
        assert_eq!(
            body,
            json!({
                "id": "s1:c1:waiting:0", "type": "call.waiting", "timestamp": 9,
                "session": { "id": "s1", "agent": "assistant", "runId": "r1" },
                "call": { "toolCallId": "c1", "toolName": "delete_file", "kind": "approval",
                    "arguments": { "path": "/x" }, "since": 5,
                    "approvers": { "role": "finance", "notOwner": true } },
                "links": { "session": "https://w/v1/sessions/s1", "approve": "https://w/a", "deny": "https://w/d" },
            })
        );
    }

    #[test]
    fn a_slack_message_has_approve_and_deny_buttons_while_the_call_waits() {
        let call = call();
        let waiting: Value =
            serde_json::from_str(&body(&event(&call, EventKind::Waiting), Format::Slack)).unwrap();
        let buttons = waiting["blocks"].as_array().unwrap().last().unwrap()["elements"].clone();
        let urls: Vec<&str> = buttons
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["url"].as_str().unwrap())
            .collect();
        assert_eq!(
            urls,
            ["https://w/a", "https://w/d", "https://w/v1/sessions/s1"]
        );
        assert!(waiting["text"].as_str().unwrap().contains("delete_file"));
        let resolved: Value =
            serde_json::from_str(&body(&event(&call, EventKind::Resolved), Format::Slack)).unwrap();
        let buttons = resolved["blocks"].as_array().unwrap().last().unwrap()["elements"].clone();
        assert_eq!(
            buttons.as_array().unwrap().len(),
            1,
            "no decision once it is resolved"
        );
        assert!(
            !resolved.to_string().contains("secret"),
            "what the call asks is not sent"
        );
    }

    #[test]
    fn what_the_model_wrote_is_text_in_slack_not_markup_and_bounded() {
        let mut call = call();
        let injected = "```\n<!channel> <https://evil.example|click> & more";
        call.arguments = json!({ "path": injected, "z": "x".repeat(5000) });
        call.tool_name = "<!here>".into();
        let body: Value =
            serde_json::from_str(&body(&event(&call, EventKind::Waiting), Format::Slack)).unwrap();
        let text = body["blocks"][0]["text"]["text"].as_str().unwrap();
        assert!(!text.contains("<!channel>") && !text.contains("<!here>"));
        assert!(!text.contains("<https"));
        assert!(text.contains("&lt;!channel&gt;") && text.contains("&amp; more"));
        assert_eq!(
            text.matches("```").count(),
            2,
            "one code block, not closed early"
        );
        assert!(text.chars().count() < 3000, "{}", text.len());
    }
}
