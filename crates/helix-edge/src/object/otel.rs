//! The `otel` capability: the runner observed by [`Telemetry`], its spans kept in the
//! session's SQLite with one for each replication to D1, exported after each slice, each
//! replication and an abort (`wait_until`, after the response), and served per run (`GET /v1/sessions/{id}/runs/{runId}/spans`, the
//! console's timeline).

use super::capability::{Call, Capability, NOTHING};
use super::{Inner, Reply};
use crate::api::{ApiError, Operation};
use crate::host::{Host, Level};
use crate::http::json_response;
use crate::otel::{Endpoint, captures_content, export::export};
use crate::runner::RunError;
use crate::sqlite::{Db, Sent, sends, text};
use crate::store::rows::Arg;
use crate::store::{Store, StoreError};
use crate::telemetry::{KeptSpans, Span, SpanKind, SpanSink, Telemetry};
use crate::worker_host::{WorkerHost, config_value};
use serde_json::json;
use std::rc::Rc;
use worker::Date;

pub(super) const OTEL: Capability = Capability {
    equip: Some(|runner, wiring| {
        let kept = Rc::new(KeptSpans::new(wiring.sql.clone()));
        let content = captures_content(|name| config_value(wiring.env, name));
        runner.with_observer(Rc::new(Telemetry::new(kept, Rc::new(WorkerHost), content)))
    }),
    operations: &[
        (Operation::ListSpans, |inner, call| {
            Box::pin(inner.spans(call))
        }),
        // An abort ends its run outside any slice: its span goes out at once.
        (Operation::Abort, |inner, call| {
            Box::pin(async move {
                let parts = inner.attach(call.id)?;
                let reply = inner.abort(&parts.runner, call.id, call.body).await;
                inner.export_spans(call.id);
                reply
            })
        }),
    ],
    after_slice: Some(|inner, id| {
        inner.export_spans(id);
        Box::pin(async { true })
    }),
    on_replicated: Some(|inner, id, lags, sends| inner.replicated(id, lags, sends)),
    ..NOTHING
};

impl Inner {
    /// A replication to D1 as a span of the session's run (`replicate`, a child of the
    /// run's span: its batches and the longest a commit waited), then sent.
    fn replicated(&self, id: &str, lags: &[u64], sent: &[u64]) {
        let Ok(parts) = self.parts() else { return };
        if lags.is_empty() {
            return; // nothing was waiting for D1
        }
        let q = "SELECT head ->> '$.run.trace.traceId', head ->> '$.run.trace.spanId', \
                 head ->> '$.run.runId' FROM sessions WHERE id = ?1";
        let rows = parts
            .sql
            .query(q, &[Arg::Text(id.into())])
            .unwrap_or_default();
        let cells = rows.first().map(|r| (text(r, 0), text(r, 1), text(r, 2)));
        let Some((Some(trace_id), Some(run_span), Some(run_id))) = cells else {
            return; // a run recorded before traces
        };
        let batches: Vec<Sent> = sends(sent).collect();
        let took: u64 = batches.iter().map(|b| b.ms).sum();
        let now = Date::now().as_millis();
        let kept = KeptSpans::new(parts.sql.clone());
        kept.record(Span {
            trace_id,
            span_id: WorkerHost.random_hex(8),
            parent_span_id: Some(run_span),
            name: "replicate".into(),
            kind: SpanKind::Client,
            start_ms: now.saturating_sub(took),
            end_ms: now,
            attributes: vec![
                ("gen_ai.conversation.id", id.into()),
                ("helix.run.id", run_id.into()),
                ("db.system.name", "cloudflare.d1".into()),
                ("helix.replication.commits", (lags.len() as u64).into()),
                ("helix.replication.batches", (batches.len() as u64).into()),
                (
                    "helix.replication.max_lag_ms",
                    lags.iter().copied().max().unwrap_or(0).into(),
                ),
            ],
            links: Vec::new(),
            error: None,
        });
        if kept.flush().is_ok() {
            self.export_spans(id);
        }
    }

    /// The OTLP endpoint the deployment configures, if any (one it refuses is said in
    /// the log, once per isolate, and spans are only kept).
    fn endpoint(&self) -> Option<Endpoint> {
        match Endpoint::configured(|name| config_value(&self.env, name))? {
            Ok(endpoint) => Some(endpoint),
            Err(why) => {
                thread_local! {
                    static SAID: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
                }
                if !SAID.replace(true) {
                    crate::worker_host::log(
                        Level::Error,
                        "otel_misconfigured",
                        json!({ "error": why }),
                    );
                }
                None
            }
        }
    }

    /// Sends the session's unsent spans, after the response, when an endpoint is set.
    fn export_spans(&self, id: &str) {
        let Some(to) = self.endpoint() else {
            return;
        };
        let Ok(parts) = self.parts() else { return };
        let kept = KeptSpans::new(parts.sql.clone());
        let id = id.to_string();
        self.state
            .wait_until(async move { export(&id, &kept, &to).await });
    }

    /// `GET …/runs/{runId}/spans`: the run's kept spans, oldest first, and how the
    /// session's export stands.
    async fn spans(&self, call: &Call<'_>) -> Reply {
        let parts = self.attach(call.id)?;
        let run_id = call.item.unwrap_or_default();
        let runs = parts
            .runner
            .store()
            .runs(call.id)
            .await
            .map_err(RunError::from)?;
        if runs.is_empty() {
            return Err(RunError::Store(StoreError::NotFound(call.id.into())).into());
        }
        let Some(run) = runs.iter().find(|r| r.run_id == run_id) else {
            let message = format!("No run '{run_id}' in this session.");
            return Err(ApiError::client(404, "run_not_found", message));
        };
        let kept = KeptSpans::new(parts.sql.clone());
        let spans = kept
            .of_run(run_id)
            .map_err(|e| crate::http::internal("spans", e))?;
        let export = kept
            .counts()
            .map_err(|e| crate::http::internal("spans", e))?;
        let exporting = self.endpoint().is_some();
        json_response(
            200,
            &json!({
                "runId": run_id,
                "traceId": run.trace.as_ref().map(|t| t.trace_id.as_str()),
                "spans": spans,
                "export": { "endpoint": exporting, "unsent": export.unsent,
                    "sent": export.sent, "dropped": export.dropped },
            }),
        )
    }
}
