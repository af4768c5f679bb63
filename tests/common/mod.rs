//! A world for end-to-end runs of the core: an in-memory store, a journal, a manual
//! clock and a scripted model, plus test agents whose tools count their executions.
//! Every check that holds for any run lives here (`assert_consistent`).

#![allow(dead_code)]

pub mod children;

use futures::task::ArcWake;
use helix_edge::agent::{Agent, Agents};
use helix_edge::chunk::{ChunkBody, StreamEvent};
use helix_edge::error::ToolError;
use helix_edge::host::ManualHost;
use helix_edge::journal::MemoryJournal;
use helix_edge::model::OneModel;
use helix_edge::runner::{CreateSession, Progress, Runner, RunnerConfig};
use helix_edge::scripted::ScriptedModel;
use helix_edge::state::PatchOp;
use helix_edge::store::{MemoryStore, Store};
use helix_edge::tool::{Tool, ToolContext};
use reference_agents::{AddNote, AskUser, DeleteFile, SendEmail, add_note_tool};
use serde_json::{Value, json};
use std::cell::RefCell;
use std::future::Future;
use std::pin::{Pin, pin};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

pub const SESSION: &str = "s1";
pub const CLIENT_DEADLINE_MS: u64 = 1_000;

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

/// An agent for plans: `fetch_order` → `check_order` (approval when the total is over
/// 100) → `store_order`, each storing its result where the model says.
pub fn planner(exec: &Executions) -> Agent {
    let (e1, e2, e3) = (exec.clone(), exec.clone(), exec.clone());
    let any: Vec<String> = Vec::new();
    Agent::builder("planner")
        .system_prompt("plan")
        .state::<PlanState>()
        .tool(
            Tool::new("fetch_order", "d", move |i: FetchOrder, _| {
                let e = e1.clone();
                async move {
                    e.record(format!("fetch_order {}", i.id));
                    let total = if i.id == "big" { 250.0 } else { 42.5 };
                    Ok::<_, ToolError>(json!({ "id": i.id, "total": total }))
                }
            })
            .output_paths(any.clone()),
        )
        .tool(
            Tool::new("check_order", "d", move |i: CheckOrder, _| {
                let e = e2.clone();
                async move {
                    e.record(format!("check_order {} {}", i.order_id, i.total));
                    Ok::<_, ToolError>(json!({ "ok": true, "orderId": i.order_id }))
                }
            })
            .approval_when(|i: &CheckOrder, _| i.total > 100.0)
            .output_paths(any.clone()),
        )
        .tool(
            Tool::new("store_order", "d", move |i: StoreOrder, _| {
                let e = e3.clone();
                async move {
                    e.record(format!("store_order {} {}", i.order["id"], i.check["ok"]));
                    Ok::<_, ToolError>(json!({ "stored": i.order["id"] }))
                }
            })
            .output_paths(["/stored/-"]),
        )
        .tool(
            Tool::new(
                "echo",
                "d",
                |i: Value, _| async move { Ok::<_, ToolError>(i) },
            )
            .no_state_refs(),
        )
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

/// Lets other tasks run once.
pub async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            return Poll::Ready(());
        }
        yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await
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

/// A request to create the test session.
pub fn create_request(agent: &str, message: &str) -> CreateSession {
    CreateSession::new(SESSION, agent, message)
}

pub struct World {
    pub store: Rc<MemoryStore>,
    pub journal: Rc<MemoryJournal>,
    pub host: Rc<ManualHost>,
    pub model: Rc<ScriptedModel>,
    pub exec: Executions,
    pub agents: Agents,
}

impl World {
    pub fn new() -> Self {
        let exec = Executions::default();
        let agents = Agents::new()
            .with(tester(&exec))
            .and_then(|a| a.with(summarizer()))
            .and_then(|a| a.with(reference_agents::assistant()?))
            .unwrap();
        let agents = agents.with(planner(&exec)).unwrap();
        Self {
            store: Rc::new(MemoryStore::yielding()),
            journal: Rc::new(MemoryJournal::new()),
            host: Rc::new(ManualHost::new(1_795_000_000_000, "")),
            model: Rc::new(ScriptedModel::new()),
            exec,
            agents,
        }
    }

    /// A runner of process `instance` over this world's store and journal.
    pub fn runner(&self, instance: &str) -> Runner<Rc<MemoryStore>> {
        Runner::new(
            self.store.clone(),
            self.agents.clone(),
            Rc::new(OneModel(self.model.clone())),
            self.journal.clone(),
            self.host.clone(),
            RunnerConfig::new(instance),
        )
    }

    /// A runner that shares nothing with the others but the store (and the model).
    pub fn stranger(&self, instance: &str) -> (Runner<Rc<MemoryStore>>, Rc<MemoryJournal>) {
        let journal = Rc::new(MemoryJournal::new());
        let runner = Runner::new(
            self.store.clone(),
            self.agents.clone(),
            Rc::new(OneModel(self.model.clone())),
            journal.clone(),
            Rc::new(ManualHost::new(self.host_now(), instance)),
            RunnerConfig::new(instance),
        );
        (runner, journal)
    }

    fn host_now(&self) -> u64 {
        use helix_edge::host::Host;
        self.host.now_ms()
    }

