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

use crate::error::DefinitionError;
use crate::message::{Message, ToolCall};
use crate::model::{ModelSettings, ToolSpec};
use crate::state::PatchOp;
use crate::tool::{RESERVED_TOOL_NAMES, Tool, valid_name};
use serde_json::{Value, json};
use std::rc::Rc;

/// Name of the tool injected when an agent has an output schema.
pub const FINISH_TOOL: &str = "__finish__";

/// Default cap on model steps per run.
pub const DEFAULT_MAX_STEPS: u32 = 20;

/// The system prompt: fixed, or computed from the current state.
#[derive(Clone)]
pub enum SystemPrompt {
    /// The same text every step.
    Static(String),
    /// Computed from the state before every step.
    Dynamic(Rc<dyn Fn(&Value) -> String>),
}

/// Callbacks around tool calls and suspension, in one canonical order: `before_tool` as
/// each server call starts (parallel calls run together); then, once every call of the
/// step is done, per call in the model's order (not the order they finished in)
/// `on_state_change` (if it wrote) → `on_message` → `after_tool`. A resumed step fires
/// `on_agent_resumed` first, and its approved, denied, answered and timed-out calls the
/// same sequence. All have empty defaults; they observe and must not fail.
pub trait Hooks {
    /// Before a server tool executes.
    fn before_tool(&self, _call: &ToolCall) {}
    /// After a tool call's writes are known (only when it wrote something).
    fn on_state_change(&self, _call: &ToolCall, _writes: &[PatchOp]) {}
    /// For each message the run adds to the transcript.
    fn on_message(&self, _message: &Message) {}
    /// After a tool call's result is known.
    fn after_tool(&self, _call: &ToolCall, _result: &Message) {}
    /// When the run suspends at a human-in-the-loop boundary.
    fn on_agent_suspended(&self, _tool_call_ids: &[String]) {}
    /// When a suspended run resumes.
    fn on_agent_resumed(&self) {}
}

/// A validated agent definition.
#[derive(Clone)]
pub struct Agent {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) system_prompt: SystemPrompt,
    pub(crate) tools: Vec<Tool>,
    pub(crate) initial_state: Value,
    pub(crate) output_schema: Option<Value>,
    pub(crate) model: ModelSettings,
    pub(crate) max_steps: u32,
    pub(crate) hooks: Option<Rc<dyn Hooks>>,
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
        AgentBuilder {
            agent: Agent {
                name: name.into(),
                description: String::new(),
                system_prompt: SystemPrompt::Static(String::new()),
                tools: Vec::new(),
                initial_state: json!({}),
                output_schema: None,
                model: ModelSettings::default(),
                max_steps: DEFAULT_MAX_STEPS,
                hooks: None,
            },
        }
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

    /// The state a new session starts from.
    pub fn initial_state(&self) -> &Value {
        &self.initial_state
    }

    /// The output schema, if the agent must produce structured output.
    pub fn output_schema(&self) -> Option<&Value> {
        self.output_schema.as_ref()
    }

    /// Model settings.
    pub fn model(&self) -> &ModelSettings {
        &self.model
    }

    /// Cap on model steps per run.
    pub fn max_steps(&self) -> u32 {
        self.max_steps
    }

    /// The tool called `name`.
    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// The system prompt for `state`.
    pub fn system_prompt(&self, state: &Value) -> String {
        match &self.system_prompt {
            SystemPrompt::Static(text) => text.clone(),
            SystemPrompt::Dynamic(f) => f(state),
        }
    }

    /// The tools as the model sees them, with `__finish__` when an output is required.
    pub fn tool_specs(&self) -> Vec<ToolSpec> {
        let mut specs: Vec<ToolSpec> = self
            .tools
            .iter()
            .map(|t| ToolSpec {
                name: t.name.clone(),
                description: t.description.clone(),
                input_schema: t.input_schema.clone(),
            })
            .collect();
        if let Some(schema) = &self.output_schema {
            specs.push(ToolSpec {
                name: FINISH_TOOL.into(),
                description: "Call this exactly once, when you are done, with the final structured output as \
                              its arguments."
                    .into(),
                input_schema: schema.clone(),
            });
        }
        specs
    }

    pub(crate) fn hooks(&self) -> Option<&dyn Hooks> {
        self.hooks.as_deref()
    }
}

/// Builds an [`Agent`]; [`build`](AgentBuilder::build) validates it.
pub struct AgentBuilder {
    agent: Agent,
}

