//! Calls run once per item (`_forEach`, see [`crate::memory::each`]) in a plan: each
//! instance is a call of its own — id `{call}#{item}`, its arguments resolved for its
//! item, decided for approval on them, run in parallel with the round's other calls or
//! made a pending call that waits on its own answer. Its result is kept in the
//! transcript, tagged as the instance's ([`Message::instance_of`]); once every
//! instance has ended, the call's own result gathers theirs in item order (an
//! instance that failed contributes its error) and is stored at its output path.
//!
//! Durable as any call of a plan: a suspension keeps the instances' results and
//! pending calls; the resumption finds the results (in the transcript and among the
//! answers), runs nothing twice, and gathers when the last one has ended.

use super::RunError;
use super::calls::{Plan, plan};
use super::emit::Emitter;
use super::instancing::{Instancing, Round};
use super::results::{end_without_running, result_message, tool_end};
use super::step_calls::{Instances, Ran, StepCalls};
use crate::error::{Coded, ToolError};
use crate::memory::each::instance_id;
use crate::message::{Message, ToolCall, bounded_result};
use crate::state::PatchOp;
use crate::store::{PendingCall, PendingKind};
use serde_json::Value;

/// Running a call once per item, as the feature `plans` registers it.
pub(crate) const INSTANCING: Instancing = Instancing {
    start,
    gather,
    ended,
    answered,
    prompt,
};

/// Starts the instances of call `i` of `step` (with these `arguments`, one per
/// item): a result found from before is taken; an approval-gated or client instance
/// becomes a pending call; the others are added to `runs` (claimed first in a
/// resumption, with `claim`), their slots numbered after the step's calls.
fn start(
    round: &mut Round<'_>,
    step: &mut StepCalls<'_>,
    i: usize,
    (arguments, output): (Vec<Value>, Option<String>),
) -> Result<(), RunError> {
    let Round {
        state,
        agent,
        ran,
        runs,
        emitter,
        now,
        claim,
    } = round;
    let call = &step.calls[i];
    let mut results = Vec::with_capacity(arguments.len());
    for (k, arguments) in arguments.into_iter().enumerate() {
        let id = instance_id(&call.id, k);
        if let Some(found) = step.earlier.iter().find(|m| tool_call_id(m) == Some(&id)) {
            results.push(Some(found.clone()));
            continue;
        }
        results.push(None);
        let instance = ToolCall {
            id,
            name: call.name.clone(),
            arguments,
        };
        let failed = |err: &ToolError| {
            end_without_running(&instance, err, emitter).into_instance(&call.id, k)
        };
        match plan(agent, &instance, state) {
            Plan::Gated(kind) => {
                let tool = agent.tool(&call.name);
                let deadline = tool.and_then(|t| match kind {
                    PendingKind::Approval => t.approval_deadline(),
                    _ => t.client_deadline(),
                });
                let approvers = tool.and_then(|t| t.approvers.clone());
                ran.pending.push(PendingCall {
                    tool_call_id: instance.id,
                    tool_name: instance.name,
                    arguments: instance.arguments,
                    kind,
                    deadline: deadline.map(|d| *now + d.as_millis() as u64),
                    since: *now,
                    output_path: None,
                    approvers: approvers.filter(|_| kind == PendingKind::Approval),
                    request: None,
                });
            }
            Plan::Child => {
                let err = ToolError::InputInvalid {
                    tool: call.name.clone(),
                    reason: "a sub-agent call runs once; it cannot take _forEach".into(),
                };
                results[k] = Some(failed(&err));
            }
            _ if step.claim && !claim(&instance)? => {
                results[k] = Some(failed(&ToolError::Interrupted));
            }
            _ => {
                step.slots.push((i, k));
                runs.push((step.calls.len() + step.slots.len() - 1, instance, None));
            }
        }
    }
    ran.instances.extend(
        results
            .iter()
            .flatten()
            .filter(|m| !step.earlier.contains(m))
            .cloned(),
    );
    step.instanced[i] = Some(Instances { results, output });
    Ok(())
}

/// Records the result of the round's `run`th instance run.
fn ended(step: &mut StepCalls<'_>, ran: &mut Ran, run: usize, message: Message) {
    let Some(&(i, k)) = step.slots.get(run) else {
        return;
    };
    let message = message.into_instance(&step.calls[i].id, k);
    ran.instances.push(message.clone());
    if let Some(instances) = step.instanced[i].as_mut() {
        instances.results[k] = Some(message);
    }
}

/// `transcript` without instances' results, when it has any.
fn prompt(transcript: &[Message]) -> Option<Vec<Message>> {
    transcript
        .iter()
        .any(|m| m.instance_of().is_some())
        .then(|| {
            transcript
                .iter()
                .filter(|m| m.instance_of().is_none())
                .cloned()
                .collect()
        })
}

/// Call `i` of `step` once every instance of it has ended: its result gathers theirs
/// in item order (stored at its output path: the write returned).
fn gather(
    step: &mut StepCalls<'_>,
    i: usize,
    ran: &mut Ran,
    state: &Value,
    emitter: &Emitter,
) -> Option<PatchOp> {
    let instances = step.instanced[i].as_ref()?;
    if step.ended[i].is_some() || instances.results.iter().any(Option::is_none) {
        return None;
    }
    let call = &step.calls[i];
    let gathered: Vec<Value> = instances
        .results
        .iter()
        .flatten()
        .map(|m| match m {
            Message::Tool { content, .. } => content.clone(),
            _ => Value::Null,
        })
        .collect();
    let (message, stored) = match bounded_result(Value::Array(gathered)) {
        Ok(value) => result_message(call, value, instances.output.as_deref(), state),
        Err(err) => (
            Message::tool_error(call, err.code(), &err.to_string()),
            None,
        ),
    };
    tool_end(call, &message, None, emitter);
    step.ended[i] = Some(!matches!(message, Message::Tool { is_error: true, .. }));
    ran.results[i] = Some(message);
    stored
}

/// The result of an answered pending call of a step with these `calls`: an
/// instance's kept as its, for its call to gather.
fn answered(calls: &[ToolCall], pending: &PendingCall, result: Message) -> Message {
    match instance_of_id(&pending.tool_call_id, calls) {
        Some((call, item)) => result.into_instance(&call, item),
        None => result,
    }
}

/// The call a tool result answers.
fn tool_call_id(message: &Message) -> Option<&str> {
    match message {
        Message::Tool { tool_call_id, .. } => Some(tool_call_id),
        _ => None,
    }
}

/// Whether `id` is an instance's (`{call}#{item}`) of one of `calls`, and whose.
fn instance_of_id(id: &str, calls: &[ToolCall]) -> Option<(String, usize)> {
    if calls.iter().any(|c| c.id == id) {
        return None;
    }
    let (call, item) = id.rsplit_once('#')?;
    let item = item.parse().ok()?;
    calls
        .iter()
        .any(|c| c.id == call)
        .then(|| (call.to_string(), item))
}
