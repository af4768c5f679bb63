//! Answering a pending call: stored durably in this session (the first answer stands),
//! or — for a call pending in a child this session waits on — routed below, to the
//! child that has it ([`Routed::Descendants`]), or beyond this deployment.

use super::{Routed, Submission};
use crate::auth::Principal;
use crate::runner::{Live, RunError, Runner};
use crate::store::{Answer, AnswerOutcome, Owner, PendingCall, PendingKind, Store, StoreError};

impl<S: Store> Runner<S> {
    /// Stores an answer to a pending call (the first answer wins), as the API token
    /// would ([`submit_as`](Runner::submit_as)).
    pub async fn submit(
        &self,
        session_id: &str,
        submission: Submission,
    ) -> Result<Routed, RunError> {
        self.submit_as(session_id, submission, &Principal::Admin)
            .await
    }

    /// Stores an answer to a pending call from `by` (the first answer wins). The run
    /// resumes on the next `drive` once every pending call of the step is answered or
    /// expired. Answers are submitted to the root session: a call pending in a
    /// descendant (a sub-agent's child session) is [`Routed::Descendants`], to be
    /// passed on. A call whose approval needs a role ([`crate::store::Approvers`]) takes
    /// it only from a holder (or the API token): anyone else is refused (403) and
    /// nothing changes. A user's approval records who decided.
    pub async fn submit_as(
        &self,
        session_id: &str,
        submission: Submission,
        by: &Principal,
    ) -> Result<Routed, RunError> {
        self.submit_on_behalf(session_id, submission, by, None)
            .await
    }

    /// [`submit_as`](Runner::submit_as), for an answer that names who decided it
    /// (`decidedBy`): a deployment that passed on a decision its user made in a session
    /// there. Only the API token may name a decider (anyone else is refused, 403); the
    /// answer records that user.
    pub async fn submit_on_behalf(
        &self,
        session_id: &str,
        submission: Submission,
        by: &Principal,
        decided: Option<Owner>,
    ) -> Result<Routed, RunError> {
        let live = self.load(session_id).await?;
        let call_id = submission.call_id().to_string();
        let call_id = call_id.as_str();
        // A child call is never the client's to answer: an id shared with a call pending
        // in a descendant (models reuse ids like `call_0`) means the descendant's call.
        let own = |kind_ok: fn(PendingKind) -> bool| {
            live.head
                .pending
                .iter()
                .find(|p| p.tool_call_id == call_id && kind_ok(p.kind))
        };
        let Some(pending) = own(|k| k != PendingKind::Child) else {
            // An id of this session's own sub-agent call: that call takes no answer.
            let not_found = match own(|_| true) {
                Some(_) => RunError::KindMismatch {
                    call: call_id.into(),
                    expected: expected_answer(PendingKind::Child),
                },
                None => RunError::ToolCallNotFound(call_id.into()),
            };
            return self.route(&live, &submission, by, not_found).await;
        };
        let decided_by = answerer(by, pending, live.head.owner.as_ref(), decided)?;
        let answered_at = self.host.now_ms();
        let answer = match (pending.kind, submission) {
            (
                PendingKind::Approval,
                Submission::Approval {
                    approved, reason, ..
                },
            ) => Answer::Approval {
                approved,
                reason,
                answered_at,
                decided_by,
            },
            (PendingKind::Client, Submission::ClientResult { outcome, .. }) => match outcome {
                Ok(result) => {
                    // Refused here (413) rather than stored as an error: the call stays
                    // open for an answer that fits.
                    if let Some(bytes) = crate::message::oversized_result(&result) {
                        return Err(StoreError::TooLarge {
                            what: "tool result",
                            bytes,
                            limit: crate::message::MAX_TOOL_RESULT_BYTES,
                        }
                        .into());
                    }
                    // A result that breaks the tool's declared output schema is refused
                    // (400), and the call stays open for one that matches.
                    let agent = self.agents.get(&live.head.agent);
                    let tool = agent.as_ref().and_then(|a| a.tool(&pending.tool_name));
                    if let Some(Err(e)) = tool.map(|t| t.check_output(&result)) {
                        return Err(RunError::ResultInvalid(e.to_string()));
                    }
                    Answer::ClientResult {
                        result,
                        answered_at,
                    }
                }
                Err(error) => Answer::ClientError { error, answered_at },
            },
            (asked, Submission::Input { kind, answer, .. }) if kind == asked => {
                crate::tool::check_answer(pending, &answer).map_err(RunError::Invalid)?;
                Answer::ClientResult {
                    result: answer,
                    answered_at,
                }
            }
            // A child call was filtered out above; kept total without a panic.
            (kind, _) => {
                return Err(RunError::KindMismatch {
                    call: call_id.into(),
                    expected: expected_answer(kind),
                });
            }
        };
        match self
            .journal
            .suspension
            .answer(session_id, &pending.answer_id(), &answer)?
        {
            AnswerOutcome::Stored => {
                self.log_answered(&live, pending, &answer);
                Ok(Routed::Here)
            }
            AnswerOutcome::AlreadyAnswered(_) => Err(RunError::AlreadyResolved(call_id.into())),
        }
    }

