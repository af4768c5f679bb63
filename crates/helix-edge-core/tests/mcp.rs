//! Tools of an MCP server, run by the core against a server spoken to over the
//! Streamable HTTP transport (here in process, answering by method as a server does):
//! the tools offered by name and filter, calls with JSON and event-stream answers,
//! progress, error results, structured content, approval for destructive tools, a
//! forgotten session initialised again, servers that fail, and definitions refused.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

use futures::future::LocalBoxFuture;
use helix_edge_core::agent::{Agent, Agents};
use helix_edge_core::chunk::ChunkBody;
use helix_edge_core::error::{DefinitionError, ToolError};
use helix_edge_core::host::Level;
use helix_edge_core::mcp::McpServer;
use helix_edge_core::message::{Message, ToolCall};
use helix_edge_core::provider::{BodyStream, HttpRequest, HttpResponse, Transport, TransportError};
use helix_edge_core::runner::Progress;
use helix_edge_core::store::{PendingKind, SessionStatus};
use helix_edge_core::testing::{SESSION, Scenario, block, drive};
use helix_edge_core::tool::Tool;
use serde_json::{Value, json};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

/// An MCP server in process: sessions, a paged tool list, and tools that echo, wipe
/// (destructive), fail, report progress and answer with structured content.
#[derive(Default)]
struct Server {
    /// Every message received, with its session id header.
    received: RefCell<Vec<(Option<String>, Value)>>,
    sessions: Cell<u32>,
    /// The sessions the server forgot.
    forgotten: RefCell<Vec<String>>,
    /// Answers every request with this status instead.
    down: Cell<Option<u16>>,
    /// Answers the request of this number (counted from 1) with 503.
    fail_at: Cell<Option<usize>>,
    /// Answers tool calls with an event stream.
    streams: Cell<bool>,
    now: Cell<u64>,
}

impl Server {
    fn calls(&self, tool: &str) -> usize {
        self.received
            .borrow()
            .iter()
            .filter(|(_, m)| m["method"] == "tools/call" && m["params"]["name"] == tool)
            .count()
    }

    fn methods(&self) -> Vec<String> {
        let received = self.received.borrow();
        received
            .iter()
            .map(|(_, m)| m["method"].as_str().unwrap().to_string())
            .collect()
    }

    fn answer(
        &self,
        session: Option<&str>,
        message: &Value,
    ) -> (u16, Vec<(String, String)>, String) {
        let json = |body: Value| {
            (
                200,
                vec![header("content-type", "application/json")],
                body.to_string(),
            )
        };
        let id = message["id"].clone();
        let method = message["method"].as_str().unwrap_or_default();
        if method == "initialize" {
            self.sessions.set(self.sessions.get() + 1);
            let result = json!({
                "protocolVersion": "2025-06-18",
                "capabilities": { "tools": { "listChanged": true } },
                "serverInfo": { "name": "fake", "version": "1" },
            });
            let (status, mut headers, body) =
                json(json!({ "jsonrpc": "2.0", "id": id, "result": result }));
            headers.push(header(
                "mcp-session-id",
                &format!("s{}", self.sessions.get()),
            ));
            return (status, headers, body);
        }
        let Some(session) = session else {
            return (400, vec![], "no session".into());
        };
        if self.forgotten.borrow().iter().any(|s| s == session) {
            return (404, vec![], "unknown session".into());
        }
        if message.get("id").is_none() {
            return (202, vec![], String::new());
        }
        let result = match method {
            "tools/list" if message["params"]["cursor"].is_null() => json!({
                "tools": [
                    { "name": "echo", "description": "Echoes", "annotations": { "readOnlyHint": true },
                      "inputSchema": { "type": "object", "properties": { "text": { "type": "string" } }, "required": ["text"] } },
                    { "name": "wipe", "description": "Wipes a disk", "annotations": { "destructiveHint": true },
                      "inputSchema": { "type": "object" } },
                ],
                "nextCursor": "2",
            }),
            "tools/list" => json!({
                "tools": [
                    { "name": "fail", "inputSchema": { "type": "object" } },
                    { "name": "measure", "inputSchema": { "type": "object" },
                      "outputSchema": { "type": "object", "required": ["cm"] } },
                    { "name": "not.valid here", "inputSchema": { "type": "object" } },
                ],
            }),
            "tools/call" => {
                let args = &message["params"]["arguments"];
                match message["params"]["name"].as_str().unwrap() {
                    "echo" => {
                        json!({ "content": [{ "type": "text", "text": format!("echo: {}", args["text"].as_str().unwrap()) }] })
                    }
                    "wipe" => json!({ "content": [{ "type": "text", "text": "wiped" }] }),
                    "fail" => {
                        json!({ "content": [{ "type": "text", "text": "the disk is on fire" }], "isError": true })
                    }
                    "measure" => {
                        json!({ "content": [{ "type": "text", "text": "{\"cm\":12}" }], "structuredContent": { "cm": 12 } })
                    }
                    other => panic!("no tool {other}"),
                }
            }
            other => panic!("no method {other}"),
        };
        let answer = json!({ "jsonrpc": "2.0", "id": id, "result": result });
        if method == "tools/call" && self.streams.get() {
            let token = &message["params"]["_meta"]["progressToken"];
            let progress = json!({ "jsonrpc": "2.0", "method": "notifications/progress",
                "params": { "progressToken": token, "progress": 1, "total": 2 } });
            let body =
                format!(": priming\n\ndata: {progress}\n\nevent: message\ndata: {answer}\n\n");
            return (200, vec![header("content-type", "text/event-stream")], body);
        }
        json(answer)
    }
}

