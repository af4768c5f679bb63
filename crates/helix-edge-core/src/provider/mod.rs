//! Model providers over HTTP, sans IO: configuration from the deployment's vars, the
//! request each provider wants, stream decoding, error classification and the retry
//! policy. The bytes move through a [`Transport`] the caller supplies — the Workers
//! `fetch` on the platform, real sockets in native tests.
//!
//! Retry policy: 429, 5xx, timeouts, network errors and retryable in-stream errors are
//! retried — only while nothing has been streamed to clients yet — up to
//! `max_retries` times (default 3), with exponential backoff and jitter, or after the
//! provider's `Retry-After` when it gives one, and never past the overall deadline.
//! The API key never appears in errors: provider messages are scrubbed of it.

#[cfg(feature = "anthropic")]
pub mod anthropic;
pub mod capabilities;
mod models;
pub mod openai;
mod protocol;
mod retry;
pub mod sse;
pub mod strict;
mod transport;

use crate::abort::AbortSignal;
use crate::error::ProviderError;
use crate::model::{Delta, Model, ModelRequest, ModelTurn};
pub use capabilities::Capabilities;
use futures::future::LocalBoxFuture;
pub use models::ConfiguredModels;
use protocol::Protocol;
use retry::error_message;
pub use retry::{MAX_RETRY_AFTER_MS, backoff_ms, classify, retry_after_ms};
use sse::{SseEvent, SseFramer};
use std::time::Duration;
pub use transport::{
    BodyStream, HttpRequest, HttpResponse, Method, Transport, TransportError, secure_url,
};

/// How a stream event was understood.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame {
    /// Part of the protocol, used.
    Known,
    /// Not understood; skipped (and logged by the transport).
    Unknown,
}

/// What one event did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeStep {
    /// How it was understood.
    pub frame: Frame,
    /// The stream's terminal event: stop reading.
    pub terminal: bool,
}

/// Assembles a [`ModelTurn`] from a provider's stream events. A corrupt event is an
/// error; a stream that ends before its terminal event is [`ProviderError::Truncated`].
pub trait Decoder {
    /// Takes one event, pushing the deltas it carries.
    fn event(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<Delta>,
    ) -> Result<DecodeStep, ProviderError>;
    /// The stream ended: the assembled turn.
    fn finish(self: Box<Self>, out: &mut Vec<Delta>) -> Result<ModelTurn, ProviderError>;
}

/// Which wire protocol a deployment speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    /// OpenAI-compatible Chat Completions.
    OpenAi,
    /// Anthropic Messages (feature `anthropic`).
    Anthropic,
    /// Cloudflare Workers AI, through its OpenAI-compatible endpoint.
    WorkersAi,
    /// The built-in deterministic model.
    Demo,
}

/// A provider as configured by `LLM_PROVIDER`, `LLM_BASE_URL`, `LLM_MODEL`, `LLM_API_KEY`.
#[derive(Clone, PartialEq, Eq)]
pub struct ProviderConfig {
    /// The protocol.
    pub kind: ProviderKind,
    /// Base URL, without a trailing slash (e.g. `https://api.openai.com/v1`).
    pub base_url: String,
    /// Model name (an agent's own `model` setting overrides it).
    pub model: String,
    /// The key, if the provider needs one.
    pub api_key: Option<String>,
    /// Limit for the response headers, and for each silence between body chunks.
    pub request_timeout: Duration,
    /// Limit for the whole call, retries included.
    pub deadline: Duration,
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// First backoff; doubles per retry.
    pub retry_base: Duration,
    /// The `demo` model's script for agents of your own (`LLM_SCRIPT`, JSON; see
    /// `demo::script`).
    pub script: Option<String>,
    /// What it supports: the profile of its kind and endpoint, adjusted by
    /// `LLM_CAPABILITIES`.
    pub capabilities: Capabilities,
}

impl std::fmt::Debug for ProviderConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderConfig")
            .field("kind", &self.kind)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .finish_non_exhaustive()
    }
}

/// Error bodies are read up to this size.
const ERROR_BODY_LIMIT: usize = 64 * 1024;
/// The most a model's answer may carry — text, reasoning and tool-call arguments —
/// since it is kept as one transcript message (one D1 row of at most 2 MB). Models
/// stop far below it (128k output tokens are about 0.5 MB); a larger answer fails the
/// call with `provider_output_too_large` as soon as the text passes it, without
/// reading the rest.
pub const MAX_OUTPUT_BYTES: usize = 1 << 20;
/// The most stream bytes read for one answer (framing included), so that a stream of
/// endless keep-alives or tiny fragments is cut off too.
const MAX_STREAM_BYTES: usize = 64 << 20;

