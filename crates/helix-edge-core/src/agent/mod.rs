//! Agent definitions: what users write against. An agent has a name, a description, a
//! system prompt (static or computed from the state), tools, an initial state, an
//! optional output schema, model settings, a step limit and optional hooks. Definitions
//! are validated when built, with errors that name the offending tool.
//!
//! ```
//! use helix_edge_core::{agent::Agent, error::ToolError, tool::Tool};
//! use schemars::JsonSchema;
//! use serde::Deserialize;
//! use serde_json::json;
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct SendEmail { to: Vec<String>, subject: String, body: String }
//!
//! # fn main() -> Result<(), helix_edge_core::error::DefinitionError> {
//! let agent = Agent::builder("mailer")
//!     .description("Sends email")
//!     .system_prompt("You send email for the user.")
//!     .initial_state(json!({ "sent": [] }))
//!     .tool(
//!         Tool::new("send_email", "Send an email", |input: SendEmail, ctx| async move {
//!             ctx.append("/sent", json!(input.subject))?; // recorded as `add /sent/-`
//!             Ok::<_, ToolError>(json!({ "sent": input.to.len() }))
//!         })
//!         .approval_when(|input: &SendEmail, _state| input.to.len() > 3), // fails closed
//!     )
//!     .build()?;
//! assert_eq!(agent.tools()[0].name(), "send_email");
//! # Ok(())
//! # }
//! ```

use crate::message::{Message, ToolCall};
use crate::model::{ModelSettings, ToolSpec};
use crate::tool::{OutputPath, Tool};
use futures::future::LocalBoxFuture;
use serde_json::Value;
use std::rc::Rc;
use std::time::Duration;

mod builder;
#[cfg(feature = "persistent-children")]
mod companions;
mod hooks;
mod output;
mod persistent;
#[cfg(feature = "plans")]
mod plan_tool;
mod registry;
#[cfg(feature = "plans")]
mod saved_plans;
mod settings;
mod subagent;

pub use builder::AgentBuilder;
#[allow(unused_imports, reason = "the capabilities a build has use it")]
pub(crate) use builder::Extension;
pub use hooks::{HOOK_TIMEOUT, HookContext, HookFuture, Hooks, Suspension, done};
pub(crate) use hooks::{Hook, HookPlace};
pub(crate) use output::OutputSpec;
pub use persistent::{ChildMode, PersistentChild, persistent_child_id};
pub use registry::{Agents, Unconfigured};
#[cfg(feature = "plans")]
pub use saved_plans::{MAX_SAVED_CALLS, RUN_PLAN, SavedPlan};
pub use subagent::{AgentTool, SubAgentTool};

/// Name of the tool injected when an agent has an output schema.
pub const FINISH_TOOL: &str = "__finish__";

/// Default cap on model steps per run.
pub const DEFAULT_MAX_STEPS: u32 = 20;

/// How long a server tool's call may run unless the agent or the tool says otherwise.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(120);

/// The system prompt: fixed, or computed from the current state.
#[derive(Clone)]
pub enum SystemPrompt {
    /// The same text every step.
    Static(String),
    /// Computed from the state before every step.
    Dynamic(Rc<dyn Fn(&Value) -> String>),
}

/// A validated agent definition.
#[derive(Clone)]
pub struct Agent {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) system_prompt: SystemPrompt,
    pub(crate) tools: Vec<Tool>,
    pub(crate) initial_state: Value,
    pub(crate) state_schema: Option<Value>,
    pub(crate) output: Option<OutputSpec>,
    pub(crate) strict_output: bool,
    pub(crate) model: ModelSettings,
    pub(crate) max_steps: u32,
    pub(crate) tool_timeout: Duration,
    pub(crate) stop_when: Option<StopWhen>,
    pub(crate) hooks: Option<Rc<dyn Hooks>>,
    /// The agents its sub-agent tools run (the registry adds them by name).
    pub(crate) subagents: Vec<Rc<Agent>>,
    /// The kinds of persistent child it may start.
    pub(crate) persistent: Vec<PersistentChild>,
    /// Whether a non-blocking child's notice starts a new run once this one finished.
    pub(crate) wake_on_children: bool,
    /// What refuses a call before it runs, given the run's transcript so far (a
    /// capability's: skills' `allowed-tools`).
    #[allow(
        dead_code,
        reason = "read by the guard a build registers (feature `skills`)"
    )]
    pub(crate) guard: Option<CallGuard>,
    /// What a run adds to its system prompt, read as it starts (a capability's: a skill
    /// provider's catalog).
    #[allow(
        dead_code,
        reason = "read by the run prompt a build registers (feature `skills`)"
    )]
    pub(crate) run_prompt: Option<RunPrompt>,
    /// The tools a drive of a session adds, listed as it starts (a capability's: an
    /// MCP server's).
    #[allow(
        dead_code,
        reason = "read by the run tools a build registers (feature `mcp`)"
    )]
    pub(crate) run_tools: Option<RunTools>,
    /// What a model's call adds to its step (a capability's: a saved plan's calls).
    #[allow(
        dead_code,
        reason = "read by the expansion a build registers (feature `plans`)"
    )]
    pub(crate) expand: Option<CallExpansion>,
    /// What its model calls go through (a capability's: large attachments read back
    /// from their store).
    #[allow(
        dead_code,
        reason = "read by the model layer a build registers (feature `attachment-store`)"
    )]
    pub(crate) model_layer: Option<ModelLayer>,
    /// What optional capabilities keep for it (the schedules' busy policy, set by
    /// `AgentBuilder::when_busy`).
    #[allow(
        dead_code,
        reason = "read by the capabilities a build has (feature `schedules`)"
    )]
    pub(crate) settings: settings::Settings,
}

