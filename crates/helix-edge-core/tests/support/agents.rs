//! The agents the run loop's tests run: the notes tools and agents of SPEC §6 (as the
//! reference worker has them: `assistant`, `researcher`, `coordinator`), and test agents
//! whose tools record their executions or fail, hang and finish on purpose (`tester`),
//! or store their results as a plan (`planner`).

#![allow(dead_code)]

use helix_edge_core::agent::{Agent, Agents, SavedPlan};
use helix_edge_core::error::{DefinitionError, ToolError};
use helix_edge_core::host::rfc3339;
use helix_edge_core::testing::yield_now;
use helix_edge_core::tool::{ApprovalTool, ServerTool, Tool, ToolContext};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

/// The default deadline of `ask_user`.
pub const ASK_USER_DEADLINE: Duration = Duration::from_secs(300);
/// The `tester` agent's client deadline.
pub const CLIENT_DEADLINE_MS: u64 = 1_000;

/// Input of `add_note`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AddNote {
    /// The note's text.
    pub text: String,
}

/// Input of `get_time`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetTime {}

/// Input of `delete_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteFile {
    /// The file to delete.
    pub path: String,
}

/// Input of `send_email`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendEmail {
    /// Recipients.
    pub to: Vec<String>,
    /// Subject line.
    pub subject: String,
    /// Body text.
    pub body: String,
}

/// Input of `ask_user`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AskUser {
    /// The question to put to the user.
    pub question: String,
}

async fn add_note(input: AddNote, ctx: ToolContext) -> Result<Value, ToolError> {
    ctx.append("/notes", json!({ "text": input.text }))?;
    let count = ctx
        .read(|s| s["notes"].as_array().map_or(0, Vec::len))
        .unwrap_or_default();
    Ok(json!({ "count": count }))
}

/// `add_note`: appends `{"text"}` to `/notes`; answers `{"count": n}`.
pub fn add_note_tool() -> ServerTool {
    Tool::new(
        "add_note",
        "Add a note to the session's list of notes.",
        add_note,
    )
}

/// `delete_file`: approval always; answers `{"deleted": path}`.
pub fn delete_file_tool() -> ApprovalTool {
    Tool::new(
        "delete_file",
        "Delete a file. A human must approve every call.",
        |input: DeleteFile, _| async move { Ok::<_, ToolError>(json!({ "deleted": input.path })) },
    )
    .approval_always()
}

/// Input of `research`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Research {
    /// What to research.
    pub topic: String,
}

/// `researcher` (as SPEC §6's): output `{"summary": string}` through `__finish__`;
/// its one tool, `delete_file`, needs approval (a human-in-the-loop boundary inside a child).
pub fn researcher() -> Result<Agent, DefinitionError> {
    Agent::builder("researcher")
        .description("Researches a topic and reports a summary.")
        .system_prompt(
            "You are a researcher. The user message is a JSON object with a topic. Research it, then call __finish__ \
             with {\"summary\": \"...\"}. Use delete_file only when the topic asks for a file to be deleted.",
        )
        .output_schema(json!({
            "type": "object",
            "properties": { "summary": { "type": "string" } },
            "required": ["summary"],
            "additionalProperties": false
        }))
        .tool(delete_file_tool())
        .build()
}

/// `coordinator` (as SPEC §6's): notes, and `research`, a sub-agent tool running
/// `researcher` whose result is the child's output.
pub fn coordinator() -> Result<Agent, DefinitionError> {
    Agent::builder("coordinator")
        .description("Coordinates research: delegates topics to researcher sub-agents and keeps notes.")
        .system_prompt(
            "You coordinate research. Call research once per topic (calls in one step run in parallel), keep notes \
             with add_note, and answer with what the researchers found.",
        )
        .initial_state(json!({ "notes": [] }))
        .tool(add_note_tool())
        .tool(
            Tool::subagent::<Research>("research", researcher()?)
                .with_description("Research a topic with a researcher sub-agent; returns {\"summary\"}."),
        )
        .build()
}

/// The `assistant` agent with `ask_user`'s deadline set to `ask_deadline`.
pub fn assistant_with_deadline(ask_deadline: Duration) -> Result<Agent, DefinitionError> {
    Agent::builder("assistant")
        .description("A helpful assistant that keeps notes, tells the time, deletes files, sends email and asks questions.")
        .system_prompt(
            "You are a helpful assistant. Use the tools when they help: add_note to remember things, get_time for \
             the current time, delete_file to delete files (a human approves), send_email to send email (a human \
             approves when there are more than 3 recipients), and ask_user when you need the user's input.",
        )
        .initial_state(json!({ "notes": [] }))
        .tool(add_note_tool())
        .tool(Tool::new("get_time", "Get the current time (RFC 3339, UTC).", |_: GetTime, ctx: ToolContext| async move {
            Ok::<_, ToolError>(json!({ "now": rfc3339(ctx.now_ms()) }))
        }))
        .tool(delete_file_tool())
        .tool(
            Tool::new(
                "send_email",
                "Send an email. A human approves emails to more than 3 recipients.",
                |input: SendEmail, _| async move { Ok::<_, ToolError>(json!({ "sent": input.to.len() })) },
            )
            .approval_when(|input: &SendEmail, _| input.to.len() > 3),
        )
        .tool(
            Tool::client::<AskUser>("ask_user", "Ask the user a question; the client answers.")
                .deadline(ask_deadline),
        )
        .build()
}

