//! Firing an agent's [`Hooks`](crate::agent::Hooks) in the runner: each over the state
//! as it stands, its writes merged into the step's (or the resumption's) writes — so
//! they are committed with them and streamed as `state_patch` — and a failure (or a
//! hook past [`HOOK_TIMEOUT`]) logged (`hook_failed`) with its writes dropped.

use super::emit::Emitter;
use super::exec::merge_into;
use super::{Live, Runner};
use crate::agent::{Agent, HOOK_TIMEOUT, Hook, HookContext};
use crate::host::LogValue::{self, Str};
use crate::host::{Host, Level};
use crate::message::{Message, ToolCall};
use crate::state::PatchOp;
use crate::store::Store;
use futures::future::{Either, select};
use serde_json::Value;
use std::rc::Rc;

/// Fires `hook` (about `call`, if any) where `emitter` stands, over `base`; returns its
/// writes (none when it failed or took longer than [`HOOK_TIMEOUT`], which is logged).
pub(crate) async fn hook_writes(
    host: &dyn Host,
    agent: &Agent,
    (hook, call): (Hook<'_>, Option<&ToolCall>),
    base: Rc<Value>,
    emitter: &Emitter,
) -> Vec<PatchOp> {
    let Some(hooks) = agent.hooks() else {
        return Vec::new();
    };
    let place = emitter.place();
    let ctx = HookContext::new(place, call, base);
    let limit = u64::try_from(HOOK_TIMEOUT.as_millis()).unwrap_or(u64::MAX);
    let outcome = match select(hook.call(hooks, &ctx), host.sleep(limit)).await {
        Either::Left((outcome, _)) => outcome,
        Either::Right(_) => Err(format!("it took longer than {} s", HOOK_TIMEOUT.as_secs()).into()),
    };
    match outcome {
        Ok(()) => ctx.into_writes(),
        Err(error) => {
            let error = error.to_string();
            let fields = [
                ("session", Str(place.session_id)),
                ("run", Str(place.run_id)),
                ("hook", Str(hook.name())),
                ("call", call.map_or(LogValue::Null, |c| Str(&c.id))),
                ("error", Str(&error)),
            ];
            host.log(Level::Warn, "hook_failed", &fields);
            Vec::new()
        }
    }
}

impl<S: Store> Runner<S> {
    /// Fires `hook` over `live`'s state and merges its writes into it and `ops`.
    pub(crate) async fn fire(
        &self,
        live: &mut Live,
        agent: &Agent,
        hook: (Hook<'_>, Option<&ToolCall>),
        ops: &mut Vec<PatchOp>,
        emitter: &Emitter,
    ) {
        if agent.hooks().is_none() {
            return;
        }
        let base = Rc::new(std::mem::take(&mut live.state));
        let writes = hook_writes(&*self.host, agent, hook, base.clone(), emitter).await;
        live.state = Rc::try_unwrap(base).unwrap_or_else(|rc| (*rc).clone());
        if !writes.is_empty() {
            merge_into(&mut live.state, vec![writes], ops, emitter);
        }
    }

    /// Fires the hooks on a step's (or a resumption's) results in the model's call
    /// order, whatever order the calls finished in: per call `on_state_change` (if it
    /// wrote), `on_message` and `after_tool`; then `on_message` for any message after
    /// the results (a nudge). `results` and `writes` are indexed like `calls`.
    pub(crate) async fn result_hooks(
        &self,
        live: &mut Live,
        agent: &Agent,
        (calls, results, writes): (&[ToolCall], &[Option<Message>], &[Vec<PatchOp>]),
        ops: &mut Vec<PatchOp>,
        emitter: &Emitter,
    ) {
        if agent.hooks().is_none() {
            return;
        }
        for (i, message) in results.iter().enumerate() {
            let Some(message) = message else {
                continue;
            };
            let call = calls.get(i);
            if let (Some(w), Some(_)) = (writes.get(i).filter(|w| !w.is_empty()), call) {
                let hook = (Hook::StateChange(w), call);
                self.fire(live, agent, hook, ops, emitter).await;
            }
            let hook = (Hook::Message(message), call);
            self.fire(live, agent, hook, ops, emitter).await;
            if call.is_some() {
                let hook = (Hook::AfterTool(message), call);
                self.fire(live, agent, hook, ops, emitter).await;
            }
        }
    }
}
