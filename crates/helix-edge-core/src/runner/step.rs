//! One model step: build the prompt, call the model (streaming its deltas as chunks),
//! plan the tool calls, run them — first the server, approval-gated, client and child
//! calls in dependency order ([`super::plan`]: in parallel, from the pre-step state,
//! when none uses what another stores); then the finishing calls ([`super::finish`]),
//! seeing those writes, unless they wait for calls a person or a client answers —
//! conclude ([`super::conclude`]) and commit the assistant message, the
//! results, the merged state writes, the run bookkeeping and a checkpoint in one write.
//! Approval-gated, client and child calls become durable pending calls. When the run
//! goes on, that write goes out together with the next model call
//! ([`super::pipeline`]).

use super::INSTANCING;
use super::ModelCall;
use super::calls::{Plan, normalize_calls, plan};
use super::conclude::{Stepped, conclude_step};
use super::emit::Emitter;
use super::finish::{Finishing, finish_waits};
use super::prompted::Prompted;
use super::results::end_without_running;
use super::step_calls::{Ran, StepCalls};
use super::{Live, RunError, Runner};
use crate::agent::{Agent, CALL_EXPANSIONS, Hook, MODEL_LAYERS, RUN_PROMPTS};
use crate::chunk::ChunkBody;
use crate::error::{Coded, ErrorInfo, ToolError};
use crate::host::Level;
use crate::host::LogValue::{Num, Str};
use crate::message::{Message, ToolCall};
use crate::model::{Delta, ModelName, ModelRequest, ModelTurn};
use crate::store::Store;
use futures::future::try_join;
use serde_json::{Value, json};
use std::cell::RefCell;
use std::rc::Rc;

impl<S: Store> Runner<S> {
    pub(crate) async fn model_step(&self, live: &mut Live, agent: &Agent) -> Result<(), RunError> {
        let step = live.head.step_count + 1;
        let emitter = self.emitter(&live.head, Some(step));
        let model = match self.models.model_for(agent.model()) {
            Ok(model) => model,
            Err(e) => {
                self.pipeline().settle(live).await?;
                return self.fail_run(live, ErrorInfo::of(&e)).await;
            }
        };
        let name = model.name(agent.model());
        let model = MODEL_LAYERS
            .iter()
            .filter_map(|layer| layer(agent))
            .fold(model, |inner, layer| layer(inner));
        // What the run read as it started goes into the system prompt within the call.
        let model = RUN_PROMPTS
            .iter()
            .filter_map(|read| read(agent))
            .fold(model, |inner, read| {
                Rc::new(Prompted {
                    inner,
                    read: read.clone(),
                    session: live.head.id.clone(),
                    run: live.head.run.run_id.clone(),
                    host: self.host.clone(),
                }) as Rc<dyn crate::model::Model>
            });
        // Notices of children's ends: in this step's prompt, and committed with it
        // before its assistant message.
        let notices = self.wait_notices(live, agent).await?;
        let Some(turn) = self
            .call_model(live, agent, (model, &name), &notices, &emitter)
            .await?
        else {
            return Ok(()); // the model call failed, and with it the run
        };

        // An answer that did not finish (cut off, filtered, refused, failed) keeps its
        // text; its tool calls are not trusted and never run.
        let stopped = turn.stop.error(turn.stop_detail.clone());
        let tool_calls = match stopped {
            Some(_) => Vec::new(),
            None => turn.tool_calls,
        };
        if let Some(stopped) = &stopped {
            let fields = [("code", Str(stopped.code()))];
            self.log(live, Level::Warn, "model_stopped_in_error", &fields);
        }
        let mut calls = normalize_calls(tool_calls, &live.transcript, step, &emitter);
        // A call may add calls to its step (a saved plan's).
        if let Some(expand) = CALL_EXPANSIONS.iter().find_map(|e| e(agent)) {
            calls = calls
                .into_iter()
                .flat_map(|call| {
                    let added = match expand(&call) {
                        Some(Ok(added)) => added,
                        _ => Vec::new(), // its own result says why
                    };
                    std::iter::once(call).chain(added)
                })
                .collect();
        }
        self.complete_calls(live, agent, &mut calls).await?;
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
        let mut hooked = Vec::new();
        let hook = (Hook::Message(&assistant), None);
        self.fire(live, agent, hook, &mut hooked, &emitter).await;

        let (mut ran, output) = self.run_step_calls(live, agent, &calls, &emitter).await?;
        hooked.append(&mut ran.ops);
        ran.ops = hooked;
        let text = match &assistant {
            Message::Assistant { content, .. } => content.as_str(),
            _ => "",
        };
        let mut head = live.head.clone();
        head.run.usage.add(&turn.usage);
        // The model that answered, as it said (a router's pick), else the one asked.
        let answered = turn.model.clone().unwrap_or(name.model);
        let by_model = head.run.usage_by_model.entry(answered).or_default();
        by_model.add(&turn.usage);
        let conclusion = conclude_step(
            agent,
            &head.run,
            self.config.max_output_nudges,
            Stepped {
                stopped,
                output,
                pending: std::mem::take(&mut ran.pending),
                text,
                calls: &calls,
                results: &ran.results,
                state: &live.state,
            },
        );
        let skipped = ToolError::Skipped("the run finished first".into());
        for &i in &conclusion.skipped {
            ran.results[i] = Some(end_without_running(&calls[i], &skipped, &emitter));
        }
        if conclusion.deferred_output.is_some() {
            head.run.deferred_output = conclusion.deferred_output;
        }
        if conclusion.nudge.is_some() {
            head.run.nudges += 1;
        }
        ran.results.push(conclusion.nudge);
        let results = (
            calls.as_slice(),
            ran.results.as_slice(),
            ran.writes.as_slice(),
        );
        self.result_hooks(live, agent, results, &mut ran.ops, &emitter)
            .await;
        let mut messages = notices;
        messages.push(assistant);
        messages.extend(ran.instances);
        messages.extend(ran.results.into_iter().flatten());
        self.ensure_not_aborted()?;
        let model_call = (turn.usage, turn.stop);
        self.commit_step(
            live,
            agent,
            head,
            step,
            model_call,
            messages,
            ran.ops,
            conclusion.outcome,
            &emitter,
        )
        .await
    }

