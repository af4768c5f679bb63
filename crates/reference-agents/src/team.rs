//! `team`: a lead whose researcher helpers are persistent children (feature
//! `persistent-children`). It starts a named helper with `companion__spawnAgent`, sends it
//! follow-ups with `companion__sendMessage` (the helper remembers the earlier ones), lists
//! and checks on its helpers and dismisses them. Helpers are blocking: the lead waits for
//! each of their turns, durably, like it waits for an approval.

use crate::researcher;
use helix_edge::agent::{Agent, ChildMode, PersistentChild};
use helix_edge::error::DefinitionError;

/// The `team` agent.
pub fn team() -> Result<Agent, DefinitionError> {
    let helper = PersistentChild::new(researcher()?, ChildMode::Blocking)
        .description("Researches topics and remembers the ones you asked about before.");
    Agent::builder("team")
        .description("Leads researcher helpers that keep their memory between messages.")
        .system_prompt(
            "You lead a team of researcher helpers. Start a helper with companion__spawnAgent, \
             send it follow-ups with companion__sendMessage, check on helpers with \
             companion__listChildren and companion__getChildStatus, dismiss one with \
             companion__terminateChild, and report what they found.",
        )
        .persistent_child(helper)
        .build()
}