impl AgentBuilder {
    /// What the agent does (shown in `GET /v1/agents`).
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.agent.description = text.into();
        self
    }

    /// A fixed system prompt.
    pub fn system_prompt(mut self, text: impl Into<String>) -> Self {
        self.agent.system_prompt = SystemPrompt::Static(text.into());
        self
    }

    /// A system prompt computed from the state before every step.
    pub fn system_prompt_fn(mut self, f: impl Fn(&Value) -> String + 'static) -> Self {
        self.agent.system_prompt = SystemPrompt::Dynamic(Rc::new(f));
        self
    }

    /// Adds a tool (any builder: [`Tool::new`], [`Tool::client`], [`Tool::subagent`]…).
    pub fn tool(mut self, tool: impl Into<Tool>) -> Self {
        self.agent.tools.push(tool.into());
        self
    }

    /// The state new sessions start from (a JSON object).
    pub fn initial_state(mut self, state: Value) -> Self {
        self.agent.initial_state = state;
        self
    }

    /// Requires structured output matching `schema`, delivered through `__finish__`.
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.agent.output_schema = Some(schema);
        self
    }

    /// Model settings.
    pub fn model(mut self, settings: ModelSettings) -> Self {
        self.agent.model = settings;
        self
    }

    /// Cap on model steps per run (default 20).
    pub fn max_steps(mut self, steps: u32) -> Self {
        self.agent.max_steps = steps;
        self
    }

    /// Callbacks around tool calls.
    pub fn hooks(mut self, hooks: impl Hooks + 'static) -> Self {
        self.agent.hooks = Some(Rc::new(hooks));
        self
    }

    /// Validates and returns the agent.
    pub fn build(self) -> Result<Agent, DefinitionError> {
        let agent = self.agent;
        if !valid_name(&agent.name) {
            return Err(DefinitionError::InvalidAgentName(agent.name));
        }
        if !agent.initial_state.is_object() {
            return Err(DefinitionError::StateNotAnObject(agent.name));
        }
        if agent.output_schema.as_ref().is_some_and(|s| !s.is_object()) {
            return Err(DefinitionError::InvalidSchema(format!(
                "{} output",
                agent.name
            )));
        }
        for (i, tool) in agent.tools.iter().enumerate() {
            validate_tool(tool)?;
            if agent.tools[..i].iter().any(|t| t.name == tool.name) {
                return Err(DefinitionError::DuplicateTool(tool.name.clone()));
            }
        }
        Ok(agent)
    }
}

fn validate_tool(tool: &Tool) -> Result<(), DefinitionError> {
    let name = &tool.name;
    if RESERVED_TOOL_NAMES.contains(&name.as_str()) {
        return Err(DefinitionError::ReservedToolName(name.clone()));
    }
    if !valid_name(name) {
        return Err(DefinitionError::InvalidToolName(name.clone()));
    }
    if !tool.input_schema.is_object() {
        return Err(DefinitionError::InvalidSchema(name.clone()));
    }
    match tool.subagent_of() {
        Some((child, _)) if child.output_schema.is_none() => {
            Err(DefinitionError::SubAgentWithoutOutput(name.clone()))
        }
        _ => Ok(()),
    }
}

/// The agents a deployment serves, by name.
#[derive(Clone, Default)]
pub struct Agents {
    /// Each agent, and whether it was added as the child of a sub-agent tool (such an
    /// entry gives way to an agent registered under its name).
    agents: Vec<(Rc<Agent>, bool)>,
}

impl Agents {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an agent, and the agents its sub-agent tools run that are not registered yet
    /// (child sessions look them up by name). An agent registered under a name already
    /// taken is refused, unless the name was only taken by a sub-agent's child.
    pub fn with(mut self, agent: Agent) -> Result<Self, DefinitionError> {
        match self.agents.iter().position(|(a, _)| a.name == agent.name) {
            Some(at) if self.agents[at].1 => {
                self.agents.remove(at);
            }
            Some(_) => return Err(DefinitionError::DuplicateAgent(agent.name)),
            None => {}
        }
        let children: Vec<Rc<Agent>> = agent
            .tools
            .iter()
            .filter_map(|t| t.subagent_of().map(|(a, _)| a.clone()))
            .collect();
        self.agents.push((Rc::new(agent), false));
        for child in children {
            self.add_child(child);
        }
        Ok(self)
    }

    /// Registers a sub-agent tool's child (and its own children) unless the name is taken.
    fn add_child(&mut self, child: Rc<Agent>) {
        if self.get(&child.name).is_some() {
            return;
        }
        let grandchildren: Vec<Rc<Agent>> = child
            .tools
            .iter()
            .filter_map(|t| t.subagent_of().map(|(a, _)| a.clone()))
            .collect();
        self.agents.push((child, true));
        for grandchild in grandchildren {
            self.add_child(grandchild);
        }
    }

