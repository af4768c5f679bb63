//! Running server calls ([`ToolRunner`]): each with its context, its timeout and its
//! chunks, in parallel from one shared state. Results are messages the model sees; a
//! failed call's state writes are discarded. Calls that end without running are
//! [`super::results`]'.

use super::ToolEnd;
use super::emit::Emitter;
use super::hooked::hook_writes;
use super::results::{decided, result_message, tool_end};
use crate::abort::AbortSignal;
use crate::agent::{Agent, Hook};
use crate::chunk::{ChunkBody, Executor};
use crate::error::{Coded, ToolError};
use crate::host::{Host, Level, LogValue};
use crate::journal::{Suspension, Vault};
use crate::message::{Message, ToolCall};
use crate::state::{PatchOp, merge};
use crate::store::{Owner, PendingCall};
use crate::tool::{Tool, ToolContext, Wait};
use futures::future::{Either, join_all, select};
use serde_json::Value;
use std::rc::Rc;

/// What one call produced.
pub(crate) struct CallOutcome {
    /// The tool message for the transcript.
    pub message: Message,
    /// Its state writes (empty when it failed).
    pub writes: Vec<PatchOp>,
    /// Its result, when it succeeded.
    pub value: Option<Value>,
    /// What it asked the user mid-call, when it did (its message is then a
    /// `tool_waiting` error, for a caller that cannot suspend on it; no `tool_end` went).
    pub wait: Option<Wait>,
}

/// A server call about to run.
pub(crate) struct Run<'a> {
    /// Its index (in the step or the resumption).
    pub index: usize,
    /// The call, with the arguments it runs with.
    pub call: &'a ToolCall,
    /// Where its result is stored, if anywhere.
    pub output: Option<&'a str>,
    /// Whether it runs because it was approved.
    pub approved: bool,
    /// The user who approved it, when one did.
    pub decided_by: Option<&'a Owner>,
    /// The user's answer to what it asked mid-call, when it runs again with it.
    pub answer: Option<&'a Value>,
    /// Whether it may ask the user mid-call (a step's or a resumption's own call; not
    /// a finishing call or an instance of one, which fail with `tool_waiting`).
    pub may_wait: bool,
}

impl<'a> Run<'a> {
    /// Call `call` at `index`, storing its result at `output`.
    pub(crate) fn new(index: usize, call: &'a ToolCall, output: Option<&'a str>) -> Self {
        Self {
            index,
            call,
            output,
            approved: false,
            decided_by: None,
            answer: None,
            may_wait: false,
        }
    }

    /// The pending call it is once it asked the user `wait` mid-call, at `since`.
    pub(crate) fn asked(&self, wait: Wait, since: u64) -> PendingCall {
        PendingCall {
            tool_call_id: self.call.id.clone(),
            tool_name: self.call.name.clone(),
            arguments: self.call.arguments.clone(),
            kind: wait.kind,
            deadline: None,
            since,
            output_path: self.output.map(str::to_string),
            approvers: None,
            request: Some(wait.request),
        }
    }
}

/// Runs an agent's server calls for one drive: its clock and timers, the drive's abort
/// signal (each call gets a child of it), and where the session's vault is kept.
pub(crate) struct ToolRunner<'a> {
    pub host: &'a Rc<dyn Host>,
    pub abort: AbortSignal,
    pub suspension: &'a Rc<dyn Suspension>,
    pub observer: &'a Rc<dyn super::Observer>,
}