    pub fn create(&self, runner: &Runner<Rc<MemoryStore>>, agent: &str, message: &str) {
        block(runner.create(create_request(agent, message))).unwrap();
    }

    pub fn session(&self) -> helix_edge::store::Loaded {
        block(self.store.load(SESSION)).unwrap().unwrap()
    }

    pub fn messages(&self) -> Vec<helix_edge::message::Message> {
        block(self.store.messages(SESSION, 0, 1_000)).unwrap()
    }

    pub fn chunks(&self) -> Vec<ChunkBody> {
        chunks_of(&self.journal.events())
    }
}

pub fn chunks_of(events: &[StreamEvent]) -> Vec<ChunkBody> {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Chunk(c) => Some(c.body.clone()),
            _ => None,
        })
        .collect()
}

/// Runs a future that must complete without waiting on anything.
pub fn block<F: Future>(f: F) -> F::Output {
    futures::executor::block_on(f)
}

/// Drives until the session stops moving.
pub fn drive(runner: &Runner<Rc<MemoryStore>>) -> Progress {
    block(runner.drive(SESSION, 100)).unwrap()
}

/// A waker that records that it was woken.
struct Flag(AtomicBool);

impl ArcWake for Flag {
    fn wake_by_ref(flag: &Arc<Self>) {
        flag.0.store(true, Ordering::SeqCst);
    }
}

/// Polls `f` while something wakes it; `None` once it waits on nothing that comes.
fn poll_while_woken<F: Future>(mut f: Pin<&mut F>, flag: &Arc<Flag>) -> Option<F::Output> {
    let waker = futures::task::waker(flag.clone());
    let mut cx = Context::from_waker(&waker);
    while flag.0.swap(false, Ordering::SeqCst) {
        if let Poll::Ready(out) = f.as_mut().poll(&mut cx) {
            return Some(out);
        }
    }
    None
}

/// Polls `f` while it makes progress; `None` if it stalls waiting on something that
/// never comes (a hung model or tool).
pub fn run_until_stalled<F: Future>(f: F) -> Option<F::Output> {
    poll_while_woken(pin!(f), &Arc::new(Flag(AtomicBool::new(true))))
}

/// Drives; each time the drive stalls the clock moves `step_ms` forward (firing the
/// timers it passes), at most `steps` times.
pub fn drive_advancing(
    world: &World,
    runner: &Runner<Rc<MemoryStore>>,
    step_ms: u64,
    steps: u32,
) -> Progress {
    let flag = Arc::new(Flag(AtomicBool::new(true)));
    let mut f = pin!(runner.drive(SESSION, 100));
    for _ in 0..=steps {
        if let Some(out) = poll_while_woken(f.as_mut(), &flag) {
            return out.unwrap();
        }
        world.host.advance(step_ms);
    }
    panic!("the drive still waits after {steps} steps of {step_ms} ms");
}

/// Drives until the drive hangs, then drops it: a process that dies mid-step.
pub fn drive_and_crash(runner: &Runner<Rc<MemoryStore>>) {
    let outcome = run_until_stalled(runner.drive(SESSION, 100));
    assert!(
        outcome.is_none(),
        "the drive was expected to hang, but finished: {outcome:?}"
    );
}

/// Replays every `state_patch` in the stream (honouring `stream_resync`, although the
/// runner never puts an unconfirmed patch in the stream) from `initial`.
pub fn replay(events: &[StreamEvent], initial: &Value) -> Value {
    let mut state = initial.clone();
    for body in chunks_of(events) {
        if let ChunkBody::StatePatch { patches } = body {
            let patch: json_patch::Patch =
                serde_json::from_value(serde_json::to_value(&patches).unwrap()).unwrap();
            json_patch::patch(&mut state, &patch).unwrap();
        }
    }
    state
}

/// What must hold after any run: the stream's patches replay to the stored state, the
/// stream has no `end`/`fail` before the last terminal one, tool call ids are answered
/// exactly once in the transcript, and messages are contiguous.
pub fn assert_consistent(world: &World, initial: &Value) {
    let session = world.session();
    assert_eq!(
        replay(&world.journal.events(), initial),
        session.state,
        "replayed patches == stored state"
    );
    let messages = world.messages();
    assert_eq!(
        messages.len() as u64,
        session.head.message_count,
        "transcript length matches the head"
    );
    let mut answered = std::collections::HashMap::new();
    for m in &messages {
        if let helix_edge::message::Message::Tool { tool_call_id, .. } = m {
            *answered.entry(tool_call_id.clone()).or_insert(0) += 1;
        }
    }
    assert!(
        answered.values().all(|n| *n == 1),
        "every call is answered at most once: {answered:?}"
    );
    let patches_ok = chunks_of(&world.journal.events()).iter().all(|c| match c {
        ChunkBody::StatePatch { patches } => {
            !patches.is_empty() && patches.iter().all(|p| !p.path().is_empty())
        }
        _ => true,
    });
    assert!(
        patches_ok,
        "state patches are non-empty and never replace the root"
    );
}

pub fn patch_paths(world: &World) -> Vec<String> {
    world
        .chunks()
        .into_iter()
        .flat_map(|c| match c {
            ChunkBody::StatePatch { patches } => patches
                .iter()
                .map(|p| PatchOp::path(p).to_string())
                .collect(),
            _ => Vec::new(),
        })
        .collect()
}
