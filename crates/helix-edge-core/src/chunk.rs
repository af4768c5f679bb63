//! Stream chunks (SPEC §3): one serde type whose JSON is exactly the wire form, and the
//! events a session's stream carries (`chunk`, `end`, `fail`). Sequence numbers are
//! assigned by whoever stores the stream, not here.

use crate::error::ErrorInfo;
use crate::state::PatchOp;
use crate::wire::wire_enum;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One stream chunk: the common head plus a typed body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Chunk {
    /// The session the chunk is about (a child's id for a sub-agent's own chunks).
    pub session_id: String,
    /// The agent of that session (for `subagent_*`, the child's agent).
    pub agent_type: String,
    /// The run (turn) the chunk belongs to.
    pub run_id: String,
    /// The session step, where one applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u32>,
    /// Milliseconds since the Unix epoch.
    pub timestamp: u64,
    /// Type and fields of the chunk.
    #[serde(flatten)]
    pub body: ChunkBody,
}

/// The `type` of a chunk and its own fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum ChunkBody {
    /// A run began.
    RunStarted {
        /// 1-based turn number of the run within the session.
        turn: u32,
    },
    /// Model text, as it streams.
    TextDelta {
        /// The new text.
        delta: String,
    },
    /// Model reasoning, as it streams.
    Thinking {
        /// The new reasoning text.
        content: String,
        /// True on the last piece of one reasoning block.
        is_complete: bool,
    },
    /// A tool call begins (server), or is handed to the client (client).
    ToolStart {
        /// The call.
        tool_call_id: String,
        /// The tool.
        tool_name: String,
        /// Its arguments.
        arguments: Value,
        /// Who executes it.
        executor: Executor,
        /// For client tools: when the answer is due (ms since epoch).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        deadline: Option<u64>,
    },
    /// A tool call waits for the user's approval.
    ToolApprovalRequest {
        /// The call.
        tool_call_id: String,
        /// The tool.
        tool_name: String,
        /// Its arguments.
        arguments: Value,
    },
    /// A tool call ended.
    ToolEnd {
        /// The call.
        tool_call_id: String,
        /// The tool.
        tool_name: String,
        /// Whether it succeeded.
        success: bool,
        /// Its result, on success.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        /// Its error message, on failure.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// For an approved or denied call: the user who decided (absent when the API
        /// token or a session token did).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        decided_by: Option<crate::store::Owner>,
    },
    /// State changes (RFC 6902), in order: a tool's write as it makes it (live, with
    /// its call), or what its step's commit changes beyond what was shown.
    StatePatch {
        /// The operations.
        patches: Vec<PatchOp>,
        /// The call that wrote them, for a tool's live write.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_call_id: Option<String>,
    },
    /// An event a tool emitted.
    Custom {
        /// The tool's name for the event.
        event_name: String,
        /// Its payload.
        data: Value,
    },
    /// A sub-agent session started.
    SubagentStart {
        /// The child session.
        sub_session_id: String,
        /// The parent's tool call that started it.
        tool_call_id: String,
    },
    /// A sub-agent session ended.
    SubagentEnd {
        /// The child session.
        sub_session_id: String,
        /// The parent's tool call that started it.
        tool_call_id: String,
        /// The child's output.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
    },
    /// The run's structured output.
    Output {
        /// The output.
        output: Value,
    },
    /// Something went wrong.
    Error {
        /// Stable code.
        code: String,
        /// Human sentence.
        message: String,
        /// Whether the run can go on (or be retried).
        recoverable: bool,
    },
    /// A step was committed durably.
    StepCommitted {
        /// The checkpoint it created.
        checkpoint_id: String,
    },
    /// The run suspended at a human-in-the-loop boundary.
    RunSuspended {
        /// Why.
        reason: SuspendReason,
        /// The calls it waits on.
        tool_call_ids: Vec<String>,
    },
    /// A suspended or interrupted run continues.
    RunResumed {
        /// The run's turn.
        turn: u32,
    },
    /// The run stopped at a step boundary because it was asked to.
    RunInterrupted {
        /// The reason given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// The run reached a terminal status.
    RunFinished {
        /// `completed`, `failed` or `aborted`.
        status: RunStatus,
    },
    /// A message waits in the session's queue for its own run (feature `schedules`: a
    /// follow-up's `whenBusy`, or a schedule's fire while the session was busy).
    #[cfg(feature = "schedules")]
    MessageQueued {
        /// Its entry in the queue.
        queue_id: String,
        /// The id its run will have.
        queued_run_id: String,
        /// Its place in the queue, 1 first.
        position: u32,
        /// The policy that queued it: `enqueue`, `interrupt` or `merge`.
        policy: String,
        /// The schedule whose fire it is, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        schedule_id: Option<String>,
    },
    /// A message joined the queued message not yet started (`whenBusy: merge`): one run
    /// answers both (feature `schedules`).
    #[cfg(feature = "schedules")]
    MessageMerged {
        /// The entry it joined.
        queue_id: String,
        /// The id that entry's run will have.
        queued_run_id: String,
        /// Messages merged into the entry so far.
        merged: u32,
        /// The schedule whose fire it is, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        schedule_id: Option<String>,
    },
    /// The session continues from the checkpoint named here. After a crash
    /// (`crash_recovery`), chunks from `from_sequence` up to this event belonged to a
    /// step that never committed: discard them. After a retry (`rollback`) the transcript
    /// was cut back to `message_count` (the state patch before this event restores the
    /// state); a fork (`branch`) starts from another session's checkpoint. For those two
    /// `from_sequence` is this event's own sequence: nothing is discarded.
    StreamResync {
        /// The checkpoint the session continues from (for a branch, the source's).
        checkpoint_id: String,
        /// Session step count at that checkpoint.
        step_count: u32,
        /// Transcript length at that checkpoint (after a rollback: as restored).
        message_count: u64,
        /// First discarded sequence number.
        from_sequence: u64,
        /// Why.
        reason: ResyncReason,
    },
}

