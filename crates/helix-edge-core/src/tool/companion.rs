//! The companion tools an agent with persistent children gets (names prefixed
//! `companion__`, reserved): `spawnAgent`, `sendMessage`, `listChildren`,
//! `getChildStatus`, `terminateChild`, and `waitForResult` when a kind of child is
//! blocking. The runner carries them out ([`crate::runner`]): each call is recorded
//! durably before it reaches a child, like a sub-agent call.

#[cfg(feature = "persistent-children")]
use super::{Execution, Tool};
#[cfg(feature = "persistent-children")]
use crate::agent::{ChildMode, PersistentChild};
#[cfg(feature = "persistent-children")]
use serde_json::{Value, json};

/// The prefix of companion tool names; no other tool may use it.
pub const COMPANION_PREFIX: &str = "companion__";

/// Child names: 1–40 characters of `a-z`, `0-9` and `-`, starting with a letter or digit
/// (and never holding `-agent-`, which would make one child's id another's).
pub const CHILD_NAME_PATTERN: &str = "^[a-z0-9][a-z0-9-]{0,39}$";

/// What a companion tool does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompanionOp {
    /// Create a named child and start its first turn.
    Spawn,
    /// Start a child's next turn (interrupting the current one).
    Send,
    /// The children and their status.
    List,
    /// One child's status and last output.
    Status,
    /// End a child for good.
    Terminate,
    /// Wait for a child's current turn to end.
    Wait,
}

/// Whether `name` is a valid child name.
pub fn valid_child_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    let first_ok = bytes
        .next()
        .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    first_ok
        && name.len() <= 40
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.contains("-agent-")
}

/// The companion tools for `children` (none without children).
#[cfg(feature = "persistent-children")]
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
    let tool = |op, name: &str, description: String, schema| {
        Tool::with_execution(
            format!("{COMPANION_PREFIX}{name}"),
            description,
            schema,
            Execution::Companion(op),
        )
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
