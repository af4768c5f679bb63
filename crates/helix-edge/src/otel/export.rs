//! Sending a session's kept spans to the endpoint: oldest first, in batches, each
//! retried with backoff on what may pass (the network, 408, 429, 5xx) and given up on
//! otherwise — marked dropped and counted in a warning (`otel_spans_dropped`), never
//! failing anything else. One export per session at a time.

use super::{Endpoint, otlp};
use crate::host::Level;
use crate::telemetry::{Export, KeptSpans};
use crate::worker_host::log;
use futures::future::{Either, select};
use serde_json::json;
use std::cell::RefCell;
use std::time::Duration;
use worker::{AbortController, Delay, Fetch, Headers};

/// Spans per export request.
const BATCH: u32 = 256;
/// How long one attempt may take.
const TIMEOUT: Duration = Duration::from_secs(10);
/// The waits before the second and third attempts.
const BACKOFF: [Duration; 2] = [Duration::from_millis(500), Duration::from_secs(2)];

thread_local! {
    /// The sessions whose spans are being exported (in this isolate).
    static EXPORTING: crate::busy::Sessions = const { RefCell::new(Vec::new()) };
}

/// Sends session `id`'s unsent spans; returns once each was sent or dropped.
pub async fn export(id: &str, kept: &KeptSpans, to: &Endpoint) {
    let Some(_exporting) = crate::busy::Busy::take(&EXPORTING, id) else {
        return; // the export under way takes the new ones too
    };
    export_all(id, kept, to).await;
}

async fn export_all(id: &str, kept: &KeptSpans, to: &Endpoint) {
    loop {
        let batch = match kept.unsent(BATCH) {
            Ok(batch) if !batch.is_empty() => batch,
            Ok(_) => return,
            Err(e) => {
                log(
                    Level::Warn,
                    "otel_export_failed",
                    json!({ "session": id, "error": e }),
                );
                return;
            }
        };
        let (seqs, spans): (Vec<i64>, Vec<_>) = batch.into_iter().unzip();
        let body = otlp::encode(&spans, &to.service);
        let (export, failure) = match send_retrying(to, body).await {
            Ok(()) => (Export::Sent, None),
            Err(reason) => (Export::Dropped, Some(reason)),
        };
        if let Err(e) = kept.mark(&seqs, export) {
            log(
                Level::Warn,
                "otel_export_failed",
                json!({ "session": id, "error": e }),
            );
            return;
        }
        if let Some(reason) = failure {
            let dropped = kept.counts().map_or(0, |c| c.dropped);
            let fields = json!({ "session": id, "spans": seqs.len(), "reason": reason,
                "droppedTotal": dropped });
            log(Level::Warn, "otel_spans_dropped", fields);
        }
    }
}

/// Whether a failed attempt may pass if tried again, and why it failed.
struct Failure {
    retryable: bool,
    reason: String,
}

async fn send_retrying(to: &Endpoint, body: Vec<u8>) -> Result<(), String> {
    let mut attempt = 0;
    loop {
        let failure = match send(to, &body).await {
            Ok(()) => return Ok(()),
            Err(failure) => failure,
        };
        match BACKOFF.get(attempt) {
            Some(wait) if failure.retryable => Delay::from(*wait).await,
            _ => return Err(failure.reason),
        }
        attempt += 1;
    }
}

async fn send(to: &Endpoint, body: &[u8]) -> Result<(), Failure> {
    let network = |reason: String| Failure {
        retryable: true,
        reason,
    };
    // What the configuration gets wrong (a header, the URL) will not pass on a retry.
    let configured = |e: worker::Error| Failure {
        retryable: false,
        reason: format!("the endpoint's configuration: {e}"),
    };
    let headers = Headers::new();
    let set = |k: &str, v: &str| headers.set(k, v).map_err(configured);
    set("content-type", otlp::CONTENT_TYPE)?;
    for (key, value) in &to.headers {
        set(key, value)?;
    }
    let body = worker::js_sys::Uint8Array::from(body).into();
    let request =
        crate::outgoing::unredirected(&to.url, "POST", &headers, Some(body)).map_err(configured)?;
    let controller = AbortController::default();
    let signal = controller.signal();
    let fetch = Fetch::Request(request);
    let sent = Box::pin(fetch.send_with_signal(&signal));
    let response = match select(sent, Delay::from(TIMEOUT)).await {
        Either::Left((response, _)) => response.map_err(|e| network(e.to_string()))?,
        Either::Right(_) => {
            controller.abort();
            return Err(network(format!("no answer in {} s", TIMEOUT.as_secs())));
        }
    };
    match response.status_code() {
        200..=299 => Ok(()),
        status => Err(Failure {
            retryable: matches!(status, 408 | 429 | 500..=599),
            reason: format!("the endpoint answered {status}"),
        }),
    }
}
