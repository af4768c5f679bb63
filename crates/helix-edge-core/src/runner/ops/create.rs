//! Creating a session: its first run, atomically (of concurrent creators of one id,
//! exactly one wins), with the first events staged for its commit.

use super::{CreateSession, Created, check_options, new_run};
use crate::chunk::{ChunkBody, ResyncReason, RunStatus};
use crate::runner::{RunError, Runner};
use crate::store::{
    CheckpointRecord, CheckpointStatus, NewSession, SessionHead, SessionStatus, Store,
};
use crate::trace::RunTrace;
use serde_json::Value;

impl<S: Store> Runner<S> {
    /// Creates a session and its first run. Exactly one of concurrent creators of an id
    /// wins; the others get `session_exists`.
    pub async fn create(&self, request: CreateSession) -> Result<Created, RunError> {
        let agent = self.agent(&request.agent)?;
        if request.parent.is_none()
            && request.owner.is_some()
            && request.session_id.contains(CHILD_MARK)
        {
            return Err(RunError::Invalid(format!(
                "session ids containing '{CHILD_MARK}' are sub-agents' sessions: choose another"
            )));
        }
        if let Some(given) = &request.options {
            check_options(given, &agent)?;
        }
        if request.input.is_empty() && request.fork.is_none() {
            return Err(RunError::Invalid(
                "input must hold at least one message".into(),
            ));
        }
        let state = match (request.fork.is_some(), request.state) {
            (true, Some(whole)) => Value::Object(whole),
            (_, overrides) => {
                let mut state = agent.initial_state().clone();
                if let (Some(overrides), Some(obj)) = (overrides, state.as_object_mut()) {
                    obj.extend(overrides);
                }
                state
            }
        };
        if let Some(schema) = agent.state_schema() {
            crate::schema::validate(schema, &state).map_err(|reason| {
                RunError::Invalid(format!(
                    "input.state does not match the agent's state: {reason}"
                ))
            })?;
        }
        let now = self.host.now_ms();
        let run_id = self.host.new_id("run");
        let input_at = request.history.len() as u64;
        let mut messages = request.history;
        messages.extend(request.input);
        let step_count = request.fork.as_ref().map_or(0, |f| f.step_count);
        // A fork of where a run ended, with nothing to answer: an idle copy.
        let idle = request.idle && request.fork.is_some() && input_at == messages.len() as u64;
        let mut run = new_run(run_id.clone(), 1, now, input_at);
        run.options = request.options;
        run.trace = Some(RunTrace::new(&*self.host, request.trace.as_ref()));
        if idle {
            run.status = RunStatus::Completed;
            run.completed_at = Some(now);
        }
        let mut head = SessionHead {
            id: request.session_id.clone(),
            agent: request.agent,
            status: if idle {
                SessionStatus::Completed
            } else {
                SessionStatus::Active
            },
            version: 1,
            commit_id: self.host.new_id("commit"),
            step_count,
            message_count: messages.len() as u64,
            run,
            pending: vec![],
            suspended_reason: None,
            output: None,
            error: None,
            checkpoint_id: None,
            created_at: now,
            updated_at: now,
            parent: request.parent,
            forked_from: request.fork.clone(),
            owner: request.owner,
        };
        let parent = head.parent.clone();
        let checkpoint = CheckpointRecord {
            id: self.host.new_id("ckpt"),
            step_count,
            message_count: head.message_count,
            timestamp: now,
            status: if idle {
                CheckpointStatus::Completed
            } else {
                CheckpointStatus::Active
            },
            run_id: run_id.clone(),
            usage: None,
            stop_reason: None,
            waits: Vec::new(),
        };
        head.checkpoint_id = Some(checkpoint.id.clone());
        let emitter = self.emitter(&head, None);
        let mut events = Vec::new();
        if !idle {
            events.push(emitter.event(ChunkBody::RunStarted { turn: 1 }));
        }
        if let Some(fork) = request.fork {
            // The session's first events: nothing else can come between them.
            events.push(emitter.event(ChunkBody::StreamResync {
                checkpoint_id: fork.checkpoint_id,
                step_count: fork.step_count,
                message_count: input_at,
                from_sequence: self.journal.stream.next_sequence() + 1,
                reason: ResyncReason::Branch,
            }));
        }
        let commit_id = head.commit_id.clone();
        self.journal.stream.stage(&commit_id, 1, events);
        let session = NewSession {
            head,
            state,
            messages,
            checkpoint,
        };
        // A losing creator must leave nothing staged in the winner's journal.
        if let Err(e) = self.store.create(session).await {
            self.journal.stream.discard(&commit_id);
            return Err(self.not_adopted(&request.session_id, parent, e).await);
        }
        self.journal.stream.release(&commit_id);
        let fields = [
            ("session", crate::host::LogValue::Str(&request.session_id)),
            ("run", crate::host::LogValue::Str(&run_id)),
        ];
        let status = if idle {
            SessionStatus::Completed
        } else {
            self.host
                .log(crate::host::Level::Info, "run_started", &fields);
            SessionStatus::Active
        };
        Ok(Created {
            session_id: request.session_id,
            run_id,
            status,
        })
    }
}

/// What marks a child session's id ([`crate::runner::child_session_id`]): a user may not
/// choose such an id, so no one prepares a session for a parent to adopt.
const CHILD_MARK: &str = ".sub-";

impl<S: Store> Runner<S> {
    /// A child's start that finds its id taken: `session_exists` when the session there
    /// is this call's child (a retried start), and otherwise a refusal — a session the
    /// parent did not create is never adopted as its child.
    async fn not_adopted(
        &self,
        id: &str,
        parent: Option<crate::store::ParentRef>,
        error: crate::store::StoreError,
    ) -> RunError {
        let (Some(parent), crate::store::StoreError::Exists(_)) = (parent, &error) else {
            return error.into();
        };
        match self.store.load(id).await {
            Ok(Some(found)) if found.head.parent.as_ref() == Some(&parent) => error.into(),
            Ok(_) => RunError::Invalid(format!(
                "a session {id} exists that is not the child of call {} of {}: it is not adopted",
                parent.tool_call_id, parent.session_id
            )),
            Err(e) => e.into(),
        }
    }
}
