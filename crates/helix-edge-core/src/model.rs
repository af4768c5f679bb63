//! The model interface the step machine calls: a request (system prompt, transcript,
//! tool specs, settings), streamed deltas while it runs, and one finished turn. Provider
//! adapters, the demo model and the scripted test model implement [`Model`].

use crate::abort::AbortSignal;
use crate::error::ProviderError;
use crate::message::{Message, Thinking, ToolCall};
use crate::wire::wire_enum;
use futures::future::LocalBoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::rc::Rc;

/// Per-agent model settings. `None` means "the deployment's default".
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelSettings {
    /// `openai`, `anthropic`, `workers-ai` or `demo`.
    pub provider: Option<String>,
    /// The provider's model name.
    pub model: Option<String>,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Cap on output tokens per call.
    pub max_output_tokens: Option<u32>,
    /// Prompt caching, and how long a cached prefix lives (off when `None`): Anthropic
    /// gets `cache_control` breakpoints, OpenAI the session as `prompt_cache_key`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_cache: Option<CacheTtl>,
    /// Which tools the model must or may call (`auto` when `None`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    /// How hard a reasoning model thinks: OpenAI's `reasoning_effort`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<ReasoningEffort>,
    /// Anthropic's extended thinking: the tokens it may spend (at least 1024; the call's
    /// `max_tokens` is raised above it, and `temperature` is not sent with it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_budget: Option<u32>,
    /// Fields merged into OpenAI-format request bodies as they are (unchecked; a run's
    /// `providerOptions.openai` goes over them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub openai_fields: Option<serde_json::Map<String, Value>>,
    /// Fields merged into Anthropic Messages request bodies as they are (unchecked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anthropic_fields: Option<serde_json::Map<String, Value>>,
}

/// Which tools the model must or may call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// It decides (the default).
    Auto,
    /// It must call one of the tools (Anthropic: `any`).
    Required,
    /// It must not call any.
    None,
    /// It must call this tool.
    Tool(String),
}

wire_enum! {
    /// How hard a reasoning model thinks.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum ReasoningEffort {
        /// Little reasoning, fast.
        Low = "low",
        /// The providers' default.
        Medium = "medium",
        /// Thorough.
        High = "high",
    }
}

wire_enum! {
    /// How long a cached prompt prefix lives.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub enum CacheTtl {
        /// The providers' default: about five minutes, renewed on each hit (OpenAI's
        /// in-memory retention).
        #[default]
        FiveMinutes = "five_minutes",
        /// Anthropic's one-hour cache; OpenAI's extended (24 h) retention.
        OneHour = "one_hour",
    }
}

/// A tool as the model is told about it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSpec {
    /// Name to call it by.
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON Schema of its arguments.
    pub input_schema: Value,
    /// Ask the provider to hold the arguments to the schema (constrained decoding).
    pub strict: bool,
}

/// One model call.
#[derive(Debug, Clone)]
pub struct ModelRequest<'a> {
    /// The system prompt.
    pub system: String,
    /// The transcript so far.
    pub messages: &'a [Message],
    /// The tools the model may call.
    pub tools: Vec<ToolSpec>,
    /// Settings of the agent.
    pub settings: &'a ModelSettings,
    /// The run's own model options (`providerOptions` as its request gave them, checked
    /// then), which a provider applies over `settings`.
    pub options: Option<&'a Value>,
    /// The session the call is for (the prompt cache key).
    pub session_id: &'a str,
    /// Raised when the run is aborted: a streaming call stops reading and cancels.
    pub abort: AbortSignal,
}

impl ModelRequest<'_> {
    /// Whether the request may go to a model: its transcript ends with the user's or a
    /// tool's message. One that ends with the assistant's would have the model continue
    /// its own answer (a prefill, which no adapter here means), so it is refused before
    /// anything is sent.
    pub fn check(&self) -> Result<(), ProviderError> {
        match self.messages.last() {
            Some(Message::Assistant { .. }) => Err(ProviderError::NothingToAnswer),
            _ => Ok(()),
        }
    }
}

/// A piece of the answer, delivered while the model streams.
#[derive(Debug, Clone, PartialEq)]
pub enum Delta {
    /// Answer text.
    Text(String),
    /// Reasoning text; `is_complete` marks the end of a reasoning block.
    Thinking {
        /// The text.
        content: String,
        /// Last piece of the block.
        is_complete: bool,
    },
}

