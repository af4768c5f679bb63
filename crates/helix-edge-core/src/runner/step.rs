//! One model step: build the prompt, call the model (streaming its deltas as chunks),
//! plan the tool calls, run them — first the server, approval-gated, client and
//! sub-agent calls in dependency order ([`super::plan`]: in parallel, from the pre-step
//! state, when none uses what another stores); then `finish_with` calls in order, seeing
//! those writes — and commit the assistant message, the results, the merged state
//! writes, the run bookkeeping and a checkpoint in one write. Approval-gated and client
//! calls become durable pending calls. When the run goes on, that write goes out
//! together with the next model call ([`super::Ahead`]).

use super::calls::{Plan, normalize_calls, plan};
use super::commit::Outcome;
use super::emit::Emitter;
use super::exec::result_hooks;
use super::outcome::Stepped;
use super::plan::{Ran, StepCalls, prepare_call};
use super::{Live, RunError, Runner};
use crate::agent::Agent;
use crate::chunk::ChunkBody;
use crate::error::{Coded, ErrorInfo, ToolError};
use crate::host::Level;
use crate::host::LogValue::{Num, Str};
use crate::message::Message;
use crate::model::{Delta, ModelRequest};
use crate::state::{PatchOp, merge};
use crate::store::{PendingKind, Store};
use futures::future::try_join;
use serde_json::{Value, json};
use std::cell::RefCell;