fn header(name: &str, value: &str) -> (String, String) {
    (name.to_string(), value.to_string())
}

/// The server behind the [`Transport`] trait, its body cut in two chunks.
struct Wire(Rc<Server>);

struct Body(VecDeque<Vec<u8>>);

impl BodyStream for Body {
    fn next(&mut self) -> LocalBoxFuture<'_, Option<Result<Vec<u8>, TransportError>>> {
        let next = self.0.pop_front().map(Ok);
        Box::pin(async move { next })
    }
}

/// A body that never comes.
struct Hang;

impl BodyStream for Hang {
    fn next(&mut self) -> LocalBoxFuture<'_, Option<Result<Vec<u8>, TransportError>>> {
        Box::pin(futures::future::pending())
    }
}

impl Transport for Wire {
    fn send<'a>(
        &'a self,
        request: &'a HttpRequest,
        _timeout: std::time::Duration,
    ) -> LocalBoxFuture<'a, Result<HttpResponse, TransportError>> {
        let server = &self.0;
        let session = request.headers.iter().find(|(k, _)| k == "mcp-session-id");
        let session = session.map(|(_, v)| v.clone());
        assert!(
            request
                .headers
                .contains(&header("authorization", "Bearer sekret"))
        );
        let message: Value = serde_json::from_str(&request.body).unwrap();
        server
            .received
            .borrow_mut()
            .push((session.clone(), message.clone()));
        let hiccup = server.fail_at.get() == Some(server.received.borrow().len());
        let (status, headers, body) = match server.down.get() {
            Some(status) => (status, vec![], "down".to_string()),
            None if hiccup => (503, vec![], "busy".to_string()),
            None => server.answer(session.as_deref(), &message),
        };
        if message["params"]["arguments"]["text"] == "hang" {
            let body: Box<dyn BodyStream> = Box::new(Hang);
            return Box::pin(async move {
                Ok(HttpResponse {
                    status,
                    headers,
                    body,
                })
            });
        }
        let body = match message["params"]["arguments"]["text"].as_str() {
            Some("garbage") => "this is not JSON".to_string(),
            Some("huge") => " ".repeat(helix_edge_core::mcp::MAX_ANSWER_BYTES + 1) + &body,
            _ => body,
        };
        let mid = body.len() / 2;
        let chunks = VecDeque::from([
            body.as_bytes()[..mid].to_vec(),
            body.as_bytes()[mid..].to_vec(),
        ]);
        Box::pin(async move {
            Ok(HttpResponse {
                status,
                headers,
                body: Box::new(Body(chunks)),
            })
        })
    }

    fn sleep(&self, wait: std::time::Duration) -> LocalBoxFuture<'_, ()> {
        self.0.now.set(self.0.now.get() + wait.as_millis() as u64);
        Box::pin(async {})
    }

    fn now_ms(&self) -> u64 {
        self.0.now.get()
    }

    fn random(&self) -> f64 {
        0.5
    }

    fn warn(&self, _message: &str) {}
}

