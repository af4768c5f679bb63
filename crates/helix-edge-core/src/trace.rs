//! Trace identity: the W3C `traceparent` a request brings ([`TraceContext`]) and the
//! trace a run keeps through its suspensions and restarts ([`RunTrace`], on its record),
//! so every span of the run — in any slice, on any instance — joins one trace. The
//! spans themselves are built by `telemetry` (feature `traces`) from what the runner
//! tells its [`Observer`](crate::runner::Observer).

use crate::host::Host;
use serde::{Deserialize, Serialize};

/// A span to continue: its trace and its id (lowercase hex, 32 and 16 digits).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TraceContext {
    /// The trace.
    pub trace_id: String,
    /// The span.
    pub span_id: String,
}

impl TraceContext {
    /// Reads a `traceparent` header (version `00`, or a later one read as `00`); `None`
    /// for one that is malformed or names the invalid (all-zero) trace or span.
    pub fn parse(traceparent: &str) -> Option<Self> {
        let mut parts = traceparent.trim().split('-');
        let (version, trace_id, span_id, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        let hex = |s: &str, n: usize| {
            s.len() == n && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        };
        let valid = hex(version, 2)
            && version != "ff"
            && (version != "00" || parts.next().is_none())
            && hex(trace_id, 32)
            && hex(span_id, 16)
            && hex(flags, 2)
            && trace_id.bytes().any(|b| b != b'0')
            && span_id.bytes().any(|b| b != b'0');
        valid.then(|| Self {
            trace_id: trace_id.into(),
            span_id: span_id.into(),
        })
    }

    /// The `traceparent` header that continues this span (sampled).
    pub fn header(&self) -> String {
        format!("00-{}-{}-01", self.trace_id, self.span_id)
    }
}

/// A run's trace: its id, the id of the run's own span (`invoke_agent`, which every
/// span of the run descends from) and the caller's span it continues, if any.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunTrace {
    /// The trace (32 hex digits).
    pub trace_id: String,
    /// The run's span (16 hex digits).
    pub span_id: String,
    /// The caller's span (a `traceparent`'s, or the parent run's for a sub-agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_span_id: Option<String>,
}

impl RunTrace {
    /// A new run's trace: the caller's, continued, or a new one.
    pub fn new(host: &dyn Host, parent: Option<&TraceContext>) -> Self {
        Self {
            trace_id: parent.map_or_else(|| host.random_hex(16), |p| p.trace_id.clone()),
            span_id: host.random_hex(8),
            parent_span_id: parent.map(|p| p.span_id.clone()),
        }
    }

    /// The context a child run (a sub-agent's) continues.
    pub fn context(&self) -> TraceContext {
        TraceContext {
            trace_id: self.trace_id.clone(),
            span_id: self.span_id.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparents_are_read_strictly() {
        let ok = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let ctx = TraceContext::parse(ok).unwrap();
        assert_eq!(ctx.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(ctx.span_id, "00f067aa0ba902b7");
        assert_eq!(ctx.header(), ok);
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-extra";
        assert!(
            TraceContext::parse(later).is_some(),
            "a later version's fields"
        );
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        ] {
            assert_eq!(TraceContext::parse(bad), None, "{bad:?}");
        }
    }
}