/// The bytes a finished answer keeps in the transcript.
fn turn_bytes(turn: &ModelTurn) -> usize {
    let thinking: usize = turn
        .thinking
        .iter()
        .map(|t| {
            t.content.len()
                + t.signature.as_ref().map_or(0, String::len)
                + t.redacted.as_ref().map_or(0, String::len)
        })
        .sum();
    let calls: usize = turn
        .tool_calls
        .iter()
        .map(|c| c.id.len() + c.name.len() + crate::message::json_len(&c.arguments))
        .sum();
    turn.text.len() + thinking + calls
}

impl ProviderConfig {
    /// Reads the SPEC §6 vars (plus optional `LLM_TIMEOUT_MS`, `LLM_DEADLINE_MS`,
    /// `LLM_MAX_RETRIES`, and `CF_ACCOUNT_ID` for Workers AI). With no `LLM_PROVIDER`,
    /// a key means `openai` and no key means `demo`.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<Self, ProviderError> {
        let var = |name: &str| {
            get(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let api_key = var("LLM_API_KEY");
        let kind = match var("LLM_PROVIDER").as_deref() {
            None if api_key.is_some() => ProviderKind::OpenAi,
            None | Some("demo") => ProviderKind::Demo,
            Some("openai") => ProviderKind::OpenAi,
            Some("anthropic") => ProviderKind::Anthropic,
            Some("workers-ai") => ProviderKind::WorkersAi,
            Some(other) => {
                return Err(ProviderError::NotConfigured(format!(
                    "LLM_PROVIDER '{other}' is not one of openai, anthropic, workers-ai, demo"
                )));
            }
        };
        let protocol = protocol::of(kind);
        if kind != ProviderKind::Demo && protocol.is_none() {
            return Err(ProviderError::NotConfigured(
                "LLM_PROVIDER 'anthropic' needs helix-edge's `anthropic` feature, which this worker was \
                 built without"
                    .into(),
            ));
        }
        let base_url = match (var("LLM_BASE_URL"), kind) {
            (Some(url), _) => url,
            (None, ProviderKind::WorkersAi) => match var("CF_ACCOUNT_ID") {
                Some(account) => {
                    format!("https://api.cloudflare.com/client/v4/accounts/{account}/ai/v1")
                }
                None => {
                    return Err(ProviderError::NotConfigured(
                        "workers-ai needs CF_ACCOUNT_ID (or LLM_BASE_URL)".into(),
                    ));
                }
            },
            (None, _) => protocol.map_or(String::new(), |p| p.base_url().into()),
        };
        // A provider's own endpoint needs a key: without one, every call would only be
        // refused. (A server at an explicit LLM_BASE_URL may need none.)
        if kind != ProviderKind::Demo && api_key.is_none() && var("LLM_BASE_URL").is_none() {
            let name = var("LLM_PROVIDER").unwrap_or_default();
            return Err(ProviderError::NotConfigured(format!(
                "LLM_PROVIDER '{name}' calls {base_url}, which needs LLM_API_KEY: set it, set \
                 LLM_BASE_URL for a server that needs no key, or leave LLM_PROVIDER unset for \
                 the demo model"
            )));
        }
        // OpenAI's profile for its own API; any other server at LLM_BASE_URL gets the
        // conservative one.
        let own = kind != ProviderKind::OpenAi || base_url.contains("api.openai.com");
        let mut capabilities = Capabilities::profile(kind, own);
        if let Some(spec) = var("LLM_CAPABILITIES") {
            capabilities = capabilities
                .adjusted(&spec)
                .map_err(ProviderError::NotConfigured)?;
        }
        let http = base_url.starts_with("https://") || base_url.starts_with("http://");
        if kind != ProviderKind::Demo && !http {
            return Err(ProviderError::NotConfigured(format!(
                "LLM_BASE_URL '{base_url}' is not an http(s) URL"
            )));
        }
        let model = var("LLM_MODEL").unwrap_or_else(|| {
            match kind {
                ProviderKind::WorkersAi => "@cf/meta/llama-3.3-70b-instruct-fp8-fast",
                ProviderKind::Demo => "demo",
                _ => protocol.map_or("", |p| p.model()),
            }
            .into()
        });
        let number = |name: &str, default: u64| -> Result<u64, ProviderError> {
            match var(name) {
                None => Ok(default),
                Some(v) => v.parse().map_err(|_| {
                    ProviderError::NotConfigured(format!("{name} '{v}' is not a number"))
                }),
            }
        };
        Ok(Self {
            kind,
            base_url: base_url.trim_end_matches('/').to_string(),
            model,
            api_key,
            request_timeout: Duration::from_millis(number("LLM_TIMEOUT_MS", 60_000)?),
            deadline: Duration::from_millis(number("LLM_DEADLINE_MS", 300_000)?),
            max_retries: number("LLM_MAX_RETRIES", 3)? as u32,
            retry_base: Duration::from_millis(500),
            script: var("LLM_SCRIPT"),
            capabilities,
        })
    }

    /// The protocol it speaks (OpenAI's Chat Completions for the demo, which makes no
    /// request).
    fn protocol(&self) -> &'static dyn Protocol {
        protocol::of(self.kind).unwrap_or(&openai::OpenAi)
    }