wire_enum! {
    /// Why a stream resynchronises.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum ResyncReason {
        /// A step was torn by a crash and is run again.
        CrashRecovery = "crash_recovery",
        /// A retry restored a checkpoint.
        Rollback = "rollback",
        /// The session is a fork of another session's checkpoint.
        Branch = "branch",
    }
}

wire_enum! {
    /// Who executes a tool.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Executor {
        /// The worker runs it.
        Server = "server",
        /// The client runs it and submits the result.
        Client = "client",
    }
}

wire_enum! {
    /// Why a run is suspended.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum SuspendReason {
        /// Waiting on approvals or client tool results.
        ClientTool = "client_tool",
        /// Waiting on sub-agent sessions.
        AwaitingChildren = "awaiting_children",
    }
}

wire_enum! {
    /// Status of a run (and, for terminal ones, of its session).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum RunStatus {
        /// Working or suspended.
        Running = "running",
        /// Stopped at a step boundary on request; `resume` continues it.
        Interrupted = "interrupted",
        /// Finished normally.
        Completed = "completed",
        /// Finished with an error.
        Failed = "failed",
        /// Stopped for good on request.
        Aborted = "aborted",
    }
}

impl RunStatus {
    /// Completed, failed or aborted.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Aborted)
    }
}

/// One event of a session's stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", content = "data", rename_all = "snake_case")]
pub enum StreamEvent {
    /// SSE `event: chunk`.
    Chunk(Chunk),
    /// SSE `event: end`: the run completed.
    End {
        /// The run's output, if it has one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<Value>,
    },
    /// SSE `event: fail`: the run failed or was aborted.
    Fail {
        /// What went wrong.
        error: ErrorInfo,
    },
}

impl StreamEvent {
    /// The SSE event name.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Chunk(_) => "chunk",
            Self::End { .. } => "end",
            Self::Fail { .. } => "fail",
        }
    }

    /// The SSE `data` line: one JSON object.
    pub fn data_json(&self) -> String {
        let data = match self {
            Self::Chunk(c) => serde_json::to_string(c),
            Self::End {
                output: Some(output),
            } => serde_json::to_string(&serde_json::json!({ "output": output })),
            Self::End { output: None } => Ok("{}".into()),
            Self::Fail { error } => serde_json::to_string(&serde_json::json!({ "error": error })),
        };
        // Serialising `Value`s and plain structs cannot fail.
        data.unwrap_or_else(|_| "{}".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chunk(body: ChunkBody) -> Chunk {
        Chunk {
            session_id: "s1".into(),
            agent_type: "assistant".into(),
            run_id: "r1".into(),
            step: Some(2),
            timestamp: 1_700_000_000_000,
            body,
        }
    }

    #[test]
    fn a_tool_start_chunk_has_the_spec_wire_form() {
        let c = chunk(ChunkBody::ToolStart {
            tool_call_id: "c1".into(),
            tool_name: "ask_user".into(),
            arguments: json!({"question": "?"}),
            executor: Executor::Client,
            deadline: Some(5),
        });
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            json!({
                "type": "tool_start", "sessionId": "s1", "agentType": "assistant",
                "runId": "r1", "step": 2, "timestamp": 1_700_000_000_000u64,
                "toolCallId": "c1", "toolName": "ask_user",
                "arguments": {"question": "?"}, "executor": "client", "deadline": 5
            })
        );
    }

    #[test]
    fn every_chunk_round_trips_through_json() {
        let bodies = vec![
            ChunkBody::RunStarted { turn: 1 },
            ChunkBody::Thinking {
                content: "hm".into(),
                is_complete: true,
            },
            ChunkBody::StatePatch {
                patches: vec![PatchOp::Add {
                    path: "/notes/-".into(),
                    value: json!({"text": "a"}),
                }],
                tool_call_id: Some("call_1".into()),
            },
            ChunkBody::RunSuspended {
                reason: SuspendReason::ClientTool,
                tool_call_ids: vec!["c".into()],
            },
            ChunkBody::RunFinished {
                status: RunStatus::Completed,
            },
            ChunkBody::StreamResync {
                checkpoint_id: "k".into(),
                step_count: 3,
                message_count: 7,
                from_sequence: 12,
                reason: ResyncReason::CrashRecovery,
            },
        ];
        for body in bodies {
            let c = chunk(body);
            let back: Chunk = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
            assert_eq!(back, c);
        }
        let v = serde_json::to_value(chunk(ChunkBody::RunSuspended {
            reason: SuspendReason::AwaitingChildren,
            tool_call_ids: vec![],
        }))
        .unwrap();
        assert_eq!(v["reason"], "awaiting_children");
        assert_eq!(v["toolCallIds"], json!([]));
    }

    #[test]
    fn end_and_fail_events_carry_their_data_objects() {
        assert_eq!(StreamEvent::End { output: None }.data_json(), "{}");
        assert_eq!(
            StreamEvent::End {
                output: Some(json!(1))
            }
            .data_json(),
            r#"{"output":1}"#
        );
        let fail = StreamEvent::Fail {
            error: ErrorInfo {
                code: "x".into(),
                message: "m".into(),
                retryable: false,
            },
        };
        assert_eq!(fail.name(), "fail");
        let v: Value = serde_json::from_str(&fail.data_json()).unwrap();
        assert_eq!(v["error"]["code"], "x");
    }
}