/// `assistant` (as SPEC §6's).
pub fn assistant() -> Result<Agent, DefinitionError> {
    assistant_with_deadline(ASK_USER_DEADLINE)
}

/// Which tools ran, in order (a durable record in a real deployment).
#[derive(Default, Clone)]
pub struct Executions(Rc<RefCell<Vec<String>>>);

impl Executions {
    pub fn record(&self, what: String) {
        self.0.borrow_mut().push(what);
    }
    pub fn count(&self, prefix: &str) -> usize {
        self.0
            .borrow()
            .iter()
            .filter(|e| e.starts_with(prefix))
            .count()
    }
    pub fn all(&self) -> Vec<String> {
        self.0.borrow().clone()
    }
}

/// The `tester` agent: the reference tools, but recording executions, plus tools that
/// fail, hang, or finish the run.
pub fn tester(exec: &Executions) -> Agent {
    let (e1, e2, e3, e4, e5) = (
        exec.clone(),
        exec.clone(),
        exec.clone(),
        exec.clone(),
        exec.clone(),
    );
    Agent::builder("tester")
        .system_prompt("test")
        .initial_state(json!({"notes": []}))
        .tool(add_note_tool())
        .tool(
            Tool::new("delete_file", "d", move |i: DeleteFile, _| {
                let e = e1.clone();
                async move {
                    e.record(format!("delete_file {}", i.path));
                    Ok::<_, ToolError>(json!({"deleted": i.path}))
                }
            })
            .approval_always(),
        )
        .tool(
            Tool::new("send_email", "d", move |i: SendEmail, _| {
                let e = e2.clone();
                async move {
                    e.record(format!("send_email {}", i.to.len()));
                    Ok::<_, ToolError>(json!({"sent": i.to.len()}))
                }
            })
            .approval_when(|i: &SendEmail, _| i.to.len() > 3),
        )
        .tool(
            Tool::client::<AskUser>("ask_user", "d")
                .deadline(Duration::from_millis(CLIENT_DEADLINE_MS)),
        )
        .tool(Tool::new("fail", "d", |_: Value, _| async {
            Err::<Value, _>(ToolError::failed("it broke"))
        }))
        .tool(Tool::new(
            "note_then_fail",
            "d",
            |i: AddNote, ctx| async move {
                ctx.append("/notes", json!({"text": i.text}))?;
                Err::<Value, _>(ToolError::failed("it broke after writing"))
            },
        ))
        .tool(Tool::new("late_note", "d", |i: AddNote, ctx| async move {
            // Writes after the step's other calls have written.
            for _ in 0..8 {
                yield_now().await;
            }
            ctx.append("/notes", json!({"text": i.text}))?;
            Ok::<_, ToolError>(json!({"ok": true}))
        }))
        .tool(
            Tool::new("hang_after_note", "d", move |i: AddNote, ctx| {
                let e = e3.clone();
                async move {
                    e.record(format!("hang_after_note {}", i.text));
                    ctx.append("/notes", json!({"text": i.text}))?;
                    futures::future::pending::<()>().await;
                    Ok::<_, ToolError>(json!({}))
                }
            })
            .approval_always(),
        )
        .tool(Tool::new(
            "wait_for_abort",
            "d",
            |_: Value, ctx| async move {
                while !ctx.is_aborted() {
                    yield_now().await;
                }
                Err::<Value, _>(ToolError::failed("aborted"))
            },
        ))
        .tool(Tool::new("stuck", "d", |_: Value, ctx| async move {
            STUCK.with_borrow_mut(|s| s.push(ctx));
            futures::future::pending::<()>().await;
            Ok::<_, ToolError>(json!({}))
        }))
        .tool(
            Tool::new("slow", "d", |_: Value, ctx| async move {
                STUCK.with_borrow_mut(|s| s.push(ctx));
                futures::future::pending::<()>().await;
                Ok::<_, ToolError>(json!({}))
            })
            .timeout(Duration::from_millis(SLOW_TIMEOUT_MS)),
        )
        .tool(Tool::new("flaky_note", "d", move |i: AddNote, ctx| {
            let e = e5.clone();
            async move {
                let first = e.count("flaky_note") == 0;
                e.record(format!("flaky_note {}", i.text));
                ctx.append("/notes", json!({"text": i.text}))?;
                if first {
                    futures::future::pending::<()>().await; // the process dies here
                }
                Ok::<_, ToolError>(json!({"ok": true}))
            }
        }))
        .tool(
            Tool::new("finish", "d", move |i: AddNote, ctx| {
                let e = e4.clone();
                async move {
                    e.record("finish".into());
                    let notes = ctx
                        .read(|s| s["notes"].as_array().map_or(0, Vec::len))
                        .unwrap_or_default();
                    Ok::<_, ToolError>(json!({"final": i.text, "notesSeen": notes}))
                }
            })
            .finish_with(),
        )
        .max_steps(6)
        .tool_timeout(Duration::from_millis(TOOL_TIMEOUT_MS))
        .build()
        .unwrap()
}