    /// Calls the model with the transcript (and `notices` after it), streaming its
    /// deltas, while the previous step's commit, if it went out ahead, lands. `None`
    /// when the model call failed (the run has failed with it).
    async fn call_model(
        &self,
        live: &mut Live,
        agent: &Agent,
        (model, name): (Rc<dyn crate::model::Model>, &ModelName),
        notices: &[Message],
        emitter: &Emitter,
    ) -> Result<Option<ModelTurn>, RunError> {
        let step = live.head.step_count + 1;
        let ahead = live.ahead.take();
        let with_notices;
        let prompt = if notices.is_empty() {
            &live.transcript
        } else {
            with_notices = [live.transcript.as_slice(), notices].concat();
            &with_notices
        };
        // Instances' results are read gathered, in their call's own result.
        let gathered;
        let prompt = match INSTANCING.first().and_then(|i| (i.prompt)(prompt)) {
            Some(without) => {
                gathered = without;
                &gathered
            }
            None => prompt,
        };
        let system = agent.system_prompt(&live.state);
        let request = ModelRequest {
            system: system.clone(),
            messages: prompt,
            tools: agent.tool_specs(),
            settings: agent.model(),
            options: live.head.run.options.as_ref(),
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
        let first_delta = std::cell::Cell::new(None);
        let mut on_delta = |delta: Delta| {
            if first_delta.get().is_none() {
                first_delta.set(Some(self.host.now_ms()));
            }
            match held.borrow_mut().as_mut() {
                Some(waiting) => waiting.push(delta),
                None => show(delta),
            }
        };
        let started = self.host.now_ms();
        let pipeline = self.pipeline();
        // The commit is polled first: one refused before it is sent (too large) stops the
        // model call from going out at all, and one that fails later cancels it. The
        // model's answer is only good for a durable transcript.
        let land = async {
            let Some(ahead) = ahead else {
                return Ok(None);
            };
            match pipeline.land_ahead(&live.head.id, ahead).await {
                (Ok(version), kept) => {
                    let waiting = held.borrow_mut().take();
                    waiting.into_iter().flatten().for_each(show);
                    Ok(Some((version, kept)))
                }
                (Err(e), kept) => Err((e, kept)),
            }
        };
        let generate = async { Ok(model.generate(request, &mut on_delta).await) };
        let joined = try_join(land, generate).await;
        let ended = self.host.now_ms();
        if let Ok((_, result)) = &joined {
            let call = ModelCall {
                step,
                name,
                prompt: (&system, prompt),
                times: (started, first_delta.get(), ended),
                outcome: result.as_ref(),
            };
            self.observer.model_called(&live.head.id, &call);
        }
        let result = match joined {
            Ok((landed, result)) => {
                if let Some((version, kept)) = landed {
                    pipeline.landed(live, kept, Ok(version))?;
                }
                result
            }
            Err((e, kept)) => return pipeline.landed(live, kept, Err(e)).map(|()| None),
        };
        let ms = ended.saturating_sub(started);
        let turn = match result {
            Ok(turn) => turn,
            Err(e) => {
                let fields = [
                    ("step", Num(step.into())),
                    ("ms", Num(ms)),
                    ("code", Str(e.code())),
                ];
                self.log(live, Level::Warn, "model_call_failed", &fields);
                self.fail_run(live, ErrorInfo::of(&e)).await?;
                return Ok(None);
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
        Ok(Some(turn))
    }

    /// Runs a step's calls: the plan's (regular, approval-gated, client and child calls,
    /// in dependency order), then `finish_with` calls in order, each seeing every write
    /// before it, then structured output and unknown tools. Returns what ran and the
    /// output a finishing call gave.
    async fn run_step_calls(
        &self,
        live: &mut Live,
        agent: &Agent,
        calls: &[ToolCall],
        emitter: &Emitter,
    ) -> Result<(Ran, Option<Value>), RunError> {
        let mut plans: Vec<Plan> = calls.iter().map(|c| plan(agent, c, &live.state)).collect();
        let mut ran = Ran::new(calls.len());
        // The agent refuses some calls outright (a loaded skill's allowed tools).
        let at = usize::try_from(live.head.run.input_at).unwrap_or(usize::MAX);
        let run = live.transcript.get(at..).unwrap_or_default();
        for (i, call) in calls.iter().enumerate() {
            if let Some(refused) = agent.refusal(run, call) {
                plans[i] = Plan::Refused;
                ran.results[i] = Some(end_without_running(call, &refused, emitter));
            }
        }
        // Each planned call is prepared and its approval decided just before it runs.
        let planned: Vec<bool> = plans.iter().map(|p| p.in_plan()).collect();
        match StepCalls::new(agent, calls, &planned) {
            Ok(mut step_calls) => {
                let todo: Vec<usize> = (0..calls.len()).filter(|&i| planned[i]).collect();
                self.run_calls(live, agent, &mut step_calls, &todo, &mut ran, emitter)
                    .await?;
            }
            Err(invalid) => {
                for (i, call) in calls.iter().enumerate() {
                    if planned[i] || plans[i] == Plan::FinishWith {
                        ran.results[i] = Some(end_without_running(call, &invalid, emitter));
                    }
                }
            }
        }
        // Calls waiting on a person or a client: the finishing calls wait for them.
        let todo: Vec<bool> = match finish_waits(&ran.pending) {
            true => vec![false; calls.len()],
            false => ran.results.iter().map(Option::is_none).collect(),
        };
        let out = Finishing {
            todo: &todo,
            results: &mut ran.results,
            writes: &mut ran.writes,
            ops: &mut ran.ops,
            claim: false,
        };
        let output = self
            .run_finishing(live, agent, calls, &plans, out, emitter)
            .await?;
        for (i, call) in calls.iter().enumerate() {
            if plans[i] == Plan::Unknown {
                let err = ToolError::NotFound(call.name.clone());
                ran.results[i] = Some(end_without_running(call, &err, emitter));
            }
        }
        Ok((ran, output))
    }
}
