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
/// User messages one queued entry holds at most (merges included): past it a `merge`
/// queues its message on its own.
pub const MAX_MERGED: usize = 20;
/// Bytes one queued entry's messages take at most (a row of the object's storage, which
/// holds 2 MB): past it a `merge` queues its message on its own.
pub const MAX_ENTRY_BYTES: usize = 1 << 20;
/// Bytes the whole queue's messages take at most; past it a message is refused (429).
pub const MAX_QUEUE_BYTES: usize = 8 << 20;

/// Which bound a refused message met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// [`MAX_QUEUED`] messages wait already.
    Count,
    /// The queue's messages would take more than [`MAX_QUEUE_BYTES`].
    Bytes,
}

impl Limit {
    /// The sentence a 429 says.
    pub fn message(self) -> String {
        match self {
            Self::Count => format!("A session queues at most {MAX_QUEUED} messages."),
            Self::Bytes => format!(
                "A session's queued messages take at most {} MiB.",
                MAX_QUEUE_BYTES >> 20
            ),
        }
    }
}

/// The bytes a queued entry's messages take.
pub fn weight(queued: &Queued) -> usize {
    serde_json::to_vec(&queued.messages).map_or(usize::MAX, |bytes| bytes.len())
}

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
    /// Refused: the queue is full (by this bound).
    Full(Limit),
    /// Queued behind the others.
    Queue,
    /// Queued before the others, and the current run (if one is active) interrupted.
    Interrupt,
    /// Merged into this queued message.
    MergeInto(String),
}

