//! A finished span, as [`super::Telemetry`] builds it and a platform exports it (OTLP)
//! or shows it (the console's timeline): ids in hex, times in milliseconds.

use crate::trace::TraceContext;
use serde::Serialize;

/// What a span's value is.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Attr {
    /// Text.
    Str(String),
    /// A whole number.
    Int(i64),
    /// A flag.
    Bool(bool),
    /// A list of texts.
    Strs(Vec<String>),
}

impl From<&str> for Attr {
    fn from(s: &str) -> Self {
        Attr::Str(s.into())
    }
}

impl From<String> for Attr {
    fn from(s: String) -> Self {
        Attr::Str(s)
    }
}

impl From<u64> for Attr {
    fn from(n: u64) -> Self {
        Attr::Int(i64::try_from(n).unwrap_or(i64::MAX))
    }
}

impl From<bool> for Attr {
    fn from(b: bool) -> Self {
        Attr::Bool(b)
    }
}

/// What a span stands for (OpenTelemetry's span kinds that occur here).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SpanKind {
    /// Work inside the run.
    Internal,
    /// A call out (the model).
    Client,
}

/// A finished span.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Span {
    /// Its trace (32 hex digits).
    pub trace_id: String,
    /// Its id (16 hex digits).
    pub span_id: String,
    /// Its parent's id, unless it is the trace's root.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_span_id: Option<String>,
    /// `invoke_agent {agent}`, `chat {model}`, `execute_tool {tool}`, …
    pub name: String,
    /// Its kind.
    pub kind: SpanKind,
    /// When it started and ended (ms since the epoch).
    pub start_ms: u64,
    /// When it ended.
    pub end_ms: u64,
    /// Its attributes (OpenTelemetry's GenAI conventions, and `helix.*`), in order;
    /// sent as an object.
    #[serde(serialize_with = "as_object")]
    pub attributes: Vec<(&'static str, Attr)>,
    /// Spans it is linked to (a slice of a run: the run's span).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<TraceContext>,
    /// Why it failed, when it did (the span's status is then an error).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Span {
    /// The attribute `key`, if it has one.
    pub fn attr(&self, key: &str) -> Option<&Attr> {
        self.attributes
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v)
    }
}

fn as_object<S: serde::Serializer>(
    attributes: &[(&'static str, Attr)],
    to: S,
) -> Result<S::Ok, S::Error> {
    to.collect_map(attributes.iter().map(|(k, v)| (k, v)))
}

/// Where finished spans go (the platform's exporter).
pub trait SpanSink {
    /// Takes a finished span.
    fn record(&self, span: Span);
    /// A slice of work ended: what it recorded may be written out together.
    fn flush(&self) -> Result<(), String> {
        Ok(())
    }
}