fn files(server: &Rc<Server>) -> McpServer {
    McpServer::new(
        "files",
        "https://mcp.test/mcp",
        Rc::new(Wire(server.clone())),
    )
    .bearer("sekret")
}

fn world(server: McpServer) -> Scenario {
    let agent = Agent::builder("ops").mcp_server(server).build().unwrap();
    Scenario::new(Agents::new().with(agent).unwrap())
}

/// A session of `ops` whose model calls `files__echo` with `text` once, driven to its
/// end, and the call.
fn echoed(server: &Rc<Server>, text: &str) -> (Scenario, ToolCall) {
    let w = world(files(server));
    let r = w.runner("p1");
    let call = w.model.call("files__echo", json!({ "text": text }));
    w.model.calls(vec![call.clone()]).text("Done.");
    w.create(&r, "ops", "echo");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    (w, call)
}

/// The result the model saw for call `id`.
fn result_of(w: &Scenario, id: &str) -> Message {
    let messages = w.messages();
    let found = messages
        .iter()
        .find(|m| matches!(m, Message::Tool { tool_call_id, .. } if tool_call_id == id));
    found
        .cloned()
        .unwrap_or_else(|| panic!("no result for {id}"))
}

fn tool_result(message: &Message) -> Result<Value, String> {
    match message {
        Message::Tool {
            content,
            is_error: true,
            ..
        } => Err(content["error"].as_str().unwrap().to_string()),
        Message::Tool { content, .. } => Ok(content.clone()),
        _ => panic!("not a tool message"),
    }
}

#[test]
fn the_servers_tools_reach_the_model_prefixed_and_a_call_runs_on_the_server() {
    let server = Rc::new(Server::default());
    let (w, call) = echoed(&server, "hi");

    let offered = &w.model.seen()[0].tools;
    for tool in [
        "files__echo",
        "files__wipe",
        "files__fail",
        "files__measure",
    ] {
        assert!(offered.contains(&tool.to_string()), "{tool} in {offered:?}");
    }
    assert_eq!(
        offered.len(),
        4,
        "a name that is not valid prefixed is left out"
    );
    let problems = w.host.logs_at(Level::Warn);
    assert!(problems.iter().any(|(event, fields)| {
        event == "run_tools_problem"
            && fields["problem"]
                .as_str()
                .unwrap()
                .contains("not.valid here")
    }));

    assert_eq!(
        tool_result(&result_of(&w, &call.id)),
        Ok(json!({ "text": "echo: hi" }))
    );
    assert_eq!(server.calls("echo"), 1);
    assert_eq!(server.sessions.get(), 1, "one session for the drive");
    assert_eq!(
        server.methods(),
        [
            "initialize",
            "notifications/initialized",
            "tools/list",
            "tools/list",
            "tools/call"
        ],
        "the list is read page by page, once"
    );
    let received = server.received.borrow();
    assert!(
        received[1..]
            .iter()
            .all(|(session, _)| session.as_deref() == Some("s1"))
    );
}

#[test]
fn a_destructive_tool_waits_for_approval_and_runs_once_after_it() {
    let server = Rc::new(Server::default());
    let w = world(files(&server));
    let r = w.runner("p1");
    let call = w.model.call("files__wipe", json!({}));
    w.model.calls(vec![call.clone()]).text("Wiped.");
    w.create(&r, "ops", "wipe it");
    assert!(matches!(drive(&r), Progress::Suspended { .. }));
    assert_eq!(w.pending()[0].kind, PendingKind::Approval);
    assert_eq!(server.calls("wipe"), 0, "nothing runs before approval");

    // Another process resumes it: it lists again, in the MCP session the session's
    // vault kept.
    let r2 = w.runner("p2");
    w.approve(&r2, &call.id, true, None);
    assert_eq!(drive(&r2), Progress::Idle(SessionStatus::Completed));
    assert_eq!(server.calls("wipe"), 1);
    assert_eq!(server.sessions.get(), 1, "the same MCP session");
    assert_eq!(
        tool_result(&result_of(&w, &call.id)),
        Ok(json!({ "text": "wiped" }))
    );
}

