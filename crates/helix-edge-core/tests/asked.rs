//! Calls that ask the user mid-call ([`Wait`]): the run suspends on an `elicitation` or
//! an `authorization` like on an approval — durably, the pending call showing what is
//! asked, an `input_request` chunk in the stream — and the same call goes on with the
//! answer, once, after a restart, keeping its place in the session's vault. Answers are
//! checked against what was asked (an action; content matching the requested schema;
//! the state of the URL the user was sent to); a refused one changes nothing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

use helix_edge_core::agent::{Agent, Agents};
use helix_edge_core::chunk::ChunkBody;
use helix_edge_core::error::ToolError;
use helix_edge_core::message::Message;
use helix_edge_core::runner::{Progress, RunError, Submission};
use helix_edge_core::store::{PendingKind, SessionStatus};
use helix_edge_core::testing::{SESSION, Scenario, block, drive};
use helix_edge_core::tool::{Tool, Wait};
use serde_json::{Value, json};
use std::cell::RefCell;
use std::rc::Rc;

const URL: &str = "https://auth.example.com/authorize?client_id=c&state=s1.k3y&code_challenge=x";

/// `form` asks for a name (again while the answer is "again"), keeping its turn count
/// in the vault; `connect` asks to connect an account. Each run's answer is recorded.
fn world() -> (Scenario, Rc<RefCell<Vec<Option<Value>>>>) {
    let seen = Rc::new(RefCell::new(Vec::new()));
    let record = seen.clone();
    let form = Tool::raw(
        "form",
        "Asks for a name",
        json!({"type": "object"}),
        move |_, ctx| {
            let record = record.clone();
            async move {
                let answer = ctx.answer().cloned();
                record.borrow_mut().push(answer.clone());
                let vault = ctx.vault();
                let turns: u32 = vault
                    .get("turns")
                    .unwrap()
                    .map_or(0, |t| t.parse().unwrap());
                vault.set("turns", &(turns + 1).to_string()).unwrap();
                let schema = json!({
                    "type": "object",
                    "properties": {"name": {"type": "string"}},
                    "required": ["name"],
                });
                let ask = || Wait::elicitation("files", "Your name?".into(), schema.clone());
                let Some(answer) = answer else {
                    return Err(ask().into());
                };
                match (
                    answer["action"].as_str(),
                    answer["content"]["name"].as_str(),
                ) {
                    (Some("accept"), Some("again")) => Err(ask().into()),
                    (Some("accept"), Some(name)) => Ok(json!({"name": name, "turns": turns + 1})),
                    (action, _) => Err(ToolError::failed(format!("not given: {action:?}"))),
                }
            }
        },
    );
    let connect = Tool::raw(
        "connect",
        "Connects",
        json!({"type": "object"}),
        |_, ctx| async move {
            match ctx.answer() {
                None => Err(Wait::authorization("files", URL.into(), URL.into()).into()),
                Some(a) if a["action"] == "accept" => Ok(json!({"code": a["code"]})),
                Some(a) => Err(ToolError::failed(format!("not connected: {}", a["action"]))),
            }
        },
    );
    let agent = Agent::builder("asker")
        .tool(Tool::from(form))
        .tool(Tool::from(connect))
        .build()
        .unwrap();
    (Scenario::new(Agents::new().with(agent).unwrap()), seen)
}

fn input(call: &str, kind: PendingKind, answer: Value) -> Submission {
    Submission::Input {
        tool_call_id: call.into(),
        kind,
        answer,
    }
}

/// The session, suspended on `tool`'s call; its id.
fn asking(s: &Scenario, r: &helix_edge_core::testing::TestRunner, tool: &str) -> String {
    let call = s.model.call(tool, json!({}));
    s.model.calls(vec![call.clone()]).text("Done.");
    s.create(r, "asker", "go");
    assert!(matches!(drive(r), Progress::Suspended { .. }));
    call.id
}

