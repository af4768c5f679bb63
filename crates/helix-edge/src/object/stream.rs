//! `GET …/stream`: replays the stored events after `Last-Event-ID` (or `?after=`), then
//! streams live until the run ends; while suspended, `: ping` comments keep the
//! connection open. A request that starts or continues a run may be answered the same
//! way, from just before its run's events (SPEC §2d).

use super::{Inner, Parts, Reply};
use crate::api::StreamQuery;
use crate::http::internal;
use crate::sqlite::CLIENT_QUEUE;
use crate::store::SessionStatus;
use futures::StreamExt;
use futures::channel::mpsc;
use std::rc::Rc;
use std::time::Duration;
use worker::{Delay, Request, Response};

/// Most SSE frames sent to a client in one chunk.
const FRAMES_PER_CHUNK: usize = 64;

impl Inner {
    pub(super) async fn stream(self: &Rc<Self>, parts: &Parts, id: &str, req: &Request) -> Reply {
        let last_event_id = req.headers().get("last-event-id").ok().flatten();
        let query = crate::api::query_pairs(&req.inner().url());
        let StreamQuery { after, follow } = StreamQuery::parse(last_event_id.as_deref(), &query)?;
        self.stream_after(parts, id, after, follow).await
    }

    /// A request that started or continued a run, answered with the stream after
    /// `from` (SPEC §2d): `answer`, its JSON, moves to headers, and `from` is
    /// `x-helix-after` (where a client that lost the connection resumes).
    pub(super) async fn answer_with_stream(
        self: &Rc<Self>,
        id: &str,
        from: u64,
        mut answer: Response,
    ) -> Reply {
        // A refusal (a child's, passed on) stays the JSON error it is.
        if !(200..300).contains(&answer.status_code()) {
            return Ok(answer);
        }
        let text = answer.text().await.map_err(|e| internal("answer", e))?;
        let fields = serde_json::from_str(&text).unwrap_or_default();
        let resp = self.stream_after(&*self.parts()?, id, from, true).await?;
        // The same answer in another representation: its status stays.
        let mut resp = resp.with_status(answer.status_code());
        let headers = resp.headers_mut();
        let after = ("x-helix-after".to_string(), from.to_string());
        for (k, v) in crate::api::answer_headers(&fields)
            .into_iter()
            .chain([after])
        {
            headers.set(&k, &v).map_err(|e| internal("headers", e))?;
        }
        Ok(resp)
    }

    /// The session's events after `after`, then (`follow`) live until its run ends.
    async fn stream_after(
        self: &Rc<Self>,
        parts: &Parts,
        id: &str,
        after: u64,
        follow: bool,
    ) -> Reply {
        let head = parts.runner.head_for_stream(id).await?;
        let (tx, rx) = mpsc::channel::<Vec<u8>>(CLIENT_QUEUE);
        let ended =
            head.status != SessionStatus::Active && head.status != SessionStatus::Interrupted;
        let backlog = match follow {
            true => parts.stream.subscribe(after, tx),
            false => parts.stream.backlog(after),
        };
        let live = if ended {
            parts.stream.close_clients();
            None
        } else if !follow {
            None
        } else {
            self.start_pings();
            Some(rx.take_while(|frame| futures::future::ready(!frame.is_empty())))
        };
        // Frames that are ready together (a replayed backlog, a committed batch) go out
        // as one chunk: one write per batch instead of one per event.
        let chunks = futures::stream::iter(backlog)
            .chain(futures::stream::iter(live).flatten())
            .ready_chunks(FRAMES_PER_CHUNK)
            .map(|frames| Ok::<Vec<u8>, worker::Error>(frames.concat()));
        let mut resp = Response::from_stream(chunks).map_err(|e| internal("stream", e))?;
        let headers = resp.headers_mut();
        for (k, v) in [
            ("content-type", "text/event-stream"),
            ("cache-control", "no-cache"),
        ] {
            headers.set(k, v).map_err(|e| internal("headers", e))?;
        }
        Ok(resp)
    }

    /// One heartbeat loop per object, while any client is connected.
    pub(super) fn start_pings(self: &Rc<Self>) {
        if self.pinging.replace(true) {
            return;
        }
        let inner = self.clone();
        let every = crate::setup::Setup::get(&self.env, &self.app).map_or(15_000, |s| s.ping_ms);
        worker::wasm_bindgen_futures::spawn_local(async move {
            loop {
                Delay::from(Duration::from_millis(every)).await;
                let parts = inner.parts.borrow().clone();
                let connected = parts.map_or(0, |p| p.stream.ping());
                if connected == 0 {
                    inner.pinging.set(false);
                    break;
                }
            }
        });
    }
}
