//! What the session's stream says about a message that waits: `message_queued` when it
//! takes a place in the queue, `message_merged` when it joins the entry before it.
//!
//! The chunk goes out at once, under the run that was busy. It is confirmed with it when
//! nothing unconfirmed precedes it (the session idle or waiting on a human, or a step not
//! yet streaming); otherwise it is confirmed with the step under way, and a crash before
//! that step commits takes it away with the step's other chunks (`stream_resync`) — the
//! queue itself is durable, and `GET …/schedules` and the session view show it.

use super::busy::{Queued, WhenBusy};
use crate::chunk::{Chunk, ChunkBody, StreamEvent};
use crate::journal::StreamLog;
use crate::store::SessionHead;

/// What became of a message that waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placed<'a> {
    /// It took entry `queue_id` by `policy`.
    Queued(&'a str, WhenBusy),
    /// It joined entry `queue_id`.
    Merged(&'a str),
}

/// The chunk that tells what became of a message (a fire of `schedule_id`, if any),
/// given the queue after it; `None` when its entry is not in the queue.
pub fn chunk_for(
    placed: Placed<'_>,
    queue: &[Queued],
    schedule_id: Option<&str>,
) -> Option<ChunkBody> {
    let queue_id = match placed {
        Placed::Queued(id, _) | Placed::Merged(id) => id,
    };
    let at = queue.iter().position(|q| q.queue_id == queue_id)?;
    let entry = &queue[at];
    let schedule_id = schedule_id.map(str::to_string);
    Some(match placed {
        Placed::Queued(_, policy) => ChunkBody::MessageQueued {
            queue_id: entry.queue_id.clone(),
            queued_run_id: entry.run_id.clone(),
            position: at as u32 + 1,
            policy: policy.as_str().to_string(),
            schedule_id,
        },
        Placed::Merged(_) => ChunkBody::MessageMerged {
            queue_id: entry.queue_id.clone(),
            queued_run_id: entry.run_id.clone(),
            merged: entry.merged,
            schedule_id,
        },
    })
}

/// `body` as a chunk of the run session `head` has now (the one that was busy).
pub fn under(head: &SessionHead, now_ms: u64, body: ChunkBody) -> Chunk {
    Chunk {
        session_id: head.id.clone(),
        agent_type: head.agent.clone(),
        run_id: head.run.run_id.clone(),
        step: None,
        timestamp: now_ms,
        body,
    }
}

/// Appends `chunk` to the session's stream, at durable `version` (see the module).
pub fn tell(stream: &dyn StreamLog, version: u64, chunk: Chunk) {
    let settled = stream.unconfirmed_from().is_none();
    stream.emit(StreamEvent::Chunk(chunk));
    if settled {
        stream.confirm(version);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::MemoryStreamLog;

    fn queued(id: &str, merged: u32) -> Queued {
        Queued {
            merged,
            ..super::super::busy::tests::queued(id)
        }
    }

    #[test]
    fn a_queued_message_is_told_with_its_place_and_a_merged_one_with_its_entry() {
        let queue = [queued("a", 0), queued("b", 2)];
        let told = chunk_for(Placed::Queued("b", WhenBusy::Enqueue), &queue, Some("s1"));
        assert_eq!(
            told,
            Some(ChunkBody::MessageQueued {
                queue_id: "b".into(),
                queued_run_id: "run_b".into(),
                position: 2,
                policy: "enqueue".into(),
                schedule_id: Some("s1".into()),
            })
        );
        let told = chunk_for(Placed::Merged("b"), &queue, None);
        assert!(matches!(
            told,
            Some(ChunkBody::MessageMerged { merged: 2, .. })
        ));
        assert_eq!(chunk_for(Placed::Merged("gone"), &queue, None), None);
    }

    #[test]
    fn a_notice_is_confirmed_at_once_unless_a_step_streams_unconfirmed() {
        let stream = MemoryStreamLog::new();
        let chunk = |body| Chunk {
            session_id: "s".into(),
            agent_type: "a".into(),
            run_id: "r".into(),
            step: None,
            timestamp: 1,
            body,
        };
        let merged = || ChunkBody::MessageMerged {
            queue_id: "a".into(),
            queued_run_id: "run_a".into(),
            merged: 1,
            schedule_id: None,
        };
        tell(&stream, 1, chunk(merged()));
        assert_eq!(stream.unconfirmed_from(), None, "idle: confirmed at once");
        stream.emit(StreamEvent::Chunk(chunk(ChunkBody::TextDelta {
            delta: "x".into(),
        })));
        tell(&stream, 1, chunk(merged()));
        assert_eq!(
            stream.unconfirmed_from(),
            Some(2),
            "left to the step under way"
        );
        assert_eq!(stream.events().len(), 3);
    }
}
