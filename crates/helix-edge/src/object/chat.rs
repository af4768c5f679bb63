//! The AI SDK's chat routes, as a session's object serves them: `POST /v1/chat` takes
//! what the client sends (a new user message, or answers to what the run waits on),
//! applies it like the v1 operations do, and answers with the run as a UI message stream
//! until it ends or waits for a human; `GET /v1/chat/{id}/stream` replays the active
//! run's message and goes on live.

use super::capability::{Capability, FollowUp, NOTHING};
use super::{Inner, Parts, Reply};
use crate::api::Operation;
use crate::chat::{ChatRequest, ChatTurn, UI_DONE, UiStream};
use crate::http::internal;
use crate::runner::{CreateSession, RunError};
use crate::sqlite::{CLIENT_QUEUE, SqliteStreamLog};
use crate::store::{SessionStatus, Store, StoreError};
use futures::StreamExt;
use futures::channel::mpsc;
use futures::stream::LocalBoxStream;
use serde_json::Value;
use std::rc::Rc;
use worker::Response;

/// The AI SDK's chat routes.
pub(super) const CHAT: Capability = Capability {
    operations: &[
        (Operation::Chat, |inner, call| {
            Box::pin(inner.chat(call.id, call.body, &call.by, super::trace_of(call.req)))
        }),
        (Operation::ChatStream, |inner, call| {
            Box::pin(inner.chat_stream(call.id))
        }),
    ],
    ..NOTHING
};

/// The capability's way for a chat message to follow up, if one has it: known when the
/// build is compiled, so that a build without one carries no code for it.
const FOLLOW_UP: Option<FollowUp> = {
    let (mut i, mut found) = (0, None);
    while i < super::CAPABILITIES.len() {
        if let Some(follow) = super::CAPABILITIES[i].follow_up {
            found = Some(follow);
        }
        i += 1;
    }
    found
};

/// Whether a chat message may wait its turn.
const MAY_WAIT: bool = FOLLOW_UP.is_some();

/// One stored event of an SSE frame the stream log sent: `(event, data)`; `None` for
/// comments (pings).
fn parse_frame(frame: &[u8]) -> Option<(String, Value)> {
    let text = std::str::from_utf8(frame).ok()?;
    let mut event = None;
    let mut data = None;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("event: ") {
            event = Some(v.to_string());
        } else if let Some(v) = line.strip_prefix("data: ") {
            data = serde_json::from_str(v).ok();
        }
    }
    Some((event?, data?))
}

/// A client's frames of the stream after `from`: the backlog, then live until the
/// stream log ends them (after an `end` or `fail`).
fn follow(log: &SqliteStreamLog, from: u64) -> LocalBoxStream<'static, Vec<u8>> {
    let (tx, rx) = mpsc::channel::<Vec<u8>>(CLIENT_QUEUE);
    let backlog = log.subscribe(from, tx);
    let live = rx.take_while(|frame| futures::future::ready(!frame.is_empty()));
    futures::stream::iter(backlog).chain(live).boxed_local()
}