#[test]
fn the_agent_chooses_over_the_annotations_and_its_lists_filter_the_tools() {
    let server = Rc::new(Server::default());
    let mcp = files(&server)
        .prefix("f_")
        .deny(["fail"])
        .approve_never("wipe")
        .approve_when("echo", |args: &Value, _state: &Value| {
            args["text"] == "loud"
        });
    let w = world(mcp);
    let r = w.runner("p1");
    let (quiet, loud) = (
        w.model.call("f_echo", json!({ "text": "a" })),
        w.model.call("f_echo", json!({ "text": "loud" })),
    );
    let wipe = w.model.call("f_wipe", json!({}));
    w.model
        .calls(vec![wipe.clone(), quiet.clone(), loud.clone()])
        .text("Ok.");
    w.create(&r, "ops", "go");
    assert!(matches!(drive(&r), Progress::Suspended { .. }));
    let pending: Vec<_> = w.pending().into_iter().map(|p| p.tool_call_id).collect();
    assert_eq!(
        pending,
        std::slice::from_ref(&loud.id),
        "only the call the predicate picks waits"
    );
    assert_eq!(
        server.calls("wipe"),
        1,
        "the agent said wipe needs no approval"
    );
    assert!(
        !w.model.seen()[0].tools.contains(&"f_fail".to_string()),
        "denied"
    );

    let allowed = files(&server).allow(["echo"]);
    let w = world(allowed);
    let r = w.runner("p1");
    w.model.text("Hello.");
    w.create(&r, "ops", "hi");
    drive(&r);
    assert_eq!(w.model.seen()[0].tools, ["files__echo"]);
}

#[test]
fn error_results_structured_content_and_progress_reach_the_model_and_the_stream() {
    let server = Rc::new(Server::default());
    server.streams.set(true);
    let w = world(files(&server));
    let r = w.runner("p1");
    let (fail, measure) = (
        w.model.call("files__fail", json!({})),
        w.model.call("files__measure", json!({})),
    );
    w.model
        .calls(vec![fail.clone(), measure.clone()])
        .text("Done.");
    w.create(&r, "ops", "measure");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    assert_eq!(
        tool_result(&result_of(&w, &fail.id)),
        Err("the disk is on fire".into())
    );
    assert_eq!(
        tool_result(&result_of(&w, &measure.id)),
        Ok(json!({ "cm": 12 }))
    );
    let progress: Vec<_> = w
        .chunks()
        .into_iter()
        .filter_map(|c| match c {
            ChunkBody::Custom { event_name, data } if event_name == "mcp_progress" => Some(data),
            _ => None,
        })
        .collect();
    assert_eq!(progress.len(), 2, "one per streamed call: {progress:?}");
    assert_eq!(progress[0]["server"], "files");
    assert_eq!(progress[0]["progress"]["total"], 2);
}

#[test]
fn a_session_the_server_forgot_is_initialised_again_and_the_call_goes_through() {
    let server = Rc::new(Server::default());
    let w = world(files(&server).tools_max_age(std::time::Duration::from_secs(3600)));
    let r = w.runner("p1");
    let first = w.model.call("files__echo", json!({ "text": "one" }));
    w.model.calls(vec![first]).text("One.");
    w.create(&r, "ops", "one");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));

    server.forgotten.borrow_mut().push("s1".into());
    let second = w.model.call("files__echo", json!({ "text": "two" }));
    w.model.calls(vec![second.clone()]).text("Two.");
    block(r.send_messages(SESSION, vec![Message::user("two")], None, None)).unwrap();
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    assert_eq!(
        tool_result(&result_of(&w, &second.id)),
        Ok(json!({ "text": "echo: two" }))
    );
    assert_eq!(server.sessions.get(), 2);
    let methods = server.methods();
    assert_eq!(
        methods.iter().filter(|m| *m == "tools/list").count(),
        2,
        "the list was kept: {methods:?}"
    );
}

#[test]
fn a_server_that_fails_gives_no_tools_and_a_logged_reason_and_the_run_goes_on() {
    for (status, code) in [(503, "is unavailable"), (401, "unauthorized")] {
        let server = Rc::new(Server::default());
        server.down.set(Some(status));
        let w = world(files(&server));
        let r = w.runner("p1");
        w.model.text("I cannot reach the files server.");
        w.create(&r, "ops", "hi");
        assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
        assert!(w.model.seen()[0].tools.is_empty());
        let problems = w.host.logs_at(Level::Warn);
        assert!(
            problems
                .iter()
                .any(|(_, f)| f["problem"].as_str().is_some_and(|p| p.contains(code))),
            "{status}: {problems:?}"
        );
    }
}