    /// The agent called `name`.
    pub fn get(&self, name: &str) -> Option<Rc<Agent>> {
        self.agents
            .iter()
            .find(|(a, _)| a.name == name)
            .map(|(a, _)| a.clone())
    }

    /// All agents, in the order added.
    pub fn iter(&self) -> impl Iterator<Item = &Agent> {
        self.agents.iter().map(|(a, _)| a.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ToolError;
    use schemars::JsonSchema;
    use serde::Deserialize;

    #[derive(Deserialize, JsonSchema)]
    struct Path {
        #[allow(dead_code)]
        path: String,
    }

    fn server(name: &str) -> crate::tool::ServerTool {
        Tool::new(name, "d", |_: Path, _| async {
            Ok::<_, ToolError>(json!({}))
        })
    }

    fn build_with(tool: impl Into<Tool>) -> Result<Agent, DefinitionError> {
        Agent::builder("a").tool(tool).build()
    }

    #[test]
    fn duplicate_tools_and_agents_are_refused_by_name() {
        let dup = Agent::builder("a")
            .tool(server("x"))
            .tool(server("x"))
            .build()
            .unwrap_err();
        assert_eq!(dup, DefinitionError::DuplicateTool("x".into()));
        let a = || Agent::builder("a").build().unwrap();
        let twice = Agents::new().with(a()).unwrap().with(a());
        assert_eq!(
            twice.err(),
            Some(DefinitionError::DuplicateAgent("a".into()))
        );
    }

    #[test]
    fn a_sub_agents_child_is_registered_and_gives_way_to_an_agent_of_its_name() {
        let schema = json!({"type": "object"});
        let child = || {
            Agent::builder("child")
                .description("first")
                .output_schema(schema.clone())
                .build()
                .unwrap()
        };
        let parent = Agent::builder("parent")
            .tool(Tool::subagent::<Path>("delegate", child()))
            .build()
            .unwrap();
        let agents = Agents::new().with(parent).unwrap();
        assert_eq!(agents.get("child").unwrap().description(), "first");
        let mut own = child();
        own.description = "own".into();
        let agents = agents.with(own).unwrap();
        assert_eq!(agents.get("child").unwrap().description(), "own");
        assert_eq!(agents.iter().count(), 2);
    }

    #[test]
    fn reserved_and_malformed_names_are_refused() {
        assert_eq!(
            build_with(server("__finish__")).unwrap_err(),
            DefinitionError::ReservedToolName("__finish__".into())
        );
        assert!(matches!(
            build_with(server("has space")),
            Err(DefinitionError::InvalidToolName(_))
        ));
        assert!(matches!(
            build_with(server("")),
            Err(DefinitionError::InvalidToolName(_))
        ));
        assert!(Agent::builder("bad name").build().is_err());
        assert!(
            Agent::builder("a")
                .initial_state(json!([]))
                .build()
                .is_err()
        );
    }

    #[test]
    fn an_output_schema_injects_the_finish_tool() {
        let schema = json!({"type": "object", "properties": {"summary": {"type": "string"}}});
        let agent = Agent::builder("r")
            .output_schema(schema.clone())
            .tool(server("t"))
            .build()
            .unwrap();
        let specs = agent.tool_specs();
        assert_eq!(specs.len(), 2);
        assert_eq!(specs[1].name, FINISH_TOOL);
        assert_eq!(specs[1].input_schema, schema);
        assert_eq!(specs[0].input_schema["required"], json!(["path"]));
    }

    #[test]
    fn a_predicate_that_errors_requires_approval() {
        #[derive(Deserialize)]
        struct To {
            to: Vec<String>,
        }
        let tool: Tool = server("send")
            .approval_when(|i: &To, _| i.to.len() > 3)
            .into();
        assert!(!tool.needs_approval(&json!({"to": ["a"]}), &json!({})));
        assert!(tool.needs_approval(&json!({"to": ["a", "b", "c", "d"]}), &json!({})));
        assert!(
            tool.needs_approval(&json!({"to": "not a list"}), &json!({})),
            "arguments that do not fit fail closed"
        );
        // A fallible predicate: its error asks for approval.
        let limit: Tool = server("pay")
            .approval_when(|_: &Value, state: &Value| match state["limit"].as_u64() {
                Some(limit) => Ok(limit < 100),
                None => Err("no spending limit in the state"),
            })
            .into();
        assert!(!limit.needs_approval(&json!({}), &json!({"limit": 500})));
        assert!(limit.needs_approval(&json!({}), &json!({"limit": 50})));
        assert!(
            limit.needs_approval(&json!({}), &json!({})),
            "an error fails closed"
        );
    }
}
