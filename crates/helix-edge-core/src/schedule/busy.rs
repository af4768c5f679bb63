//! What a message does when it arrives while the session is busy (`whenBusy`): a run is
//! active or waits on a human, or messages already wait their turn. The decision is pure;
//! the session's object carries it out on its durable queue ([`super::table`]).

use crate::agent::AgentBuilder;
use crate::api::ApiError;
use crate::message::Message;
use crate::wire::wire_enum;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::borrow::Cow;

/// The field of a follow-up's body that gives its policy.
const FIELD: &str = "whenBusy";

/// Messages a session's queue holds at most; one more is refused (429 `queue_full`).
pub const MAX_QUEUED: usize = 50;

wire_enum! {
    /// A message's policy for a busy session.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub enum WhenBusy {
        /// Refused: 409 `session_busy` (a schedule's fire is skipped and counted).
        #[default]
        Reject = "reject",
        /// Queued: its own run once the runs before it end, in order.
        Enqueue = "enqueue",
        /// The current run stops at its next step boundary (a run waiting on a human
        /// has its calls cancelled first), then this message runs (before anything
        /// else queued).
        Interrupt = "interrupt",
        /// Joins the last queued message not yet started (one run answers both);
        /// queued as its own when there is none.
        Merge = "merge",
    }
}

impl AgentBuilder {
    /// What a message does when it arrives while the agent's session is busy, unless
    /// the request (or the schedule) says: [`WhenBusy::Reject`] by default.
    pub fn when_busy(mut self, policy: WhenBusy) -> Self {
        self.agent.settings.set(policy);
        self
    }
}

/// Agent `agent`'s policy for a busy session ([`AgentBuilder::when_busy`]).
pub fn policy_of(agent: &crate::agent::Agent) -> WhenBusy {
    agent
        .settings
        .get::<WhenBusy>()
        .copied()
        .unwrap_or_default()
}

/// Where a queued message came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "from")]
pub enum Source {
    /// `POST …/messages`.
    Message,
    /// A schedule's fire, due at `due_ms`.
    Schedule {
        /// The schedule.
        schedule_id: String,
        /// When the fire was due.
        due_ms: u64,
    },
}

/// A message waiting for its run, as the queue keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Queued {
    /// Its id in the queue (`queued_…`).
    pub queue_id: String,
    /// The id its run has once it starts: fixed when queued, so that a start interrupted
    /// by a crash is recognised afterwards and never repeated.
    pub run_id: String,
    /// The user messages the run answers (more than one after a merge).
    pub messages: Vec<Message>,
    /// The run's model options (`providerOptions`), if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Value>,
    /// Where it came from.
    pub source: Source,
    /// When it was queued (ms).
    pub queued_at: u64,
    /// Messages merged into it (0 when none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub merged: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Takes `whenBusy` out of a follow-up's body (`POST …/messages`), checked, leaving the
/// rest for the body's own parser (a build without this feature has no code for the
/// field: the parser refuses it as unknown). A body that is not a JSON object is left to
/// its parser.
pub fn take_when_busy(body: &[u8]) -> Result<(Option<WhenBusy>, Cow<'_, [u8]>), ApiError> {
    let kept = Ok((None, Cow::Borrowed(body)));
    let needle = FIELD.as_bytes();
    if !body.windows(needle.len()).any(|w| w == needle) {
        return kept;
    }
    let text = std::str::from_utf8(body).unwrap_or_default();
    let Ok(mut fields) = serde_json::from_str::<Map<String, Value>>(text) else {
        return kept;
    };
    let Some(policy) = fields.remove(FIELD) else {
        return kept;
    };
    let policy = serde_json::from_value(policy).map_err(|e| {
        ApiError::validation(format!(
            "whenBusy: {e}; one of reject, enqueue, interrupt, merge."
        ))
    })?;
    let rest = serde_json::to_vec(&fields).map_err(|e| ApiError::validation(e.to_string()))?;
    Ok((Some(policy), Cow::Owned(rest)))
}

/// What to do with a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Nothing is busy: its run starts now.
    Start,
    /// Refused: the session is busy and the policy is `reject`.
    Refuse,
    /// Refused: the queue is full.
    Full,
    /// Queued behind the others.
    Queue,
    /// Queued before the others, and the current run (if one is active) interrupted.
    Interrupt,
    /// Merged into this queued message.
    MergeInto(String),
}

