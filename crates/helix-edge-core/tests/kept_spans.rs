//! A session's kept spans (`telemetry::KeptSpans`) in a real SQLite: written when each
//! slice ends, read back per run, the export's durable queue (unsent, sent, dropped and
//! counted), the newest kept.

#![cfg(not(target_arch = "wasm32"))] // rusqlite: native only
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

#[path = "support/lite.rs"]
mod lite;
mod support;

use helix_edge_core::runner::Progress;
use helix_edge_core::store::SessionStatus;
use helix_edge_core::telemetry::{
    Attr, Export, ExportCounts, KeptSpans, MAX_KEPT, Span, SpanKind, SpanSink, Telemetry,
};
use serde_json::json;
use std::rc::Rc;
use support::*;

#[test]
fn a_sessions_spans_are_kept_per_slice_and_are_the_exports_queue() {
    let db = lite::Lite::object();
    let kept = Rc::new(KeptSpans::new(db.clone()));
    let w = World::new();
    let r =
        w.runner("p1")
            .with_observer(Rc::new(Telemetry::new(kept.clone(), w.host.clone(), false)));
    w.model
        .calls(vec![w.model.call("add_note", json!({"text": "x"}))])
        .text("Noted.");
    w.create(&r, "assistant", "Note x.");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    let run_id = w.session().head.run.run_id;

    let spans = kept.of_run(&run_id).unwrap();
    let names: Vec<&str> = spans.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "chat unknown",
            "execute_tool add_note",
            // The first step's commit went out with the second model call.
            "chat unknown",
            "commit",
            "commit",
            "agent_slice assistant",
            "invoke_agent assistant"
        ],
        "written when the slice ended, in the order they ended"
    );
    assert_eq!(spans[0]["attributes"]["gen_ai.operation.name"], "chat");
    assert!(kept.of_run("run_other").unwrap().is_empty());

    let all = kept.counts().unwrap();
    assert_eq!(
        all,
        ExportCounts {
            unsent: 7,
            sent: 0,
            dropped: 0
        }
    );
    let first: Vec<i64> = kept.unsent(4).unwrap().iter().map(|(s, _)| *s).collect();
    assert_eq!(first.len(), 4);
    kept.mark(&first, Export::Sent).unwrap();
    let rest: Vec<i64> = kept.unsent(10).unwrap().iter().map(|(s, _)| *s).collect();
    assert!(rest.iter().all(|s| !first.contains(s)));
    kept.mark(&rest, Export::Dropped).unwrap();
    let all = kept.counts().unwrap();
    assert_eq!(
        all,
        ExportCounts {
            unsent: 0,
            sent: 4,
            dropped: 3
        }
    );

    // The newest are kept.
    for _ in 0..MAX_KEPT {
        kept.record(spans_like(&run_id));
    }
    assert_eq!(kept.flush(), Ok(()));
    let left = kept.counts().unwrap();
    assert_eq!(left.unsent + left.sent + left.dropped, MAX_KEPT as u64);
    assert_eq!(left.unsent, MAX_KEPT as u64, "the oldest went first");
}

fn spans_like(run_id: &str) -> Span {
    Span {
        trace_id: "0af7651916cd43dd8448eb211c80319c".into(),
        span_id: "b7ad6b7169203331".into(),
        parent_span_id: None,
        name: "commit".into(),
        kind: SpanKind::Internal,
        start_ms: 1,
        end_ms: 2,
        attributes: vec![("helix.run.id", Attr::Str(run_id.into()))],
        links: Vec::new(),
        error: None,
    }
}
