//! `secretary`: keeps notes and schedules runs of its own conversation (feature
//! `schedules`): "remind me tomorrow at nine" becomes a `schedule_run` call, and the run
//! it starts then begins with the reminder. Its tools: `add_note` (as the assistant's)
//! and the scheduling tools (`schedule_run`, `list_schedules`, `cancel_schedule`). A
//! message (or a fire) that finds it busy waits its turn (`whenBusy: enqueue`) unless it
//! says otherwise.

use helix_edge::agent::Agent;
use helix_edge::error::DefinitionError;
use helix_edge::schedule::WhenBusy;
use serde_json::json;

/// The `secretary` agent.
pub fn secretary() -> Result<Agent, DefinitionError> {
    Agent::builder("secretary")
        .system_prompt(
            "You are a secretary. Keep notes with add_note. When asked to remind the user or to \
             do something later or regularly, schedule it with schedule_run (a time with its \
             offset, every so many seconds, or a cron pattern in the user's time zone); \
             list_schedules and cancel_schedule manage what is scheduled. When a scheduled run \
             starts, do what its message asks.",
        )
        .initial_state(json!({ "notes": [] }))
        .tool(crate::add_note_tool())
        .scheduling()
        .when_busy(WhenBusy::Enqueue)
        .build()
}