/// A model, wrapped by a capability.
pub(crate) type ModelLayer = Rc<dyn Fn(Rc<dyn crate::model::Model>) -> Rc<dyn crate::model::Model>>;

/// What an agent's model calls go through, one line per capability: with the feature
/// `attachment-store`, large attachments read back from their store (the agent's
/// [`ModelLayer`]).
pub(crate) const MODEL_LAYERS: &[fn(&Agent) -> Option<&ModelLayer>] = &[
    #[cfg(feature = "attachment-store")]
    |agent| agent.model_layer.as_ref(),
];

/// The calls a call adds to its step: `None` when it adds none, an error when it would
/// but cannot (its own result says why).
pub(crate) type CallExpansion = Rc<dyn Fn(&ToolCall) -> Option<Result<Vec<ToolCall>, String>>>;

/// What calls add to their steps, one line per capability: with the feature `plans`, a
/// saved plan's calls (the agent's [`CallExpansion`]).
pub(crate) const CALL_EXPANSIONS: &[fn(&Agent) -> Option<&CallExpansion>] = &[
    #[cfg(feature = "plans")]
    |agent| agent.expand.as_ref(),
];

/// Given a run's id, what the run adds to its system prompt and the problems to log.
pub(crate) type RunPrompt = Rc<dyn Fn(&str) -> LocalBoxFuture<'static, (String, Vec<String>)>>;

/// What runs add to their system prompts as they start, one line per capability: with
/// the feature `skills`, a skill provider's catalog (the agent's [`RunPrompt`]).
pub(crate) const RUN_PROMPTS: &[fn(&Agent) -> Option<&RunPrompt>] = &[
    #[cfg(feature = "skills")]
    |agent| agent.run_prompt.as_ref(),
];

/// Given a session's vault (its id, and the credentials its tools keep), the tools a
/// drive of it adds and the problems to log.
pub(crate) type RunTools =
    Rc<dyn Fn(crate::journal::Vault) -> LocalBoxFuture<'static, (Vec<Tool>, Vec<String>)>>;

/// What drives add to their agents' tools as they start, one line per capability: with
/// the feature `mcp`, the tools of its MCP servers (the agent's [`RunTools`]).
pub(crate) const RUN_TOOLS: &[fn(&Agent) -> Option<&RunTools>] = &[
    #[cfg(feature = "mcp")]
    |agent| agent.run_tools.as_ref(),
];

/// Refuses a call, given the run's transcript so far, with the error the model sees.
pub(crate) type CallGuard = Rc<dyn Fn(&[Message], &ToolCall) -> Option<crate::error::ToolError>>;

/// A capability's refusal of a call of an agent, given the run's transcript so far.
type Guard = fn(&Agent, &[Message], &ToolCall) -> Option<crate::error::ToolError>;

/// What refuses calls before they run, one line per capability: with the feature
/// `skills`, a loaded skill's allowed tools (the agent's [`CallGuard`]).
const GUARDS: &[Guard] = &[
    #[cfg(feature = "skills")]
    |agent, run, call| agent.guard.as_ref().and_then(|guard| guard(run, call)),
];

