//! State as the workflow's memory: the session's state is the scratchpad that wires tool
//! calls together. A call stores its result in the state with the `_outputPath`
//! meta-argument ([`output`]); a later argument names a stored value with a state
//! reference ([`reference`]); calls of one step that read what others of the same step
//! write form a plan ([`graph`]), checked against the state schema ([`paths`]) before
//! anything runs and run in dependency order.
//!
//! The runtime does all this with the `plans` feature; without it arguments pass as
//! they are, nothing is stored and each step's calls are one round.

pub mod graph;
pub mod output;
pub mod paths;
pub mod reference;

pub use graph::{Access, Graph, Problem};

use crate::error::ToolError;
use crate::tool::{OUTPUT_PATH, OutputPath, Tool};
use serde_json::Value;

/// A call ready to run: references resolved, `_outputPath` taken out.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    /// The arguments the tool gets.
    pub arguments: Value,
    /// Where the result is stored, if anywhere.
    pub output: Option<String>,
}

/// The paths `tool` may store to in a state of `schema` (the agent's, if typed): its own
/// list, else (when the model chooses) every path of the schema.
pub fn offered_paths(schema: Option<&Value>, tool: &Tool) -> Vec<String> {
    if !cfg!(feature = "plans") {
        return Vec::new();
    }
    match tool.output_path() {
        OutputPath::Choose(list) if list.is_empty() => {
            schema.map(paths::output_paths).unwrap_or_default()
        }
        OutputPath::Choose(list) => list.clone(),
        _ => Vec::new(),
    }
}

/// Prepares the model's `arguments` for a call of `tool` in `state` (of `schema`, the
/// agent's): takes the output path out (checked against the tool's policy) and resolves
/// the references, unless the tool does not take them. An error is the
/// `tool_input_invalid` the model sees.
pub fn prepare(
    schema: Option<&Value>,
    tool: &Tool,
    arguments: &Value,
    state: &Value,
) -> Result<Prepared, ToolError> {
    let invalid = |reason: String| ToolError::InputInvalid {
        tool: tool.name().to_string(),
        reason,
    };
    let mut arguments = arguments.clone();
    if !cfg!(feature = "plans") {
        return Ok(Prepared {
            arguments,
            output: None,
        });
    }
    let offered = offered_paths(schema, tool);
    let output = tool
        .output_path()
        .take(&mut arguments, &offered, schema)
        .map_err(invalid)?;
    if tool.takes_state_refs() {
        reference::resolve_in(&mut arguments, state).map_err(invalid)?;
    }
    Ok(Prepared { arguments, output })
}

/// What a call of `tool` with the model's `arguments` reads and writes (for the plan;
/// malformed references and refused output paths are left to [`prepare`]).
pub fn access(schema: Option<&Value>, tool: &Tool, arguments: &Value) -> Access {
    if !cfg!(feature = "plans") {
        return Access::default();
    }
    let reads = if tool.takes_state_refs() {
        reference::references(arguments)
            .into_iter()
            .flatten()
            .collect()
    } else {
        Vec::new()
    };
    let mut arguments = arguments.clone();
    let offered = offered_paths(schema, tool);
    let write = tool
        .output_path()
        .take(&mut arguments, &offered, schema)
        .ok()
        .flatten();
    Access { reads, write }
}

/// The system prompt's guidance for an agent whose `tools` store results in its state
/// (of `schema`, if typed): what the state is for, its schema, and how to reference it.
/// `None` when no tool does.
pub fn guidance(tools: &[Tool], schema: Option<&Value>) -> Option<String> {
    if !cfg!(feature = "plans") || tools.iter().all(|t| *t.output_path() == OutputPath::Off) {
        return None;
    }
    let schema = schema
        .map(|s| format!(" Its JSON Schema:\n{s}\n"))
        .unwrap_or_default();
    Some(format!(
        "\n\n# State\nThe session has a state: memory your tool calls share.{schema}\
         A tool that offers `{OUTPUT_PATH}` stores its result there, at the path you give. \
         An argument may instead be a reference to a value in the state, written as the \
         whole string \"†state.path.to.value\" (or \"$state.path.to.value\"; array items \
         as .0 or [0]); it is replaced by that value just before the call runs. Calls of \
         one step may reference what other calls of the same step store: they then run in \
         order, so you can lay out a whole chain of calls at once."
    ))
}