    /// The HTTP request for one streaming call, without what the configuration lacks
    /// ([`Capabilities::apply`]).
    pub fn request(&self, request: &ModelRequest<'_>) -> HttpRequest {
        self.request_noting(request).0
    }

    /// [`Self::request`], and the names of the features it left out.
    fn request_noting(&self, request: &ModelRequest<'_>) -> (HttpRequest, Vec<&'static str>) {
        // The run's own options over the agent's settings (checked when the run started;
        // a worker without the reader applies none).
        let applied = request
            .options
            .and_then(|o| crate::provider_options::apply(o, request.settings));
        let with_options;
        let request = match &applied {
            Some(settings) => {
                with_options = ModelRequest {
                    settings,
                    ..request.clone()
                };
                &with_options
            }
            None => request,
        };
        let (mut settings, mut messages) = (None, None);
        let (request, dropped) = self
            .capabilities
            .apply(request, &mut settings, &mut messages);
        let request = request.as_ref();
        let model = request.settings.model.as_deref().unwrap_or(&self.model);
        let mut headers = vec![
            ("content-type".to_string(), "application/json".to_string()),
            ("accept".to_string(), "text/event-stream".to_string()),
        ];
        let (path, body) = self.protocol().request(self, model, request, &mut headers);
        let http = HttpRequest {
            method: Method::Post,
            url: format!("{}{path}", self.base_url),
            headers,
            body,
        };
        (http, dropped)
    }

    /// A decoder for this provider's stream.
    pub fn decoder(&self) -> Box<dyn Decoder> {
        self.protocol().decoder()
    }

    /// Removes the key from text that came from outside (provider error messages).
    pub fn scrub(&self, text: &str) -> String {
        match &self.api_key {
            Some(key) if !key.is_empty() => text.replace(key.as_str(), "[redacted]"),
            _ => text.to_string(),
        }
    }
}

/// A [`Model`] that calls a provider over a [`Transport`].
pub struct HttpModel<T: Transport> {
    config: ProviderConfig,
    transport: T,
}

impl<T: Transport> HttpModel<T> {
    /// A model for `config`.
    pub fn new(config: ProviderConfig, transport: T) -> Self {
        Self { config, transport }
    }

    async fn call(
        &self,
        request: &HttpRequest,
        abort: &AbortSignal,
        on_delta: &mut dyn FnMut(Delta),
    ) -> Result<ModelTurn, ProviderError> {
        let deadline = self
            .transport
            .now_ms()
            .saturating_add(self.config.deadline.as_millis() as u64);
        let mut emitted = false;
        let mut attempt = 0;
        loop {
            let error = match self.attempt(request, abort, on_delta, &mut emitted).await {
                Ok(turn) => return Ok(turn),
                Err(e) => e,
            };
            if emitted
                || abort.is_aborted()
                || attempt >= self.config.max_retries
                || !crate::error::Coded::retryable(&error)
            {
                return Err(error);
            }
            let wait = match &error {
                ProviderError::RateLimited {
                    retry_after_ms: Some(ms),
                } if *ms > MAX_RETRY_AFTER_MS => return Err(error),
                ProviderError::RateLimited {
                    retry_after_ms: Some(ms),
                } => *ms,
                _ => {
                    let base = self.config.retry_base.as_millis() as u64;
                    backoff_ms(base, attempt, self.transport.random())
                }
            };
            if self.transport.now_ms().saturating_add(wait) >= deadline {
                return Err(error);
            }
            self.transport.sleep(Duration::from_millis(wait)).await;
            attempt += 1;
        }
    }

