//! A scripted model for tests: a queue of turns (text, tool calls, structured output,
//! errors, or a hang that never answers), streamed as deltas, with every request
//! recorded so tests can assert what the model saw and how often it was called.

use crate::agent::FINISH_TOOL;
use crate::error::ProviderError;
use crate::message::{Message, ToolCall};
use crate::model::{Delta, Model, ModelRequest, ModelSettings, ModelTurn, StopReason, Usage};
use futures::future::LocalBoxFuture;
use serde_json::Value;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Scripted {
    /// A turn to return (its text is streamed in two deltas first).
    Turn(ModelTurn),
    /// A provider error.
    Fail(ProviderError),
    /// Streams the text, then never answers (a crash while the model streams).
    Hang(String),
}

/// What a request looked like.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    /// The system prompt.
    pub system: String,
    /// The transcript sent.
    pub messages: Vec<Message>,
    /// Names of the tools offered.
    pub tools: Vec<String>,
    /// The settings the call went with (the agent's, with its run's options applied, as a
    /// provider applies them).
    pub settings: ModelSettings,
}

/// A model that answers from a script.
#[derive(Debug, Default)]
pub struct ScriptedModel {
    script: RefCell<VecDeque<Scripted>>,
    seen: RefCell<Vec<Seen>>,
    next_id: Cell<u32>,
}

impl ScriptedModel {
    /// An empty script.
    pub fn new() -> Self {
        Self::default()
    }

    fn push(&self, turn: Scripted) -> &Self {
        self.script.borrow_mut().push_back(turn);
        self
    }

    /// A call with a fresh id (`call-1`, `call-2`, …).
    pub fn call(&self, name: &str, arguments: Value) -> ToolCall {
        let n = self.next_id.get() + 1;
        self.next_id.set(n);
        ToolCall {
            id: format!("call-{n}"),
            name: name.into(),
            arguments,
        }
    }

    /// Queues a text answer.
    pub fn text(&self, text: &str) -> &Self {
        self.push(Scripted::Turn(ModelTurn {
            text: text.into(),
            stop: StopReason::EndTurn,
            usage: Usage {
                input_tokens: 10,
                output_tokens: 5,
                ..Usage::default()
            },
            ..ModelTurn::default()
        }))
    }

    /// Queues tool calls (made with [`call`](Self::call)).
    pub fn calls(&self, calls: Vec<ToolCall>) -> &Self {
        self.push(Scripted::Turn(ModelTurn {
            tool_calls: calls,
            stop: StopReason::ToolUse,
            usage: Usage {
                input_tokens: 10,
                output_tokens: 5,
                ..Usage::default()
            },
            ..ModelTurn::default()
        }))
    }

    /// Queues text that ended for `stop` (a cut-off, a refusal, a filter), with the
    /// provider's explanation if any.
    pub fn stopped(&self, text: &str, stop: StopReason, detail: Option<&str>) -> &Self {
        self.push(Scripted::Turn(ModelTurn {
            text: text.into(),
            stop,
            stop_detail: detail.map(Into::into),
            ..ModelTurn::default()
        }))
    }

    /// Queues a whole turn as given.
    pub fn turn(&self, turn: ModelTurn) -> &Self {
        self.push(Scripted::Turn(turn))
    }

    /// Queues a `__finish__` call with `output` as its arguments.
    pub fn output(&self, output: Value) -> &Self {
        let call = self.call(FINISH_TOOL, output);
        self.calls(vec![call])
    }

    /// Queues a provider error.
    pub fn fail(&self, error: ProviderError) -> &Self {
        self.push(Scripted::Fail(error))
    }

    /// Queues a turn that streams `text` and then never finishes.
    pub fn hang(&self, text: &str) -> &Self {
        self.push(Scripted::Hang(text.into()))
    }

    /// Every request so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.borrow().clone()
    }

    /// How many turns are left.
    pub fn remaining(&self) -> usize {
        self.script.borrow().len()
    }
}

fn stream_text(text: &str, on_delta: &mut dyn FnMut(Delta)) {
    let mid = text
        .char_indices()
        .nth(text.chars().count() / 2)
        .map_or(0, |(i, _)| i);
    for piece in [&text[..mid], &text[mid..]] {
        if !piece.is_empty() {
            on_delta(Delta::Text(piece.into()));
        }
    }
}

impl Model for ScriptedModel {
    fn generate<'a>(
        &'a self,
        request: ModelRequest<'a>,
        on_delta: &'a mut dyn FnMut(Delta),
    ) -> LocalBoxFuture<'a, Result<ModelTurn, ProviderError>> {
        self.seen.borrow_mut().push(Seen {
            system: request.system.clone(),
            messages: request.messages.to_vec(),
            tools: request.tools.iter().map(|t| t.name.clone()).collect(),
            settings: request
                .options
                .and_then(|given| crate::provider_options::apply(given, request.settings))
                .unwrap_or_else(|| request.settings.clone()),
        });
        // Refused as the HTTP models refuse it, before the script moves on: every test
        // that runs on this model checks that no path asks a model to answer itself.
        if let Err(e) = request.check() {
            return Box::pin(async move { Err(e) });
        }
        let next = self.script.borrow_mut().pop_front();
        Box::pin(async move {
            match next {
                Some(Scripted::Turn(turn)) => {
                    stream_text(&turn.text, on_delta);
                    Ok(turn)
                }
                Some(Scripted::Fail(err)) => Err(err),
                Some(Scripted::Hang(text)) => {
                    stream_text(&text, on_delta);
                    futures::future::pending().await
                }
                None => Err(ProviderError::Exhausted(
                    "the script has no more turns".into(),
                )),
            }
        })
    }
}