impl ToolRunner<'_> {
    /// Session `session_id`'s vault.
    fn vault(&self, session_id: &str) -> Vault {
        Vault::new(session_id, self.suspension.clone())
    }

    /// Runs server calls in parallel, all from `state` (the state before them: taken
    /// while they run, put back after), and returns their outcomes with their indexes.
    /// Every server call runs through here.
    pub(crate) async fn run_parallel(
        &self,
        agent: &Agent,
        runs: &[Run<'_>],
        state: &mut Value,
        emitter: &Emitter,
    ) -> Vec<(usize, CallOutcome)> {
        let base = share(state);
        let outcomes = join_all(runs.iter().filter_map(|run| {
            let tool = agent.tool(&run.call.name)?;
            let base = base.clone();
            Some(async move {
                let outcome = self.run_tool(agent, tool, run, base, emitter).await;
                (run.index, outcome)
            })
        }))
        .await;
        *state = unshare(base);
        outcomes
    }

    /// Runs one server call against `base` (the committed state its step started from),
    /// firing `before_tool` and streaming `tool_start`/`tool_end` (a call that runs
    /// again with the user's answer has its `tool_start` already); `run.call` has the
    /// arguments it runs with (references resolved) and `run.output` is where its result
    /// is stored, if anywhere; who approved it is on its result (`metadata.decidedBy`)
    /// and its `tool_end`. The hooks on its result fire later, in call order
    /// ([`Runner::result_hooks`](super::Runner::result_hooks)).
    async fn run_tool(
        &self,
        agent: &Agent,
        tool: &Tool,
        run: &Run<'_>,
        base: Rc<Value>,
        emitter: &Emitter,
    ) -> CallOutcome {
        let Run {
            call,
            output,
            decided_by,
            answer,
            ..
        } = *run;
        // The hook's writes go ahead of the call's, and like them are dropped if the call
        // fails (or waits: it runs, and the hook fires, again). The call does not see them.
        let hook = (Hook::BeforeTool, Some(call));
        let before = hook_writes(&**self.host, agent, hook, base.clone(), emitter).await;
        if answer.is_none() {
            emitter.chunk(ChunkBody::ToolStart {
                tool_call_id: call.id.clone(),
                tool_name: call.name.clone(),
                arguments: call.arguments.clone(),
                executor: Executor::Server,
                deadline: None,
            });
        }
        let (custom, live) = (emitter.clone(), emitter.clone());
        let id = call.id.clone();
        let signal = self.abort.child();
        let ctx = ToolContext::new(
            emitter.session_id(),
            &call.id,
            self.host.now_ms(),
            base.clone(),
            (
                Rc::new(move |event_name, data| {
                    custom.chunk(ChunkBody::Custom { event_name, data });
                }),
                // A write of the call's own writer: checked against its earlier ones.
                Rc::new(move |base, ops| live.live_patch(&id, base, ops, true)),
            ),
            signal.clone(),
            (answer.cloned(), self.vault(emitter.session_id())),
        );
        let started = self.host.now_ms();
        let limit = u64::try_from(agent.tool_timeout(tool).as_millis()).unwrap_or(u64::MAX);
        let running = tool.execute(call.arguments.clone(), ctx.clone());
        let result = match select(running, self.host.sleep(limit)).await {
            Either::Left((result, _)) => result,
            Either::Right(((), _)) => {
                // The call's future is dropped here; work it started elsewhere sees the signal.
                signal.abort();
                Err(ToolError::ExecutionTimedOut { ms: limit })
            }
        };
        let result = result
            .and_then(|value| tool.check_output(&value).map(|()| value))
            .and_then(crate::message::bounded_result);
        let ms = self.host.now_ms().saturating_sub(started);
        let code = result
            .as_ref()
            .err()
            .map_or(LogValue::Null, |e| LogValue::Str(e.code()));
        self.host.log(
            Level::Debug,
            "tool_executed",
            &[
                ("session", LogValue::Str(emitter.session_id())),
                ("run", LogValue::Str(emitter.run_id())),
                ("tool", LogValue::Str(&call.name)),
                ("ms", LogValue::Num(ms)),
                ("success", LogValue::Bool(result.is_ok())),
                ("code", code),
            ],
        );
        let mut writes = Vec::new();
        if result.is_ok() {
            writes = before;
            writes.extend(ctx.take_writes());
        }
        let mut outcome = match result {
            Err(ToolError::Waiting(wait)) if run.may_wait => {
                return CallOutcome {
                    message: Message::tool_error(
                        call,
                        "tool_waiting",
                        "The call waits on the user",
                    ),
                    writes: Vec::new(),
                    value: None,
                    wait: Some(*wait),
                };
            }
            Ok(value) => {
                let (mut message, stored) = result_message(call, value.clone(), output, &base);
                if let Message::Tool { attachments, .. } = &mut message {
                    *attachments = ctx.take_attachments();
                }
                if let Some(op) = &stored {
                    emitter.live_patch(&call.id, &base, vec![op.clone()], false);
                }
                writes.extend(stored);
                CallOutcome {
                    message,
                    writes,
                    value: Some(value),
                    wait: None,
                }
            }
            Err(ToolError::Waiting(_)) => CallOutcome {
                message: Message::tool_error(
                    call,
                    "tool_waiting",
                    "The call asked the user mid-call where it cannot wait (a finishing call, or an instance of _forEach)",
                ),
                writes,
                value: None,
                wait: None,
            },
            Err(err) => CallOutcome {
                message: Message::tool_error(call, err.code(), &err.to_string()),
                writes,
                value: None,
                wait: None,
            },
        };
        decided(&mut outcome.message, decided_by);
        tool_end(call, &outcome.message, decided_by, emitter);
        let end = ToolEnd {
            step: emitter.place().step,
            call,
            result: &outcome.message,
            times: (started, self.host.now_ms()),
            decided_by,
            answer: match (run.approved, answer) {
                (true, _) => "approved",
                (false, Some(_)) => "answered",
                (false, None) => "server",
            },
        };
        self.observer.tool_ended(emitter.session_id(), &end);
        outcome
    }
}

/// Merges tool writes into `state`, appending what applied to `ops` and reporting
/// writes that no longer apply as recoverable `error` chunks.
pub(crate) fn merge_into(
    state: &mut Value,
    writes: Vec<Vec<PatchOp>>,
    ops: &mut Vec<PatchOp>,
    emitter: &Emitter,
) {
    emitter.merging(state, &writes);
    let merged = merge(state, writes);
    emitter.merged(&merged.applied);
    for (op, err) in merged.conflicts {
        emitter.chunk(ChunkBody::Error {
            code: err.code().into(),
            message: format!("A tool's write to '{}' was dropped: {err}", op.path()),
            recoverable: true,
        });
    }
    ops.extend(merged.applied);
}

/// Takes the state out of `slot` to share it read-only with a phase's tools.
fn share(slot: &mut Value) -> Rc<Value> {
    Rc::new(std::mem::take(slot))
}

/// Gets the state back once the phase's tools are done (no copy unless a tool kept a
/// context alive).
fn unshare(base: Rc<Value>) -> Value {
    Rc::try_unwrap(base).unwrap_or_else(|rc| (*rc).clone())
}
