//! State as the workflow's memory: the session's state is the scratchpad that wires tool
//! calls together. A call stores its result in the state with the `_outputPath`
//! meta-argument ([`output`]); a later argument names a stored value with a state
//! reference ([`reference`]); calls of one step that read what others of the same step
//! write form a plan ([`graph`]), checked against the state schema ([`paths`]) before
//! anything runs and run in dependency order. A call may run only when a condition on
//! the state holds (`_when`, [`when`]) and work in one part of the state (`_scope`,
//! [`scope`]) and run once per item of an array (`_forEach`, [`each`]); the tools'
//! schemas offer them ([`offer`]). A plan can be checked without running it
//! ([`check`]).
//!
//! The runtime asks for all this through [`Memory`], which a build has with the
//! feature `plans` ([`StateMemory`], registered in [`MEMORY`]); without it
//! ([`memory`] is `None`) arguments pass as they are, nothing is stored and each step's
//! calls are one round.

pub mod check;
pub mod each;
pub mod graph;
mod offer;
pub mod output;
pub mod paths;
pub mod reference;
pub mod scope;
mod state;
pub mod when;

pub use graph::{Access, Graph, Problem};
pub use state::StateMemory;

use crate::error::ToolError;

/// The tool that re-runs a saved plan (`crate::agent::SavedPlan`): it takes no
/// meta-arguments, since its plan's calls join the step before any call runs.
pub const RUN_PLAN: &str = "run_plan";
use crate::tool::Tool;
use serde_json::Value;

/// A call ready to run: references resolved, `_outputPath` taken out.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    /// The arguments the tool gets.
    pub arguments: Value,
    /// Where the result is stored, if anywhere.
    pub output: Option<String>,
    /// Why the call does not run, when its `_when` does not hold ([`when`]).
    pub skip: Option<String>,
    /// With `_forEach` ([`each`]): the arguments of each instance, in item order.
    pub each: Option<Vec<Value>>,
}

/// What the runtime asks of state as memory; `schema` is the agent's state schema, if
/// its state is typed.
pub trait Memory {
    /// `tool`'s input schema as the model sees it: with the `_outputPath` its policy
    /// offers and, when its agent lays out `plans`, `_when` and `_scope`.
    fn input_schema(&self, schema: Option<&Value>, tool: &Tool, plans: bool) -> Value;
    /// Whether the output paths `tool` prescribes or offers are places the state has.
    fn check_paths(&self, schema: Option<&Value>, tool: &Tool) -> Result<(), String>;
    /// Prepares the model's `arguments` for a call of `tool` in `state`: takes the
    /// output path out (checked against the tool's policy) and resolves the references,
    /// unless the tool does not take them. An error is the `tool_input_invalid` the
    /// model sees.
    fn prepare(
        &self,
        schema: Option<&Value>,
        tool: &Tool,
        arguments: &Value,
        state: &Value,
    ) -> Result<Prepared, ToolError>;
    /// What a call of `tool` with the model's `arguments` reads and writes (for the
    /// plan; malformed references and refused output paths are left to `prepare`).
    fn access(&self, schema: Option<&Value>, tool: &Tool, arguments: &Value) -> Access;
    /// The system prompt's guidance for an agent whose `tools` store results in its
    /// state: what the state is for, its schema, and how to reference it. `None` when
    /// no tool does.
    fn guidance(&self, tools: &[Tool], schema: Option<&Value>) -> Option<String>;
}

/// The memory this build has: state as memory with the feature `plans`.
pub const MEMORY: &[&dyn Memory] = &[
    #[cfg(feature = "plans")]
    &StateMemory,
];

/// State as memory, if this build has it.
pub fn memory() -> Option<&'static dyn Memory> {
    MEMORY.first().copied()
}

/// `arguments` ready for a call of `tool` in `state`: prepared by this build's memory,
/// or as they are without one.
pub fn prepare(
    schema: Option<&Value>,
    tool: &Tool,
    arguments: &Value,
    state: &Value,
) -> Result<Prepared, ToolError> {
    match memory() {
        Some(memory) => memory.prepare(schema, tool, arguments, state),
        None => Ok(Prepared {
            arguments: arguments.clone(),
            output: None,
            skip: None,
            each: None,
        }),
    }
}
