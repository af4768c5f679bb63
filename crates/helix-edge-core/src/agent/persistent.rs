//! Persistent children: long-lived helper agents a coordinator talks to over many turns
//! (the Helix design's persistent sub-agents). An agent declares the kinds of child it
//! may start ([`PersistentChild`]); the runtime gives it the companion tools
//! ([`crate::tool::companion`]) to start named children, message them, read their status
//! and end them. Each child is a session of its own, `{parent}-agent-{name}`, that keeps
//! its state and transcript between turns.

use super::Agent;
pub use crate::store::ChildMode;
use crate::tool::Tool;
use crate::tool::companion::{CHILD_NAME_PATTERN, CompanionOp};
use serde_json::{Value, json};
use std::rc::Rc;

/// A kind of persistent child an agent may start: an agent, how the parent waits on it,
/// and a description the model chooses it by.
#[derive(Debug, Clone)]
pub struct PersistentChild {
    pub(crate) agent: Rc<Agent>,
    pub(crate) mode: ChildMode,
    pub(crate) description: String,
}

impl PersistentChild {
    /// A kind of child running `agent`; the description defaults to the agent's.
    pub fn new(agent: Agent, mode: ChildMode) -> Self {
        let description = agent.description.clone();
        Self {
            agent: Rc::new(agent),
            mode,
            description,
        }
    }

    /// The description the model sees in `companion__spawnAgent`.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// Its agent.
    pub fn agent(&self) -> &Rc<Agent> {
        &self.agent
    }

    /// How the parent waits on it.
    pub fn mode(&self) -> ChildMode {
        self.mode
    }
}

/// The session id of the persistent child `name` of `parent_id`.
pub fn persistent_child_id(parent_id: &str, name: &str) -> String {
    format!("{parent_id}-agent-{name}")
}

/// The companion tools for `children` (none without children).
pub(crate) fn companion_tools(children: &[PersistentChild]) -> Vec<Tool> {
    if children.is_empty() {
        return Vec::new();
    }
    let kinds: Vec<&str> = children.iter().map(|c| c.agent.name.as_str()).collect();
    let catalog: String = children
        .iter()
        .map(|c| {
            let waits = match c.mode {
                ChildMode::Blocking => "you wait for each of its turns",
                ChildMode::NonBlocking => "runs in the background; you are told when a turn ends",
            };
            format!("\n- `{}` ({waits}): {}", c.agent.name, c.description)
        })
        .collect();
    let name = json!({ "type": "string", "pattern": CHILD_NAME_PATTERN,
        "description": "The child's name (lowercase letters, digits, '-')." });
    let mut optional_name = name.clone();
    optional_name["description"] =
        "The child's name (lowercase letters, digits, '-'); defaults to `{agentType}-{n}`.".into();
    let message = json!({ "type": "string", "description": "What to tell the child." });
    let object = |properties: Value, required: &[&str]| {
        json!({ "type": "object", "properties": properties, "required": required,
            "additionalProperties": false })
    };
    let tool = Tool::companion;
    let mut tools = vec![
        tool(
            CompanionOp::Spawn,
            "spawnAgent",
            format!(
                "Start a named helper agent that keeps its memory between messages. Kinds:{catalog}"
            ),
            object(
                json!({ "agentType": { "type": "string", "enum": kinds },
                    "name": optional_name, "message": message }),
                &["agentType", "message"],
            ),
        ),
        tool(
            CompanionOp::Send,
            "sendMessage",
            "Send a follow-up message to a helper you started (interrupting its current turn)."
                .into(),
            object(
                json!({ "name": name, "message": message }),
                &["name", "message"],
            ),
        ),
        tool(
            CompanionOp::List,
            "listChildren",
            "List the helpers you started and their status.".into(),
            object(json!({}), &[]),
        ),
        tool(
            CompanionOp::Status,
            "getChildStatus",
            "A helper's status and the output of its last turn.".into(),
            object(json!({ "name": name }), &["name"]),
        ),
        tool(
            CompanionOp::Terminate,
            "terminateChild",
            "End a helper for good.".into(),
            object(
                json!({ "name": name, "reason": { "type": "string" } }),
                &["name"],
            ),
        ),
    ];
    if children.iter().any(|c| c.mode == ChildMode::Blocking) {
        tools.push(tool(
            CompanionOp::Wait,
            "waitForResult",
            "Wait until a helper's current turn ends, and get its output.".into(),
            object(json!({ "name": name }), &["name"]),
        ));
    }
    tools
}