/// The decision for a message with `policy` when a run is `busy` (active, or waiting on a
/// human) and `queue` waits: a queue that is not empty makes the session busy too, so a
/// message never overtakes the ones before it.
pub fn decide(policy: WhenBusy, busy: bool, queue: &[Queued]) -> Decision {
    if !busy && queue.is_empty() {
        return Decision::Start;
    }
    let full = queue.len() >= MAX_QUEUED;
    match policy {
        WhenBusy::Reject => Decision::Refuse,
        WhenBusy::Merge => match queue.last() {
            Some(last) => Decision::MergeInto(last.queue_id.clone()),
            None if full => Decision::Full,
            None => Decision::Queue,
        },
        _ if full => Decision::Full,
        WhenBusy::Enqueue => Decision::Queue,
        WhenBusy::Interrupt => Decision::Interrupt,
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    #[test]
    fn an_agent_rejects_messages_while_busy_unless_its_builder_says_otherwise() {
        let plain = crate::agent::Agent::builder("plain").build().unwrap();
        assert_eq!(policy_of(&plain), WhenBusy::Reject);
        let queues = crate::agent::Agent::builder("queues")
            .when_busy(WhenBusy::Merge)
            .when_busy(WhenBusy::Enqueue)
            .build()
            .unwrap();
        assert_eq!(policy_of(&queues), WhenBusy::Enqueue);
    }

    /// A queued message `id` of one user message, its run `run_{id}` (for the schedule
    /// module's tests).
    pub(in crate::schedule) fn queued(id: &str) -> Queued {
        Queued {
            queue_id: id.into(),
            run_id: format!("run_{id}"),
            messages: vec![Message::user("hi")],
            options: None,
            source: Source::Message,
            queued_at: 0,
            merged: 0,
        }
    }

    #[test]
    fn an_idle_session_starts_every_message_whatever_its_policy() {
        for policy in WhenBusy::ALL {
            assert_eq!(decide(*policy, false, &[]), Decision::Start, "{policy:?}");
        }
    }

    #[test]
    fn a_busy_session_refuses_queues_interrupts_or_merges_by_policy() {
        assert_eq!(decide(WhenBusy::Reject, true, &[]), Decision::Refuse);
        assert_eq!(decide(WhenBusy::Enqueue, true, &[]), Decision::Queue);
        assert_eq!(decide(WhenBusy::Interrupt, true, &[]), Decision::Interrupt);
        assert_eq!(decide(WhenBusy::Merge, true, &[]), Decision::Queue);
        let waiting = [queued("a"), queued("b")];
        assert_eq!(
            decide(WhenBusy::Merge, true, &waiting),
            Decision::MergeInto("b".into()),
            "the last queued message absorbs it"
        );
    }

    #[test]
    fn messages_already_queued_keep_their_turn_even_when_no_run_is_active() {
        let waiting = [queued("a")];
        assert_eq!(decide(WhenBusy::Enqueue, false, &waiting), Decision::Queue);
        assert_eq!(decide(WhenBusy::Reject, false, &waiting), Decision::Refuse);
    }

    #[test]
    fn a_full_queue_refuses_more_but_a_merge_still_joins_it() {
        let full: Vec<Queued> = (0..MAX_QUEUED).map(|i| queued(&i.to_string())).collect();
        assert_eq!(decide(WhenBusy::Enqueue, true, &full), Decision::Full);
        assert_eq!(decide(WhenBusy::Interrupt, true, &full), Decision::Full);
        assert!(matches!(
            decide(WhenBusy::Merge, true, &full),
            Decision::MergeInto(_)
        ));
        assert_eq!(decide(WhenBusy::Reject, true, &full), Decision::Refuse);
    }

    #[test]
    fn a_follow_ups_policy_is_taken_out_of_its_body_and_checked() {
        let (policy, rest) = take_when_busy(br#"{"message":"hi","whenBusy":"enqueue"}"#).unwrap();
        assert_eq!(policy, Some(WhenBusy::Enqueue));
        assert_eq!(&*rest, br#"{"message":"hi"}"#);
        let (policy, rest) = take_when_busy(br#"{"message":"hi"}"#).unwrap();
        assert_eq!((policy, &*rest), (None, &br#"{"message":"hi"}"#[..]));
        let err = take_when_busy(br#"{"message":"hi","whenBusy":"later"}"#).unwrap_err();
        assert!(
            err.message.starts_with("whenBusy: unknown variant"),
            "{}",
            err.message
        );
        assert!(take_when_busy(br#"{"whenBusy":null}"#).is_err());
    }

    #[test]
    fn the_policies_read_and_write_their_wire_names() {
        let policy: WhenBusy = serde_json::from_str("\"merge\"").unwrap();
        assert_eq!(policy, WhenBusy::Merge);
        assert!(serde_json::from_str::<WhenBusy>("\"later\"").is_err());
        assert_eq!(WhenBusy::Enqueue.as_str(), "enqueue");
    }
}
