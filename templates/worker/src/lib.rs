//! {{name}}: a helix-edge worker. Its agent, `assistant`, keeps a todo list in the
//! session's state; clearing the list waits for a human's approval.

use helix_edge::agent::{Agent, Agents};
use helix_edge::error::{DefinitionError, ToolError};
use helix_edge::tool::{Tool, ToolContext};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use worker::Env;

/// The state of an `assistant` session.
#[derive(Default, Serialize, Deserialize, JsonSchema)]
struct Todos {
    /// The items, oldest first.
    todos: Vec<String>,
}

/// Input of `add_todo`.
#[derive(Deserialize, JsonSchema)]
struct AddTodo {
    /// What to do.
    text: String,
}

/// Input of `clear_todos`.
#[derive(Deserialize, JsonSchema)]
struct ClearTodos {}

/// The agents this worker hosts. `env` holds its vars, secrets and bindings, for tools
/// that need them (`env.secret("…")`).
fn agents(_env: &Env) -> Result<Agents, DefinitionError> {
    Agents::new().with(assistant()?)
}

/// The `assistant` agent.
fn assistant() -> Result<Agent, DefinitionError> {
    let add_todo = Tool::new(
        "add_todo",
        "Add an item to the todo list.",
        |input: AddTodo, ctx: ToolContext| async move {
            ctx.append("/todos", json!(input.text))?;
            Ok::<_, ToolError>(json!({ "added": input.text }))
        },
    );
    let clear_todos = Tool::new(
        "clear_todos",
        "Clear the todo list. A human approves every call.",
        |_: ClearTodos, ctx: ToolContext| async move {
            ctx.set("/todos", json!([]))?;
            Ok::<_, ToolError>(json!({ "cleared": true }))
        },
    )
    .approval_always();
    Agent::builder("assistant")
        .description("Keeps a todo list; clearing it needs a human's approval.")
        .system_prompt("You keep the user's todo list with add_todo and clear_todos.")
        .state::<Todos>()
        .tool(add_todo)
        .tool(clear_todos)
        .build()
}

helix_edge::worker!(agents);

#[cfg(test)]
mod tests;
