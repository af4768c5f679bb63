//! The decision link's pages: what the person who opens a link sees. Opening one shows
//! the call and a button; only the button's POST decides. No script, nothing loaded,
//! every value escaped.

use super::Decision;
use crate::store::PendingCall;

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html><meta charset=utf-8><meta name=viewport content=\"width=device-width\">\
         <title>{}</title><body style=\"font:16px system-ui;margin:3rem auto;max-width:36rem;padding:0 1rem\">\
         <h1>{}</h1>{body}",
        escape(title),
        escape(title)
    )
}

/// A page that says `text` under `title`.
pub fn message(title: &str, text: &str) -> String {
    page(title, &format!("<p>{}</p>", escape(text)))
}

/// The page of a link to decide `call` (waiting in `agent`'s session): its details, and
/// the button that POSTs the decision to the link itself.
pub fn call_page(d: &Decision, agent: &str, call: &PendingCall) -> String {
    let (verb, title) = match d.approve {
        true => ("Approve", format!("Approve {}?", call.tool_name)),
        false => ("Deny", format!("Deny {}?", call.tool_name)),
    };
    let arguments = serde_json::to_string_pretty(&call.arguments).unwrap_or_default();
    let reason = match d.approve {
        true => "A note (optional)",
        false => "Why (optional; the agent is told)",
    };
    let body = format!(
        "<p><b>{}</b> asks to run <code>{}</code> in session <code>{}</code>.</p>\
         <pre style=\"background:#f4f4f4;padding:1rem;overflow:auto\">{}</pre>\
         <form method=post><label>{reason}<br><input name=reason maxlength=2000 style=\"width:100%\"></label>\
         <p><button type=submit style=\"font-size:1rem;padding:.5rem 1.5rem\">{verb}</button></p></form>\
         <p style=\"color:#666\">Opening this page decided nothing; the button does, once.</p>",
        escape(agent),
        escape(&call.tool_name),
        escape(&d.session),
        escape(&arguments),
    );
    page(&title, &body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::PendingKind;
    use serde_json::json;

    #[test]
    fn the_page_shows_the_call_escaped_and_a_button_that_posts() {
        let call = PendingCall {
            tool_call_id: "c1".into(),
            tool_name: "delete_file".into(),
            arguments: json!({ "path": "<script>alert(1)</script>" }),
            kind: PendingKind::Approval,
            deadline: None,
            since: 0,
            output_path: None,
            approvers: None,
            request: None,
        };
        let d = Decision {
            session: "s1".into(),
            call: "c1".into(),
            since: 0,
            approve: false,
            expires: 9,
        };
        let html = call_page(&d, "assistant", &call);
        assert!(html.contains("Deny delete_file?"));
        assert!(html.contains("<form method=post>"));
        assert!(!html.contains("<script>"));
        assert!(html.contains("&lt;script&gt;"));
        assert!(message("Done", "a <b>").contains("a &lt;b&gt;"));
    }
}