    async fn attempt(
        &self,
        request: &HttpRequest,
        abort: &AbortSignal,
        on_delta: &mut dyn FnMut(Delta),
        emitted: &mut bool,
    ) -> Result<ModelTurn, ProviderError> {
        let mut response = self
            .transport
            .send(request, self.config.request_timeout)
            .await?;
        if !(200..300).contains(&response.status) {
            let wait = retry_after_ms(
                response.header("retry-after"),
                response.header("retry-after-ms"),
                self.transport.now_ms(),
            );
            let mut body = Vec::new();
            while body.len() < ERROR_BODY_LIMIT {
                match response.body.next().await {
                    Some(Ok(chunk)) => body.extend_from_slice(&chunk),
                    _ => break,
                }
            }
            let message = self
                .config
                .scrub(&error_message(&String::from_utf8_lossy(&body)));
            return Err(classify(response.status, wait, message));
        }
        let mut framer = SseFramer::new();
        let mut decoder = self.config.decoder();
        let (mut events, mut deltas) = (Vec::new(), Vec::new());
        let (mut received, mut streamed) = (0, 0);
        let too_large = ProviderError::TooLarge {
            limit: MAX_OUTPUT_BYTES,
        };
        'read: while let Some(chunk) = response.body.next().await {
            if abort.is_aborted() {
                // Dropping the body cancels the request.
                return Err(TransportError::Aborted.into());
            }
            let chunk = chunk.map_err(|e| match e {
                // The connection dropped after the answer began: the stream was cut.
                TransportError::Network(_) => ProviderError::Truncated,
                other => other.into(),
            })?;
            received += chunk.len();
            if received > MAX_STREAM_BYTES {
                return Err(too_large);
            }
            framer.feed(&chunk, &mut events)?;
            for event in events.drain(..) {
                let step = decoder
                    .event(&event, &mut deltas)
                    .map_err(|e| self.scrubbed(e))?;
                if step.frame == Frame::Unknown {
                    self.transport.warn(&format!(
                        "skipped an unknown stream event ({} bytes)",
                        event.data.len()
                    ));
                }
                for delta in deltas.drain(..) {
                    streamed += match &delta {
                        Delta::Text(text) => text.len(),
                        Delta::Thinking { content, .. } => content.len(),
                    };
                    if streamed > MAX_OUTPUT_BYTES {
                        return Err(too_large);
                    }
                    *emitted = true;
                    on_delta(delta);
                }
                if step.terminal {
                    response.body.finished().await;
                    break 'read;
                }
            }
        }
        let turn = decoder.finish(&mut deltas)?;
        if turn_bytes(&turn) > MAX_OUTPUT_BYTES {
            return Err(too_large);
        }
        for delta in deltas.drain(..) {
            on_delta(delta);
        }
        Ok(turn)
    }

    fn scrubbed(&self, e: ProviderError) -> ProviderError {
        match e {
            ProviderError::Stream { message, retryable } => ProviderError::Stream {
                message: self.config.scrub(&message),
                retryable,
            },
            other => other,
        }
    }
}

impl<T: Transport> Model for HttpModel<T> {
    fn generate<'a>(
        &'a self,
        request: ModelRequest<'a>,
        on_delta: &'a mut dyn FnMut(Delta),
    ) -> LocalBoxFuture<'a, Result<ModelTurn, ProviderError>> {
        if let Err(e) = request.check() {
            return Box::pin(async move { Err(e) });
        }
        let (http, dropped) = self.config.request_noting(&request);
        if !dropped.is_empty() {
            let detail = format!(
                "not sent, as the provider lacks them: {}",
                dropped.join(", ")
            );
            self.transport.debug("model_capability_dropped", &detail);
        }
        let abort = request.abort.clone();
        Box::pin(async move { self.call(&http, &abort, on_delta).await })
    }

    fn name(&self, settings: &crate::model::ModelSettings) -> crate::model::ModelName {
        let system = match self.config.kind {
            ProviderKind::OpenAi => "openai",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::WorkersAi => "workers-ai",
            ProviderKind::Demo => "demo",
        };
        crate::model::ModelName {
            system: system.into(),
            model: settings
                .model
                .clone()
                .unwrap_or_else(|| self.config.model.clone()),
        }
    }
}