#[test]
fn a_listing_that_fails_once_is_tried_again_and_a_call_is_not() {
    // The first request (initialize) meets a 503: the listing is tried again.
    let server = Rc::new(Server::default());
    server.fail_at.set(Some(1));
    let (w, call) = echoed(&server, "once");
    assert_eq!(w.model.seen()[0].tools.len(), 4, "listed on the second try");
    let problems = w.host.logs_at(Level::Warn);
    let unavailable = |(_, f): &(String, Value)| {
        f["problem"]
            .as_str()
            .is_some_and(|p| p.contains("unavailable"))
    };
    assert!(!problems.iter().any(unavailable), "{problems:?}");
    assert_eq!(
        tool_result(&result_of(&w, &call.id)),
        Ok(json!({ "text": "echo: once" }))
    );

    // The call (the fifth request, after initialize, initialized and two pages) meets
    // it: a call changes things at the server, so its failure is the model's to see.
    let server = Rc::new(Server::default());
    server.fail_at.set(Some(5));
    let (w, call) = echoed(&server, "busy");
    assert_eq!(server.calls("echo"), 1, "the call was sent once");
    let error = tool_result(&result_of(&w, &call.id)).unwrap_err();
    assert!(error.contains("unavailable"), "{error}");
}

#[test]
fn definitions_that_could_collide_are_refused() {
    let server = || Rc::new(Server::default());
    let local = Tool::raw(
        "files__mine",
        "mine",
        json!({ "type": "object" }),
        |_, _| async { Ok::<_, ToolError>(json!({})) },
    );
    let refused = |builder: helix_edge_core::agent::AgentBuilder| match builder.build() {
        Err(DefinitionError::InvalidMcpServer { reason, .. }) => reason,
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("built"),
    };
    let reason = refused(Agent::builder("a").tool(local).mcp_server(files(&server())));
    assert!(reason.contains("files__mine"), "{reason}");
    let twice = Agent::builder("a")
        .mcp_server(files(&server()))
        .mcp_server(files(&server()));
    assert!(refused(twice).contains("twice"));
    let bad = Agent::builder("a").mcp_server(files(&server()).prefix("no spaces"));
    assert!(refused(bad).contains("prefix"));
    let nested = Agent::builder("a")
        .mcp_server(files(&server()).prefix("f_"))
        .mcp_server(
            McpServer::new("other", "https://mcp.test/2", Rc::new(Wire(server()))).prefix("f_x_"),
        );
    let nested = match nested.build() {
        Err(DefinitionError::InvalidMcpServer { reason, .. }) => reason,
        _ => panic!("a prefix that starts another is refused"),
    };
    assert!(nested.contains("starts another"), "{nested}");
}

#[test]
fn a_call_that_hangs_is_cancelled_at_the_server_and_garbage_or_a_huge_answer_is_an_error() {
    let server = Rc::new(Server::default());
    let w = world(files(&server).timeout(std::time::Duration::from_secs(2)));
    let r = w.runner("p1");
    let calls: Vec<_> = ["hang", "garbage", "huge"]
        .iter()
        .map(|text| w.model.call("files__echo", json!({ "text": text })))
        .collect();
    w.model.calls(calls.clone()).text("Done.");
    w.create(&r, "ops", "go");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    let errors: Vec<_> = calls
        .iter()
        .map(|c| tool_result(&result_of(&w, &c.id)).unwrap_err())
        .collect();
    assert!(
        errors[0].contains("cancelled") && errors[0].contains("2000 ms"),
        "{}",
        errors[0]
    );
    assert!(
        errors[1].contains("broke the protocol") && errors[1].contains("not JSON"),
        "{}",
        errors[1]
    );
    assert!(errors[2].contains("larger than"), "{}", errors[2]);

    let received = server.received.borrow();
    let hung = received
        .iter()
        .find(|(_, m)| m["params"]["arguments"]["text"] == "hang")
        .unwrap();
    let cancelled: Vec<_> = received
        .iter()
        .filter(|(_, m)| m["method"] == "notifications/cancelled")
        .collect();
    assert_eq!(cancelled.len(), 1, "only the hung call is cancelled");
    assert_eq!(cancelled[0].1["params"]["requestId"], hung.1["id"]);
}