/// Decides after a step whether the run stops there.
pub(crate) type StopWhen = Rc<dyn Fn(&StepSummary<'_>) -> bool>;

/// A step that would go on to another model call (after its calls, or nudged after its
/// text), as a `stop_when` predicate sees it.
#[derive(Debug)]
pub struct StepSummary<'a> {
    /// Model steps taken in this run, this one included.
    pub run_steps: u32,
    /// The model's text in this step.
    pub text: &'a str,
    /// The calls the model made in this step.
    pub tool_calls: &'a [ToolCall],
    /// Their results, in call order.
    pub results: &'a [Message],
    /// The state after the step's writes.
    pub state: &'a Value,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("name", &self.name)
            .field("tools", &self.tools)
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// Starts a definition.
    pub fn builder(name: impl Into<String>) -> AgentBuilder {
        AgentBuilder::new(name.into())
    }

    /// The agent's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What it does.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// Its tools (without the injected `__finish__`).
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// The agents its child sessions run: its sub-agent tools' and its persistent
    /// children's.
    pub(crate) fn child_agents(&self) -> Vec<Rc<Agent>> {
        let persistent = self.persistent.iter().map(|c| c.agent.clone());
        self.subagents.iter().cloned().chain(persistent).collect()
    }

    /// The kinds of persistent child it may start.
    pub fn persistent_children(&self) -> &[PersistentChild] {
        &self.persistent
    }

    /// The kind of persistent child that runs agent `name`.
    pub fn persistent_child(&self, name: &str) -> Option<&PersistentChild> {
        self.persistent.iter().find(|c| c.agent.name == name)
    }

    /// Whether a non-blocking child's notice starts a new run once the parent's run has
    /// finished ([`AgentBuilder::wake_on_child_results`]).
    pub fn wakes_on_children(&self) -> bool {
        self.wake_on_children
    }

    /// The state a new session starts from.
    pub fn initial_state(&self) -> &Value {
        &self.initial_state
    }

    /// The schema the state must match, for an agent with typed state.
    pub fn state_schema(&self) -> Option<&Value> {
        self.state_schema.as_ref()
    }

    /// The output schema, if the agent must produce structured output.
    pub fn output_schema(&self) -> Option<&Value> {
        self.output.as_ref().map(OutputSpec::schema)
    }

    pub(crate) fn output(&self) -> Option<&OutputSpec> {
        self.output.as_ref()
    }

    pub(crate) fn stop_when(&self) -> Option<&StopWhen> {
        self.stop_when.as_ref()
    }

    /// Model settings.
    pub fn model(&self) -> &ModelSettings {
        &self.model
    }

    /// Cap on model steps per run.
    pub fn max_steps(&self) -> u32 {
        self.max_steps
    }

    /// How long a call of `tool` (one of its server tools) may run.
    pub fn tool_timeout(&self, tool: &Tool) -> Duration {
        tool.timeout().unwrap_or(self.tool_timeout)
    }

    /// The tool called `name`.
    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// The system prompt for `state` (with the guidance on the state as memory when a
    /// tool stores results there, see [`crate::memory::guidance`]).
    pub fn system_prompt(&self, state: &Value) -> String {
        let mut prompt = match &self.system_prompt {
            SystemPrompt::Static(text) => text.clone(),
            SystemPrompt::Dynamic(f) => f(state),
        };
        let memory = crate::memory::memory();
        if let Some(guidance) = memory.and_then(|m| m.guidance(&self.tools, self.state_schema())) {
            prompt.push_str(&guidance);
        }
        prompt
    }

    /// The tools as the model sees them, with `__finish__` when an output is required.
    pub fn tool_specs(&self) -> Vec<ToolSpec> {
        let memory = crate::memory::memory();
        let plans = self
            .tools
            .iter()
            .any(|t| *t.output_path() != OutputPath::Off);
        let input_schema = |t: &Tool| match memory {
            Some(memory) => memory.input_schema(self.state_schema(), t, plans),
            None => t.input_schema.clone(),
        };
        let mut specs: Vec<ToolSpec> = self
            .tools
            .iter()
            .map(|t| ToolSpec {
                name: t.name.clone(),
                description: t.description.clone(),
                input_schema: input_schema(t),
                strict: t.strict,
            })
            .collect();
        if let Some(output) = &self.output {
            specs.push(ToolSpec {
                name: FINISH_TOOL.into(),
                description: "Call this exactly once, when you are done, with the final structured output as \
                              its arguments."
                    .into(),
                input_schema: output.finish_schema().clone(),
                strict: self.strict_output,
            });
        }
        specs
    }

    pub(crate) fn hooks(&self) -> Option<&dyn Hooks> {
        self.hooks.as_deref()
    }

    /// Why `call` is refused before it runs, given the run's transcript so far (`run`):
    /// asked of the capabilities a build registers in [`GUARDS`].
    pub(crate) fn refusal(
        &self,
        run: &[Message],
        call: &ToolCall,
    ) -> Option<crate::error::ToolError> {
        GUARDS.iter().find_map(|guard| guard(self, run, call))
    }
}