    /// A call not pending here: answered before (here, or passed on to a descendant),
    /// possibly pending below, or unknown.
    async fn route(
        &self,
        live: &Live,
        submission: &Submission,
        by: &Principal,
        otherwise: RunError,
    ) -> Result<Routed, RunError> {
        let call_id = submission.call_id();
        let suspension = &self.journal.suspension;
        let answered =
            |call: &str| matches!(suspension.find_answer(&live.head.id, call), Ok(Some(_)));
        if suspension.routed(call_id)?.is_some() || answered(call_id) {
            return Err(RunError::AlreadyResolved(call_id.into()));
        }
        // Passed on beyond this deployment (a remote session that has it).
        if self.route_beyond(&live.head, submission, by).await? {
            return Ok(Routed::Here);
        }
        let children = self.asked_children(&live.head).await?;
        if children.is_empty() {
            return Err(otherwise);
        }
        Ok(Routed::Descendants {
            children,
            otherwise,
        })
    }

    /// Records that the answer to `call_id`, which is not this session's, was taken by
    /// descendant `owner`: a second answer to it is refused here.
    pub fn record_route(&self, call_id: &str, owner: &str) -> Result<(), RunError> {
        self.journal.suspension.route(call_id, owner)?;
        Ok(())
    }
}

/// The user an answer from `by` to `pending` records (for the API token, the decider
/// it names, `decided`; none for session tokens), or why `by` may not give it: a call
/// whose approval needs a role takes it from a holder of the role in the owner's tenant
/// (never the owner, where the tool says so) or the API token; any other call, from
/// whoever reaches the session. Only the API token names a decider.
pub(crate) fn answerer(
    by: &Principal,
    pending: &PendingCall,
    owner: Option<&Owner>,
    decided: Option<Owner>,
) -> Result<Option<Owner>, RunError> {
    let approvers = pending
        .approvers
        .as_ref()
        .filter(|_| pending.kind == PendingKind::Approval);
    let refused = || {
        let who = match approvers {
            Some(a) if a.not_owner => format!(
                "a holder of role '{}' other than the session's owner",
                a.role
            ),
            Some(a) => format!("a holder of role '{}'", a.role),
            None => "whoever reaches the session".into(),
        };
        RunError::NotAnswerer {
            call: pending.tool_call_id.clone(),
            who,
        }
    };
    if decided.is_some() && !matches!(by, Principal::Admin) {
        return Err(RunError::NotAnswerer {
            call: pending.tool_call_id.clone(),
            who: "the API token, when an answer names who decided it".into(),
        });
    }
    match (by, approvers) {
        (Principal::Admin, _) => Ok(decided),
        (Principal::Session(_), None) => Ok(None),
        (Principal::User(caller), None) if caller.reaches(owner) => Ok(Some(caller.user.clone())),
        (Principal::User(caller), Some(a)) if caller.approves(a, owner) => {
            Ok(Some(caller.user.clone()))
        }
        _ => Err(refused()),
    }
}

/// What answers a pending call of `kind`, as a mismatched answer is told.
fn expected_answer(kind: PendingKind) -> &'static str {
    match kind {
        PendingKind::Child => "no answer: it resolves when its sub-agent ends",
        PendingKind::Approval => "an approval-response",
        PendingKind::Client => "a client-tool-result",
        PendingKind::Authorization => "an authorization-response",
        PendingKind::Elicitation => "an elicitation-response",
    }
}