impl<S: Store> Runner<S> {
    pub(crate) async fn model_step(&self, live: &mut Live, agent: &Agent) -> Result<(), RunError> {
        let step = live.head.step_count + 1;
        let emitter = self.emitter(&live.head, Some(step));
        let model = match self.models.model_for(agent.model()) {
            Ok(model) => model,
            Err(e) => {
                self.settle(live).await?;
                return self.fail_run(live, ErrorInfo::of(&e)).await;
            }
        };
        let ahead = live.ahead.take();
        // Notices of non-blocking children's ended turns: in this step's prompt, and
        // committed with it before its assistant message.
        #[cfg(feature = "persistent-children")]
        let notices = self.notices(live, agent).await?;
        #[cfg(not(feature = "persistent-children"))]
        let notices: Vec<Message> = Vec::new();
        let with_notices;
        let prompt = if notices.is_empty() {
            &live.transcript
        } else {
            with_notices = [live.transcript.as_slice(), &notices].concat();
            &with_notices
        };
        let request = ModelRequest {
            system: agent.system_prompt(&live.state),
            messages: prompt,
            tools: agent.tool_specs(),
            settings: agent.model(),
            session_id: &live.head.id,
            abort: self.abort.borrow().clone(),
        };
        let show = |delta: Delta| {
            emitter.chunk(match delta {
                Delta::Text(delta) => ChunkBody::TextDelta { delta },
                Delta::Thinking {
                    content,
                    is_complete,
                } => ChunkBody::Thinking {
                    content,
                    is_complete,
                },
            });
        };
        // Deltas wait while the previous step's commit is out, to follow its batch.
        let held = RefCell::new(ahead.as_ref().map(|_| Vec::new()));
        let mut on_delta = |delta: Delta| match held.borrow_mut().as_mut() {
            Some(waiting) => waiting.push(delta),
            None => show(delta),
        };
        let started = self.host.now_ms();
        // The commit is polled first: one refused before it is sent (too large) stops the
        // model call from going out at all, and one that fails later cancels it. The
        // model's answer is only good for a durable transcript.
        let land = async {
            let Some(ahead) = ahead else {
                return Ok(None);
            };
            match self.land_ahead(&live.head.id, ahead).await {
                (Ok(version), kept) => {
                    let waiting = held.borrow_mut().take();
                    waiting.into_iter().flatten().for_each(show);
                    Ok(Some((version, kept)))
                }
                (Err(e), kept) => Err((e, kept)),
            }
        };
        let generate = async { Ok(model.generate(request, &mut on_delta).await) };
        let result = match try_join(land, generate).await {
            Ok((landed, result)) => {
                if let Some((version, kept)) = landed {
                    self.landed(live, kept, Ok(version))?;
                }
                result
            }
            Err((e, kept)) => return self.landed(live, kept, Err(e)),
        };
        let ms = self.host.now_ms().saturating_sub(started);
        let turn = match result {
            Ok(turn) => turn,
            Err(e) => {
                let fields = [
                    ("step", Num(step.into())),
                    ("ms", Num(ms)),
                    ("code", Str(e.code())),
                ];
                self.log(live, Level::Warn, "model_call_failed", &fields);
                return self.fail_run(live, ErrorInfo::of(&e)).await;
            }
        };
        let usage = turn.usage;
        let fields = [
            ("step", Num(step.into())),
            ("ms", Num(ms)),
            ("inputTokens", Num(usage.input_tokens)),
            ("outputTokens", Num(usage.output_tokens)),
            ("cacheReadTokens", Num(usage.cache_read_tokens)),
            ("stop", Str(turn.stop.as_str())),
        ];
        self.log(live, Level::Debug, "model_call", &fields);

        // An answer that did not finish (cut off, filtered, refused, failed) keeps its
        // text; its tool calls are not trusted and never run.
        let stopped = turn.stop.error(turn.stop_detail);
        let tool_calls = if stopped.is_some() {
            Vec::new()
        } else {
            turn.tool_calls
        };
        #[cfg_attr(not(feature = "persistent-children"), allow(unused_mut))]
        let mut calls = normalize_calls(tool_calls, &live.transcript, step, &emitter);
        #[cfg(feature = "persistent-children")]
        self.name_children(live, agent, &mut calls).await?;
        // Usage and the stop reason are recorded per step, on the step's message.
        let metadata =
            serde_json::to_value(json!({ "usage": turn.usage, "stopReason": turn.stop }))
                .ok()
                .and_then(|v| v.as_object().cloned());
        let assistant = Message::Assistant {
            content: turn.text,
            tool_calls: calls.clone(),
            thinking: turn.thinking,
            metadata,
        };
        if let Some(h) = agent.hooks() {
            h.on_message(&assistant);
        }
        let plans: Vec<Plan> = calls.iter().map(|c| plan(agent, c, &live.state)).collect();

        // Regular, approval-gated, client and sub-agent calls run as a plan: in
        // dependency order (one round from the pre-step state when none depends on
        // another), each prepared and its approval decided just before it runs.
        let planned: Vec<bool> = plans.iter().map(|p| p.in_plan()).collect();
        let mut ran = Ran::new(calls.len());
        match StepCalls::new(agent, &calls, &planned) {
            Ok(mut step_calls) => {
                let todo: Vec<usize> = (0..calls.len()).filter(|&i| planned[i]).collect();
                self.run_calls(live, agent, &mut step_calls, &todo, &mut ran, &emitter)
                    .await?;
            }
            Err(invalid) => {
                for (i, call) in calls.iter().enumerate() {
                    if planned[i] || plans[i] == Plan::FinishWith {
                        ran.results[i] = Some(self.end_without_running(call, &invalid, &emitter));
                    }
                }
            }
        }
        let Ran {
            mut results,
            writes: mut call_writes,
            mut pending,
            ops: mut state_ops,
        } = ran;

        // Then finish_with calls in order, each seeing every write before it.
        let mut output: Option<Value> = None;
        for (i, call) in calls.iter().enumerate() {
            if plans[i] != Plan::FinishWith || results[i].is_some() {
                continue;
            }
            let Some(tool) = agent.tool(&call.name) else {
                continue;
            };
            if output.is_some() {
                let skipped = ToolError::Skipped("the run already finished".into());
                results[i] = Some(self.end_without_running(call, &skipped, &emitter));
                continue;
            }
            let (ready, stored_at) = match prepare_call(agent, tool, call, &live.state) {
                Ok(prepared) => prepared,
                Err(err) => {
                    results[i] = Some(self.end_without_running(call, &err, &emitter));
                    continue;
                }
            };
            let run = [(i, &ready, stored_at.as_deref())];
            let ran = self
                .run_parallel(agent, &run, &mut live.state, &emitter)
                .await;
            let Some((_, outcome)) = ran.into_iter().next() else {
                continue; // the tool exists: it ran
            };
            if agent.hooks().is_some() {
                call_writes[i] = outcome.writes.clone();
            }
            self.merge_into(
                &mut live.state,
                vec![outcome.writes],
                &mut state_ops,
                &emitter,
            );
            output = outcome.value;
            results[i] = Some(outcome.message);
        }

        // Structured output and unknown tools.
        for (i, call) in calls.iter().enumerate() {
            match plans[i] {
                Plan::Finish => results[i] = Some(self.finish_output(agent, call, &mut output)),
                Plan::Unknown => {
                    let err = ToolError::NotFound(call.name.clone());
                    results[i] = Some(self.end_without_running(call, &err, &emitter));
                }
                _ => {}
            }
        }

        let mut head = live.head.clone();
        head.run.usage.add(&turn.usage);
        let mut messages = notices;
        messages.push(assistant);
        let text = match messages.last() {
            Some(Message::Assistant { content, .. }) => content.as_str(),
            _ => "",
        };
        let outcome = if let Some(stopped) = stopped {
            self.after_error_stop(live, agent, &mut head, &mut results, stopped)
        } else if output.is_some() {
            // The run ends: gated and deferred calls of the same step never run, but its
            // sub-agents always do, and the run completes with this output once they
            // have ended.
            pending.retain(|p| p.kind == PendingKind::Child);
            let skipped = ToolError::Skipped("the run finished first".into());
            for (i, call) in calls.iter().enumerate() {
                let child = pending.iter().any(|p| p.tool_call_id == call.id);
                if results[i].is_none() && !child {
                    results[i] = Some(self.end_without_running(call, &skipped, &emitter));
                }
            }
            if pending.is_empty() {
                Outcome::Complete(output)
            } else {
                head.run.deferred_output = output;
                Outcome::Suspend(pending)
            }
        } else if !pending.is_empty() {
            Outcome::Suspend(pending)
        } else if calls.is_empty() {
            self.after_text(agent, &mut head, &mut results, text)
        } else {
            let step = Stepped {
                text,
                calls: &calls,
                results: &results,
                state: &live.state,
            };
            self.after_calls(agent, &head, step)
        };
        result_hooks(agent, &calls, &results, &call_writes);
        messages.extend(results.into_iter().flatten());
        self.ensure_not_aborted()?;
        let call = (turn.usage, turn.stop);
        self.commit_step(
            live, agent, head, step, call, messages, state_ops, outcome, &emitter,
        )
        .await
    }

    /// Merges tool writes into `state`, reporting writes that no longer apply.
    pub(crate) fn merge_into(
        &self,
        state: &mut Value,
        writes: Vec<Vec<PatchOp>>,
        ops: &mut Vec<PatchOp>,
        emitter: &Emitter,
    ) {
        let merged = merge(state, writes);
        for (op, err) in merged.conflicts {
            emitter.chunk(ChunkBody::Error {
                code: err.code().into(),
                message: format!("A tool's write to '{}' was dropped: {err}", op.path()),
                recoverable: true,
            });
        }
        ops.extend(merged.applied);
    }
}