impl Inner {
    /// `POST /v1/chat` for this session.
    async fn chat(
        self: &Rc<Self>,
        id: &str,
        body: &[u8],
        by: &crate::auth::Principal,
        trace: Option<crate::trace::TraceContext>,
    ) -> Reply {
        // A chat's first message creates its session: on its shard, before anything.
        self.place(id, None, id)?;
        let parts = self.attach(id)?;
        let request = ChatRequest::parse(body)?;
        let runner = &parts.runner;
        let from = parts.stream.last_seq();
        let loaded = runner.store().load(id).await.map_err(RunError::from)?;
        let mut waits = false;
        let (message_id, known) = match loaded {
            None => {
                let text = request.user_text.as_deref();
                let text = text.ok_or_else(|| RunError::Store(StoreError::NotFound(id.into())))?;
                let message = request.user_message(text);
                let setup = crate::setup::Setup::get(&self.env, &self.app)?;
                let agent = match request.agent {
                    Some(agent) => agent,
                    None => setup
                        .agents
                        .iter()
                        .next()
                        .map(|a| a.name().to_string())
                        .ok_or_else(|| internal("chat", "no agents"))?,
                };
                self.remember(id)?;
                let create = CreateSession {
                    input: vec![message],
                    options: request.provider_options,
                    owner: by.user().map(|c| c.user.clone()),
                    trace,
                    ..CreateSession::new(id, agent, "")
                };
                let created = runner.create(create).await?;
                self.schedule(id);
                (created.run_id, Vec::new())
            }
            Some(loaded) => {
                let head = loaded.head;
                let mut pending = head.pending.clone();
                pending.extend(runner.descendant_calls(&head).await?);
                let mut known: Vec<String> = Vec::new();
                let (answered, run_id) = match request.turn(&pending)? {
                    ChatTurn::Answers(answers) => {
                        for answer in answers {
                            let body = answer.tool_result_body().to_string().into_bytes();
                            self.submit(runner, id, body, by).await?;
                            known.push(answer.call_id().to_string());
                        }
                        (true, head.run.run_id.clone())
                    }
                    ChatTurn::Message(text) => {
                        let message = request.user_message(text);
                        let options = request.provider_options.clone();
                        let (run_id, queued) = match FOLLOW_UP {
                            Some(follow) => {
                                let start = (options, trace);
                                let followed = follow(self, id, body, vec![message], start);
                                let followed = followed.await?;
                                (followed.run_id, followed.queued.is_some())
                            }
                            None => {
                                let messages = vec![message];
                                let run_id =
                                    runner.send_messages(id, messages, options, trace).await?;
                                self.schedule(id);
                                (run_id, false)
                            }
                        };
                        waits = queued;
                        (false, run_id)
                    }
                };
                // The client appends this answer to the assistant message it continues.
                let message_id = request.message_id(answered, &run_id);
                known.extend(head.pending.iter().map(|p| p.tool_call_id.clone()));
                (message_id, known)
            }
        };
        let ui = UiStream::new(id, &message_id, known);
        // A queued message's answer is its own run (the message's id), when it starts.
        let ui = match MAY_WAIT && waits {
            true => ui.awaiting(&message_id),
            false => ui,
        };
        self.ui_stream(&parts, from, ui)
    }

    /// `GET /v1/chat/{id}/stream`: the active run's message from its start, then live;
    /// 204 when no run is active.
    async fn chat_stream(self: &Rc<Self>, id: &str) -> Reply {
        let parts = self.attach(id)?;
        let parts = &parts;
        let head = parts.runner.head_for_stream(id).await?;
        let start = parts.stream.run_start(id);
        match (head.status, start) {
            (SessionStatus::Active, Some(start)) => {
                let ui = UiStream::new(id, &head.run.run_id, Vec::new());
                self.ui_stream(parts, start - 1, ui)
            }
            _ => Response::empty()
                .map(|r| r.with_status(204))
                .map_err(|e| internal("chat stream", e)),
        }
    }

    /// The stream after `from`, as UI message chunks, until `ui` says the answer is
    /// complete (or the session's stream ends).
    fn ui_stream(self: &Rc<Self>, parts: &Parts, from: u64, ui: UiStream) -> Reply {
        // The runs before a queued message's own end the live stream: it is followed
        // again (from the start: all it saw so far it passed over) until its run has
        // been shown.
        let source = match MAY_WAIT && ui.is_awaiting() {
            true => {
                let log = parts.stream.clone();
                let again = futures::stream::repeat(()).flat_map(move |()| follow(&log, from));
                again.boxed_local()
            }
            false => follow(&parts.stream, from),
        };
        let body = futures::stream::unfold(Some((source, ui)), |state| async move {
            let (mut source, mut ui) = state?;
            loop {
                let Some(frame) = source.next().await else {
                    return Some((Ok(UI_DONE.as_bytes().to_vec()), None));
                };
                if frame.starts_with(b":") {
                    return Some((Ok(frame), Some((source, ui))));
                }
                let Some((event, data)) = parse_frame(&frame) else {
                    continue;
                };
                // (A build whose chat messages never wait has no code for passing over.)
                let passed = MAY_WAIT.then(|| ui.pass_over(&event, &data)).flatten();
                let mut out = passed.unwrap_or_else(|| ui.frames(&event, &data));
                if ui.is_done() {
                    out.push_str(UI_DONE);
                    return Some((Ok::<Vec<u8>, worker::Error>(out.into_bytes()), None));
                }
                if !out.is_empty() {
                    return Some((Ok(out.into_bytes()), Some((source, ui))));
                }
            }
        });
        self.start_pings();
        let mut resp = Response::from_stream(body).map_err(|e| internal("chat", e))?;
        let headers = resp.headers_mut();
        for (k, v) in [
            ("content-type", "text/event-stream"),
            ("cache-control", "no-cache"),
            ("x-vercel-ai-ui-message-stream", "v1"),
        ] {
            headers.set(k, v).map_err(|e| internal("headers", e))?;
        }
        Ok(resp)
    }
}