#[test]
fn a_call_asks_for_input_and_goes_on_with_the_answer_once_after_a_restart() {
    let (s, seen) = world();
    let r = s.runner("p1");
    let call = asking(&s, &r, "form");
    let pending = s.pending();
    assert_eq!(pending[0].kind, PendingKind::Elicitation);
    let request = pending[0].request.clone().unwrap();
    assert_eq!(request["message"], "Your name?");
    assert_eq!(request["server"], "files");
    let view =
        serde_json::to_value(helix_edge_core::store::PendingView::from(&pending[0])).unwrap();
    assert_eq!(view["kind"], "elicitation");
    assert_eq!(
        view["requestedSchema"]["required"],
        json!(["name"]),
        "flattened into the view"
    );
    let asked = s.chunks().into_iter().find_map(|c| match c {
        ChunkBody::Custom { event_name, data } if event_name == "input_request" => Some(data),
        _ => None,
    });
    let asked = asked.expect("an input_request chunk");
    assert_eq!(
        (asked["toolCallId"].as_str(), asked["kind"].as_str()),
        (Some(call.as_str()), Some("elicitation"))
    );
    assert_eq!(asked["message"], "Your name?");

    let refused = [
        (
            "an approval",
            Submission::Approval {
                tool_call_id: call.clone(),
                approved: true,
                reason: None,
            },
        ),
        (
            "no action",
            input(
                &call,
                PendingKind::Elicitation,
                json!({"content": {"name": "Ann"}}),
            ),
        ),
        (
            "another action",
            input(&call, PendingKind::Elicitation, json!({"action": "maybe"})),
        ),
        (
            "no content",
            input(&call, PendingKind::Elicitation, json!({"action": "accept"})),
        ),
        (
            "content off the schema",
            input(
                &call,
                PendingKind::Elicitation,
                json!({"action": "accept", "content": {"name": 7}}),
            ),
        ),
        (
            "content with a decline",
            input(
                &call,
                PendingKind::Elicitation,
                json!({"action": "decline", "content": {}}),
            ),
        ),
        (
            "an authorization's",
            input(
                &call,
                PendingKind::Authorization,
                json!({"action": "cancel"}),
            ),
        ),
    ];
    for (what, submission) in refused {
        let err = block(r.submit(SESSION, submission)).unwrap_err();
        let status = helix_edge_core::api::ApiError::from(err).status;
        assert!(matches!(status, 400 | 409), "{what}: {status}");
    }
    assert!(
        matches!(drive(&r), Progress::Suspended { .. }),
        "nothing changed"
    );
    assert_eq!(seen.borrow().len(), 1);

    let answer = json!({"action": "accept", "content": {"name": "Ann"}});
    block(r.submit(
        SESSION,
        input(&call, PendingKind::Elicitation, answer.clone()),
    ))
    .unwrap();
    let again = block(r.submit(
        SESSION,
        input(&call, PendingKind::Elicitation, json!({"action": "cancel"})),
    ));
    assert!(
        matches!(again, Err(RunError::AlreadyResolved(_))),
        "{again:?}"
    );

    // Another process goes on with it: the call runs again with the answer, once.
    let p2 = s.runner("p2");
    assert_eq!(drive(&p2), Progress::Idle(SessionStatus::Completed));
    assert_eq!(*seen.borrow(), vec![None, Some(answer)]);
    let result = s.messages().into_iter().find_map(|m| match m {
        Message::Tool { content, .. } => Some(content),
        _ => None,
    });
    assert_eq!(
        result,
        Some(json!({"name": "Ann", "turns": 2})),
        "its vault kept its place"
    );
    let chunks = s.chunks();
    let count = |f: fn(&ChunkBody) -> bool| chunks.iter().filter(|c| f(c)).count();
    assert_eq!(
        count(|c| matches!(c, ChunkBody::ToolStart { .. })),
        1,
        "one start"
    );
    assert_eq!(
        count(|c| matches!(c, ChunkBody::ToolEnd { success: true, .. })),
        1,
        "one end"
    );
    assert_eq!(drive(&p2), Progress::Idle(SessionStatus::Completed));
    assert_eq!(seen.borrow().len(), 2, "never again");
}

#[test]
fn a_call_may_ask_again_and_each_answer_is_its_own() {
    let (s, seen) = world();
    let r = s.runner("p1");
    let call = asking(&s, &r, "form");
    let first = s.pending()[0].since;
    let again = json!({"action": "accept", "content": {"name": "again"}});
    block(r.submit(SESSION, input(&call, PendingKind::Elicitation, again))).unwrap();
    assert!(
        matches!(drive(&r), Progress::Suspended { .. }),
        "it asks again"
    );
    let pending = s.pending();
    assert_eq!(
        (pending.len(), pending[0].kind),
        (1, PendingKind::Elicitation)
    );
    assert!(pending[0].since > first, "a wait of its own");
    let name = json!({"action": "accept", "content": {"name": "Bo"}});
    block(r.submit(SESSION, input(&call, PendingKind::Elicitation, name))).unwrap();
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    assert_eq!(seen.borrow().len(), 3);
    let results: Vec<Value> = s
        .messages()
        .into_iter()
        .filter_map(|m| match m {
            Message::Tool { content, .. } => Some(content),
            _ => None,
        })
        .collect();
    assert_eq!(
        results,
        vec![json!({"name": "Bo", "turns": 3})],
        "one result for the call"
    );

    // A decline is the tool's to handle: here, an error the model sees.
    let (s, _) = world();
    let r = s.runner("p1");
    let call = asking(&s, &r, "form");
    block(r.submit(
        SESSION,
        input(
            &call,
            PendingKind::Elicitation,
            json!({"action": "decline"}),
        ),
    ))
    .unwrap();
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    let failed = s
        .messages()
        .into_iter()
        .any(|m| matches!(m, Message::Tool { is_error: true, .. }));
    assert!(failed);
}

#[test]
fn an_authorization_takes_only_the_state_its_url_carried() {
    let (s, _) = world();
    let r = s.runner("p1");
    let call = asking(&s, &r, "connect");
    let pending = s.pending();
    assert_eq!(pending[0].kind, PendingKind::Authorization);
    assert_eq!(pending[0].request.as_ref().unwrap()["authorizeUrl"], URL);
    let answer = |state: &str| {
        input(
            &call,
            PendingKind::Authorization,
            json!({"action": "accept", "code": "c0de", "state": state}),
        )
    };
    for state in ["s1.k3Y", "s1.k3y2", "", "s1"] {
        let err = block(r.submit(SESSION, answer(state))).unwrap_err();
        assert!(matches!(err, RunError::Invalid(_)), "{state}: {err:?}");
    }
    let no_code = json!({"action": "accept", "state": "s1.k3y"});
    assert!(block(r.submit(SESSION, input(&call, PendingKind::Authorization, no_code))).is_err());
    assert!(
        matches!(drive(&r), Progress::Suspended { .. }),
        "nothing changed"
    );
    block(r.submit(SESSION, answer("s1.k3y"))).unwrap();
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    let result = s.messages().into_iter().find_map(|m| match m {
        Message::Tool { content, .. } => Some(content),
        _ => None,
    });
    assert_eq!(result, Some(json!({"code": "c0de"})));
}
