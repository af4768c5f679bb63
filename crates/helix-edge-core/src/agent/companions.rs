//! Persistent children as an agent's builder takes them (feature `persistent-children`):
//! the kinds of child it may start ([`AgentBuilder::persistent_child`]), and the
//! companion tools (`companion__*`) its `build` adds with the first kind.

use super::{Agent, AgentBuilder, ChildMode, Extension, PersistentChild};
use crate::error::DefinitionError;
use crate::tool::companion::{CHILD_NAME_PATTERN, COMPANION_PREFIX, CompanionOp};
use crate::tool::{ChildCall, Tool};
use serde_json::{Value, json};

/// Adds the companion tools for the agent's kinds of persistent child.
#[derive(Default)]
struct Companions;

impl Extension for Companions {
    fn order(&self) -> u8 {
        0
    }

    fn apply(self: Box<Self>, mut agent: Agent) -> Result<Agent, DefinitionError> {
        for (i, child) in agent.persistent.iter().enumerate() {
            if agent.persistent[..i]
                .iter()
                .any(|c| c.agent.name == child.agent.name)
            {
                return Err(DefinitionError::DuplicateAgent(child.agent.name.clone()));
            }
        }
        let companions = companion_tools(&agent.persistent);
        agent.tools.extend(companions);
        Ok(agent)
    }
}

impl AgentBuilder {
    /// Lets the agent start persistent children of this kind (see
    /// [`crate::agent::PersistentChild`]); the companion tools are added with the first.
    pub fn persistent_child(mut self, child: PersistentChild) -> Self {
        self.agent.persistent.push(child);
        self.extend(|_: &mut Companions| {})
    }

    /// A notice that a non-blocking child's turn ended starts a new run of the parent
    /// when its run has finished (by default the notice waits for the parent's next run).
    pub fn wake_on_child_results(mut self) -> Self {
        self.agent.wake_on_children = true;
        self
    }
}

/// The companion tools for `children` (none without children).
fn companion_tools(children: &[PersistentChild]) -> Vec<Tool> {
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
    let tool = |op, name: &str, description: String, schema: Value| {
        let name = format!("{COMPANION_PREFIX}{name}");
        Tool::child(name, description, schema, ChildCall::Companion(op))
    };
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