/// The `planner` agent's state: where its tools store their results.
#[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema, Default)]
pub struct PlanState {
    pub order: Option<Value>,
    pub check: Option<Value>,
    pub stored: Vec<Value>,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct FetchOrder {
    pub id: String,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct CheckOrder {
    pub order_id: String,
    pub total: f64,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct StoreOrder {
    pub order: Value,
    pub check: Value,
}

/// The planner's order tools: `fetch_order` → `check_order` (approval when the total
/// is over 100) → `store_order`, each storing its result where the model says (the
/// last only at `store_paths`, any place when empty).
pub fn order_tools(exec: &Executions, store_paths: &[&str]) -> [Tool; 3] {
    let (e1, e2, e3) = (exec.clone(), exec.clone(), exec.clone());
    let any: Vec<String> = Vec::new();
    [
        Tool::new("fetch_order", "d", move |i: FetchOrder, _| {
            let e = e1.clone();
            async move {
                e.record(format!("fetch_order {}", i.id));
                let total = if i.id == "big" { 250.0 } else { 42.5 };
                Ok::<_, ToolError>(json!({ "id": i.id, "total": total }))
            }
        })
        .output_paths(any.clone())
        .into(),
        Tool::new("check_order", "d", move |i: CheckOrder, _| {
            let e = e2.clone();
            async move {
                e.record(format!("check_order {} {}", i.order_id, i.total));
                Ok::<_, ToolError>(json!({ "ok": true, "orderId": i.order_id }))
            }
        })
        .approval_when(|i: &CheckOrder, _| i.total > 100.0)
        .output_paths(any)
        .into(),
        Tool::new("store_order", "d", move |i: StoreOrder, _| {
            let e = e3.clone();
            async move {
                e.record(format!("store_order {} {}", i.order["id"], i.check["ok"]));
                Ok::<_, ToolError>(json!({ "stored": i.order["id"] }))
            }
        })
        .output_paths(store_paths.iter().copied())
        .into(),
    ]
}

/// The planner's saved plan `store-order`: fetch, check and store the order `orderId`.
pub fn store_order_plan() -> SavedPlan {
    SavedPlan::new("store-order", "Fetch, check and store one order.")
        .input("orderId", "The order's id.")
        .call("fetch", "fetch_order", json!({ "id": "†input.orderId", "_outputPath": "/order" }))
        .call(
            "check",
            "check_order",
            json!({ "order_id": "$state.order.id", "total": "†state.order.total", "_outputPath": "/check" }),
        )
        .call(
            "store",
            "store_order",
            json!({ "order": "$state.order", "check": "$state.check", "_outputPath": "/stored/-" }),
        )
}

/// An agent for plans: the [`order_tools`] (storing only at `/stored/-`), `echo`, and
/// `validate_plan` to check a plan first; its saved plan is [`store_order_plan`].
pub fn planner(exec: &Executions) -> Agent {
    let [fetch, check, store] = order_tools(exec, &["/stored/-"]);
    Agent::builder("planner")
        .system_prompt("plan")
        .state::<PlanState>()
        .tool(fetch)
        .tool(check)
        .tool(store)
        .tool(
            Tool::new(
                "echo",
                "d",
                |i: Value, _| async move { Ok::<_, ToolError>(i) },
            )
            .no_state_refs(),
        )
        .plan_validation()
        .saved_plan(store_order_plan())
        .build()
        .unwrap()
}

/// The `tester` agent's timeout for server tools, and that of its `slow` tool.
pub const TOOL_TIMEOUT_MS: u64 = 30_000;
pub const SLOW_TIMEOUT_MS: u64 = 500;

thread_local! {
    /// The contexts of the calls of `stuck` and `slow` (which never finish), in order.
    pub static STUCK: RefCell<Vec<ToolContext>> = const { RefCell::new(Vec::new()) };
}

/// An agent that must produce `{"summary": string}`.
pub fn summarizer() -> Agent {
    Agent::builder("summarizer")
        .system_prompt("summarize")
        .output_schema(json!({
            "type": "object",
            "properties": {"summary": {"type": "string"}},
            "required": ["summary"],
            "additionalProperties": false
        }))
        .build()
        .unwrap()
}

/// Every agent of the tests' world: `tester`, `summarizer`, `assistant`, `planner`.
pub fn world_agents(exec: &Executions) -> Agents {
    let agents = Agents::new()
        .with(tester(exec))
        .and_then(|a| a.with(summarizer()))
        .and_then(|a| a.with(assistant()?))
        .unwrap();
    agents.with(planner(exec)).unwrap()
}