wire_enum! {
    /// Why the model stopped, normalised across providers.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub enum StopReason {
        /// It finished its answer.
        #[default]
        EndTurn = "end_turn",
        /// It wants tool results.
        ToolUse = "tool_use",
        /// It reached one of the request's stop sequences (Anthropic): a finished answer.
        StopSequence = "stop_sequence",
        /// The provider paused a long turn of its own server-side tools (Anthropic); the
        /// step ends with what came, as a finished answer (helix-edge sends no server
        /// tools, so only a provider-side tool pauses).
        PauseTurn = "pause_turn",
        /// It hit the output token cap.
        MaxTokens = "max_tokens",
        /// The provider filtered the content.
        ContentFilter = "content_filter",
        /// The model refused.
        Refusal = "refusal",
        /// The provider reported an error.
        Error = "error",
        /// Something the provider did not explain.
        Unknown = "unknown",
    }
}

impl StopReason {
    /// The error an answer that stopped this way is, if it is not a finished one: the
    /// output limit cut it, the provider filtered it or reported an error, the model
    /// refused (`detail` is the provider's explanation), or the reason is unknown.
    pub fn error(self, detail: Option<String>) -> Option<ProviderError> {
        match self {
            Self::EndTurn | Self::ToolUse | Self::StopSequence | Self::PauseTurn => None,
            Self::MaxTokens => Some(ProviderError::MaxTokens),
            Self::ContentFilter => Some(ProviderError::ContentFiltered),
            Self::Refusal => Some(ProviderError::Refused(detail)),
            Self::Error => Some(ProviderError::StopError),
            Self::Unknown => Some(ProviderError::StopUnknown),
        }
    }
}

/// Tokens used by one call (or summed over several).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Prompt tokens read from the provider's cache.
    pub cache_read_tokens: u64,
    /// Prompt tokens written to the provider's cache.
    pub cache_write_tokens: u64,
}

impl Usage {
    /// Adds `other` into `self`.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
    }
}

/// The finished answer of one model call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelTurn {
    /// All answer text.
    pub text: String,
    /// Reasoning blocks, if the provider returned any.
    pub thinking: Vec<Thinking>,
    /// Tool calls in the model's order. Arguments may be any JSON value here; the step
    /// machine normalises them to objects.
    pub tool_calls: Vec<ToolCall>,
    /// Why it stopped.
    pub stop: StopReason,
    /// The provider's explanation of why it stopped, when it gives one (a refusal's).
    pub stop_detail: Option<String>,
    /// Tokens used.
    pub usage: Usage,
    /// The model that answered, as the provider's stream named it (when it did).
    pub model: Option<String>,
}

/// Which model answers an agent's calls: its provider (OpenTelemetry's `gen_ai.system`)
/// and the provider's name for it. Usage is summed per `model`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelName {
    /// `openai`, `anthropic`, `workers-ai`, `demo`, or what a custom model says.
    pub system: String,
    /// The model, as the provider calls it.
    pub model: String,
}

/// A language model. Implementations stream deltas through `on_delta` as they arrive
/// and return the whole turn at the end.
pub trait Model {
    /// Runs one call.
    fn generate<'a>(
        &'a self,
        request: ModelRequest<'a>,
        on_delta: &'a mut dyn FnMut(Delta),
    ) -> LocalBoxFuture<'a, Result<ModelTurn, ProviderError>>;

    /// The model an agent with `settings` is answered by; by default what the settings
    /// name (`custom`/`unknown` where they name nothing).
    fn name(&self, settings: &ModelSettings) -> ModelName {
        ModelName {
            system: settings.provider.clone().unwrap_or_else(|| "custom".into()),
            model: settings.model.clone().unwrap_or_else(|| "unknown".into()),
        }
    }
}

/// Picks the model for an agent (from its settings and the deployment's configuration).
pub trait Models {
    /// The model an agent with `settings` runs on.
    fn model_for(&self, settings: &ModelSettings) -> Result<Rc<dyn Model>, ProviderError>;
}

/// Every agent runs on the same model.
pub struct OneModel(pub Rc<dyn Model>);

impl Models for OneModel {
    fn model_for(&self, _settings: &ModelSettings) -> Result<Rc<dyn Model>, ProviderError> {
        Ok(self.0.clone())
    }
}
