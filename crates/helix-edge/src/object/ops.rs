//! The API's session operations, as the session's object serves them, and the internal
//! create. Bodies are parsed strictly here; the runner validates against durable state.

use super::{Inner, Reply, accepted};
use crate::api::{
    ApiError, CreatedView, MessageBody, MessagePage, ReasonBody, SessionView, ToolResultBody, page,
    parse_body,
};
use crate::auth::Principal;
use crate::host::Level;
use crate::http::{ObjectRequest, call_object, internal, json_response};
use crate::lifecycle::needs_drive;
use crate::runner::{CreateSession, Routed, RunError, Runner};
use crate::storage::ObjectStore;
use crate::store::{SessionHead, Store, StoreError};
use crate::trace::TraceContext;
use crate::worker_host::log;
use serde_json::json;
use std::rc::Rc;
use worker::{Date, Request};

type R = Runner<ObjectStore>;

/// An optional body: none is `{}`.
pub(super) fn or_empty(body: &[u8]) -> &[u8] {
    if body.is_empty() { b"{}" } else { body }
}

impl Inner {
    /// Creates the object's session from a `CreateSession` (validated by the worker's
    /// router, or built by a parent for its child) and answers the API's 201.
    pub(super) async fn create(self: &Rc<Self>, id: &str, req: &Request, body: &[u8]) -> Reply {
        let text = std::str::from_utf8(body).map_err(|e| internal("create", e))?;
        let request: CreateSession =
            serde_json::from_str(text).map_err(|e| internal("create", e))?;
        if request.session_id != id {
            return Err(internal(
                "create",
                "the session id does not match the object",
            ));
        }
        let root = request.parent.as_ref().map_or(id, |p| p.root_id.as_str());
        self.place(id, Inner::given_shard(req), root)?;
        let parts = self.attach(id)?;
        self.remember(id)?;
        let created = parts.runner.create(request).await?;
        self.schedule(id);
        let setup = crate::setup::Setup::get(&self.env, &self.app)?;
        let now_secs = Date::now().as_millis() / 1000;
        json_response(201, &CreatedView::new(created, &setup.auth, now_secs))
    }

    /// `GET /v1/sessions/{id}`, with the calls pending below it. A read continues a
    /// session that has work and nobody on it.
    pub(super) async fn get(self: &Rc<Self>, runner: &R, id: &str) -> Reply {
        let loaded = runner.store().load(id).await.map_err(RunError::from)?;
        let loaded = loaded.ok_or_else(|| RunError::Store(StoreError::NotFound(id.into())))?;
        // Read with the state, before anything else can commit: a client that applies
        // the stream after this sequence to this state never misses or repeats a patch
        // (a step in progress streams again from its start: its live patches are not in
        // the state yet).
        let sequence = self.parts()?.stream.committed_seq();
        self.touch(runner, id, &loaded.head);
        let below = runner.descendant_calls(&loaded.head).await?;
        let view = SessionView::from(loaded).at_sequence(sequence);
        let view = view.with_descendant_calls(below);
        let Some(add) = super::VIEW else {
            return json_response(200, &view);
        };
        let mut view = serde_json::to_value(view).map_err(|e| internal("view", e))?;
        if let Some(fields) = view.as_object_mut() {
            add(&*self.parts()?, fields);
        }
        json_response(200, &view)
    }

    /// Schedules a drive when a read finds the session with work and nobody on it.
    pub(super) fn touch(self: &Rc<Self>, runner: &R, id: &str, head: &SessionHead) {
        let Ok(parts) = self.parts() else { return };
        let suspension = &parts.runner;
        let answered = |call: &str| suspension.has_answer(id, call);
        let now = Date::now().as_millis();
        if needs_drive(head, answered, runner.is_driving(), now) {
            self.schedule(id);
        }
    }

    pub(super) async fn head(&self, runner: &R, id: &str) -> Result<SessionHead, RunError> {
        let loaded = runner.store().load(id).await?;
        Ok(loaded
            .ok_or_else(|| RunError::Store(StoreError::NotFound(id.into())))?
            .head)
    }

    /// `GET …/messages?offset=&limit=&includeThinking=`.
    pub(super) async fn messages(&self, runner: &R, id: &str, req: &Request) -> Reply {
        let query = page(&crate::api::query_pairs(&req.inner().url()))?;
        let head = self.head(runner, id).await?;
        let messages = runner
            .store()
            .messages(id, query.offset, query.limit)
            .await
            .map_err(RunError::from)?;
        json_response(200, &MessagePage::new(messages, head.message_count, &query))
    }

    /// `POST …/tool-results`: stored here, or passed on to the child sessions this one
    /// waits on until one takes it (their answer is the client's).
    pub(super) async fn submit(
        self: &Rc<Self>,
        runner: &R,
        id: &str,
        body: Vec<u8>,
        by: &Principal,
    ) -> Reply {
        let parsed = parse_body::<ToolResultBody>(&body)?;
        let decided = parsed.decided_by();
        let submission = parsed.into_submission()?;
        let call_id = submission.call_id().to_string();
        let routed = runner.submit_on_behalf(id, submission, by, decided).await?;
        let (children, otherwise) = match routed {
            Routed::Here => {
                self.schedule(id);
                return accepted();
            }
            Routed::Descendants {
                children,
                otherwise,
            } => (children, otherwise),
        };
        for child in children {
            let path = format!("/v1/sessions/{child}/tool-results");
            // Passed on as the one who asks: the child decides whether they may. (Only a
            // build with a door has users: without one this is known to be `None`.)
            let user = super::DOOR.and(by.user());
            let request = ObjectRequest {
                user: user.map(crate::auth::Caller::to_header),
                session_token: matches!(by, Principal::Session(_)),
                ..ObjectRequest::post(&path, body.clone())
            };
            let resp = call_object(&self.env, self.app.sessions(), &child, request).await?;
            match resp.status_code() {
                404 => continue,
                202 => {
                    runner.record_route(&call_id, &child)?;
                    return Ok(resp);
                }
                _ => return Ok(resp),
            }
        }
        Err(otherwise.into())
    }

    /// `POST …/messages`: a follow-up run.
    pub(super) async fn send_message(
        self: &Rc<Self>,
        runner: &R,
        id: &str,
        body: &[u8],
        trace: Option<TraceContext>,
    ) -> Reply {
        let (options, body) = crate::provider_options::take(body).map_err(ApiError::validation)?;
        let messages = parse_body::<MessageBody>(&body)?.into_messages()?;
        let run_id = runner.send_messages(id, messages, options, trace).await?;
        self.schedule(id);
        json_response(202, &json!({ "runId": run_id }))
    }

    /// `POST …/interrupt`.
    pub(super) async fn interrupt(self: &Rc<Self>, runner: &R, id: &str, body: &[u8]) -> Reply {
        let ReasonBody { reason } = parse_body(or_empty(body))?;
        runner.interrupt(id, reason).await?;
        self.schedule(id);
        accepted()
    }

    /// `POST …/resume`.
    pub(super) async fn resume(self: &Rc<Self>, runner: &R, id: &str, body: &[u8]) -> Reply {
        let _: ReasonBody = parse_body(or_empty(body))?;
        let run_id = runner.resume(id).await?;
        self.schedule(id);
        json_response(202, &json!({ "runId": run_id }))
    }

    /// `POST …/abort`.
    pub(super) async fn abort(&self, runner: &R, id: &str, body: &[u8]) -> Reply {
        let ReasonBody { reason } = parse_body(or_empty(body))?;
        runner.abort(id, reason).await?;
        log(Level::Info, "run_aborted", json!({ "session": id }));
        accepted()
    }
}