/// The decision for `message` with `policy` when a run is `busy` (active, or waiting on
/// a human) and `queue` waits: a queue that is not empty makes the session busy too, so
/// a message never overtakes the ones before it. The queue is bounded: by count
/// ([`MAX_QUEUED`]) and bytes ([`MAX_QUEUE_BYTES`]), past which a message is refused; a
/// merge joins the last entry while it holds fewer than [`MAX_MERGED`] messages and
/// [`MAX_ENTRY_BYTES`], else queues on its own.
pub fn decide(policy: WhenBusy, busy: bool, queue: &[Queued], message: &Queued) -> Decision {
    if !busy && queue.is_empty() {
        return Decision::Start;
    }
    let adds = weight(message);
    let queued: usize = queue.iter().map(weight).fold(0, usize::saturating_add);
    let full = if queued.saturating_add(adds) > MAX_QUEUE_BYTES {
        Some(Limit::Bytes)
    } else if queue.len() >= MAX_QUEUED {
        Some(Limit::Count)
    } else {
        None
    };
    let joins = |last: &Queued| {
        last.messages.len() + message.messages.len() <= MAX_MERGED
            && weight(last).saturating_add(adds) <= MAX_ENTRY_BYTES
    };
    match (policy, full) {
        (WhenBusy::Reject, _) => Decision::Refuse,
        (_, Some(Limit::Bytes)) => Decision::Full(Limit::Bytes),
        (WhenBusy::Merge, _) => match queue.last() {
            Some(last) if joins(last) => Decision::MergeInto(last.queue_id.clone()),
            _ => match full {
                Some(limit) => Decision::Full(limit),
                None => Decision::Queue,
            },
        },
        (_, Some(limit)) => Decision::Full(limit),
        (WhenBusy::Enqueue, None) => Decision::Queue,
        (WhenBusy::Interrupt, None) => Decision::Interrupt,
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

    /// `decide` for one short message.
    fn decide_one(policy: WhenBusy, busy: bool, queue: &[Queued]) -> Decision {
        decide(policy, busy, queue, &queued("new"))
    }

    /// A queued message of `bytes` bytes of text.
    fn sized(id: &str, bytes: usize) -> Queued {
        Queued {
            messages: vec![Message::user("x".repeat(bytes))],
            ..queued(id)
        }
    }

    #[test]
    fn an_idle_session_starts_every_message_whatever_its_policy() {
        for policy in WhenBusy::ALL {
            assert_eq!(
                decide_one(*policy, false, &[]),
                Decision::Start,
                "{policy:?}"
            );
        }
    }

    #[test]
    fn a_busy_session_refuses_queues_interrupts_or_merges_by_policy() {
        assert_eq!(decide_one(WhenBusy::Reject, true, &[]), Decision::Refuse);
        assert_eq!(decide_one(WhenBusy::Enqueue, true, &[]), Decision::Queue);
        assert_eq!(
            decide_one(WhenBusy::Interrupt, true, &[]),
            Decision::Interrupt
        );
        assert_eq!(decide_one(WhenBusy::Merge, true, &[]), Decision::Queue);
        let waiting = [queued("a"), queued("b")];
        assert_eq!(
            decide_one(WhenBusy::Merge, true, &waiting),
            Decision::MergeInto("b".into()),
            "the last queued message absorbs it"
        );
    }

    #[test]
    fn messages_already_queued_keep_their_turn_even_when_no_run_is_active() {
        let waiting = [queued("a")];
        assert_eq!(
            decide_one(WhenBusy::Enqueue, false, &waiting),
            Decision::Queue
        );
        assert_eq!(
            decide_one(WhenBusy::Reject, false, &waiting),
            Decision::Refuse
        );
    }

    #[test]
    fn a_full_queue_refuses_more_but_a_merge_still_joins_it() {
        let full: Vec<Queued> = (0..MAX_QUEUED).map(|i| queued(&i.to_string())).collect();
        let count = Decision::Full(Limit::Count);
        assert_eq!(decide_one(WhenBusy::Enqueue, true, &full), count);
        assert_eq!(decide_one(WhenBusy::Interrupt, true, &full), count);
        assert!(matches!(
            decide_one(WhenBusy::Merge, true, &full),
            Decision::MergeInto(_)
        ));
        assert_eq!(decide_one(WhenBusy::Reject, true, &full), Decision::Refuse);
    }

    #[test]
    fn a_merge_joins_an_entry_only_within_its_bounds_and_the_queue_within_its_bytes() {
        // An entry of MAX_MERGED messages takes no more: the next is queued on its own.
        let crowded = Queued {
            messages: vec![Message::user("m"); MAX_MERGED],
            ..queued("a")
        };
        assert_eq!(
            decide_one(WhenBusy::Merge, true, &[crowded]),
            Decision::Queue
        );
        // Nor one whose bytes would pass MAX_ENTRY_BYTES (a row of the storage).
        let heavy = sized("a", 900 << 10);
        let more = sized("new", 200 << 10);
        assert_eq!(
            decide(WhenBusy::Merge, true, std::slice::from_ref(&heavy), &more),
            Decision::Queue
        );
        assert!(matches!(
            decide(WhenBusy::Merge, true, &[heavy], &sized("new", 10)),
            Decision::MergeInto(_)
        ));
        // The queue's bytes are bounded whatever the policy: nothing joins, nothing waits.
        let nine: Vec<Queued> = (0..9).map(|i| sized(&i.to_string(), 900 << 10)).collect();
        let bytes = Decision::Full(Limit::Bytes);
        for policy in [WhenBusy::Merge, WhenBusy::Enqueue, WhenBusy::Interrupt] {
            assert_eq!(decide(policy, true, &nine, &more), bytes, "{policy:?}");
        }
        // A crowded last entry and a queue at its count: refused, naming the count.
        let mut full: Vec<Queued> = (0..MAX_QUEUED).map(|i| queued(&i.to_string())).collect();
        full[MAX_QUEUED - 1].messages = vec![Message::user("m"); MAX_MERGED];
        assert_eq!(
            decide_one(WhenBusy::Merge, true, &full),
            Decision::Full(Limit::Count)
        );
        assert!(Limit::Bytes.message().contains("8 MiB"));
        assert!(Limit::Count.message().contains("50 messages"));
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
