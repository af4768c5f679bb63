//! Building an agent definition, validated when built (names, schemas, duplicates).

use super::{
    Agent, AgentTool, DEFAULT_MAX_STEPS, DEFAULT_TOOL_TIMEOUT, Hooks, OutputSpec, StepSummary,
    SystemPrompt,
};
use crate::error::DefinitionError;
use crate::model::{CacheTtl, ModelSettings};
use crate::tool::{RESERVED_TOOL_NAMES, Tool, schema_of, valid_name};
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::any::Any;
use std::rc::Rc;
use std::time::Duration;

/// Builds an [`Agent`]; [`build`](AgentBuilder::build) validates it.
pub struct AgentBuilder {
    pub(crate) agent: Agent,
    /// What capabilities (skills, persistent children) add when it is built.
    extensions: Vec<Box<dyn Extension>>,
}

/// A capability's part of building an agent ([`AgentBuilder::extend`]), applied by
/// `build` once the agent's own definition is checked.
#[allow(
    dead_code,
    reason = "the capabilities a build has (skills, persistent children) use it"
)]
pub(crate) trait Extension: Any {
    /// Where it applies among the others (lowest first).
    fn order(&self) -> u8;
    /// The agent with what it adds, checked.
    fn apply(self: Box<Self>, agent: Agent) -> Result<Agent, DefinitionError>;
}

impl AgentBuilder {
    pub(super) fn new(name: String) -> Self {
        Self {
            agent: Agent {
                name,
                description: String::new(),
                system_prompt: SystemPrompt::Static(String::new()),
                tools: Vec::new(),
                initial_state: json!({}),
                state_schema: None,
                output: None,
                strict_output: false,
                model: ModelSettings::default(),
                max_steps: DEFAULT_MAX_STEPS,
                tool_timeout: DEFAULT_TOOL_TIMEOUT,
                stop_when: None,
                hooks: None,
                subagents: Vec::new(),
                persistent: Vec::new(),
                wake_on_children: false,
                guard: None,
                run_prompt: None,
                run_tools: None,
                expand: None,
                model_layer: None,
                settings: Default::default(),
            },
            extensions: Vec::new(),
        }
    }

    /// Changes the extension of type `E` (added at its first use) with `change`.
    #[allow(
        dead_code,
        reason = "the capabilities a build has (skills, persistent children) use it"
    )]
    pub(crate) fn extend<E: Extension + Default>(mut self, change: impl FnOnce(&mut E)) -> Self {
        let at = self
            .extensions
            .iter()
            .position(|e| (&**e as &dyn Any).is::<E>());
        let mut extension: Box<E> = match at.map(|at| self.extensions.remove(at)) {
            Some(known) => (known as Box<dyn Any>).downcast().unwrap_or_default(),
            None => Box::default(),
        };
        change(&mut extension);
        // Kept in the order they apply in (as a stable sort by `order` would leave them).
        let order = extension.order();
        let at = self.extensions.partition_point(|e| e.order() <= order);
        self.extensions.insert(at, extension);
        self
    }

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
    pub fn tool(mut self, tool: impl AgentTool) -> Self {
        let (tool, subagent) = tool.into_parts();
        self.agent.tools.push(tool);
        self.agent.subagents.extend(subagent);
        self
    }

    /// The state new sessions start from (a JSON object), untyped.
    pub fn initial_state(mut self, state: Value) -> Self {
        self.agent.initial_state = state;
        self
    }

    /// Typed state: sessions start from `S::default()`, a create's `input.state` must
    /// match `S`'s schema (or the request is refused, naming the field), and tools read
    /// and update it as `S` ([`ToolContext::state_as`], [`ToolContext::update_as`]).
    ///
    /// [`ToolContext::state_as`]: crate::tool::ToolContext::state_as
    /// [`ToolContext::update_as`]: crate::tool::ToolContext::update_as
    pub fn state<S>(mut self) -> Self
    where
        S: Serialize + DeserializeOwned + JsonSchema + Default,
    {
        // A type that does not serialise to an object is refused by `build`.
        self.agent.initial_state = serde_json::to_value(S::default()).unwrap_or(Value::Null);
        self.agent.state_schema = Some(schema_of::<S>());
        self
    }

    /// Requires structured output matching `schema`, delivered through `__finish__`.
    /// Any schema works: one that is not an object's is passed as `{"output": …}`.
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.agent.output = Some(OutputSpec::new(schema));
        self
    }

    /// Requires structured output of type `O` (its schema derived from `O`): a struct,
    /// or any other type (a string, a list, an enum).
    pub fn output<O: JsonSchema>(self) -> Self {
        self.output_schema(schema_of::<O>())
    }

    /// Asks providers that support constrained decoding (OpenAI's `strict`, Anthropic's
    /// strict tool use) to hold `__finish__`'s arguments to the output schema; a no-op
    /// elsewhere. The output is validated either way.
    pub fn strict_output(mut self) -> Self {
        self.agent.strict_output = true;
        self
    }

    /// Ends the run after a step for which `predicate` is true, instead of calling the
    /// model again. The run completes without output, or, for an agent that owes one,
    /// fails as `output_missing`.
    pub fn stop_when(mut self, predicate: impl Fn(&StepSummary<'_>) -> bool + 'static) -> Self {
        self.agent.stop_when = Some(Rc::new(predicate));
        self
    }

    /// Model settings.
    pub fn model(mut self, settings: ModelSettings) -> Self {
        self.agent.model = settings;
        self
    }

    /// Prompt caching for the agent's model calls (see [`ModelSettings::prompt_cache`]).
    pub fn prompt_cache(mut self, ttl: CacheTtl) -> Self {
        self.agent.model.prompt_cache = Some(ttl);
        self
    }

    /// Cap on model steps per run (default 20).
    pub fn max_steps(mut self, steps: u32) -> Self {
        self.agent.max_steps = steps;
        self
    }

    /// How long a server tool's call may run unless the tool sets its own `timeout`
    /// (default 2 minutes). A call past it has its signal raised and is stopped; the
    /// model sees a `tool_timeout` error.
    pub fn tool_timeout(mut self, timeout: Duration) -> Self {
        self.agent.tool_timeout = timeout;
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
        if agent.output_schema().is_some_and(|s| !s.is_object()) {
            return Err(DefinitionError::InvalidSchema(format!(
                "{} output",
                agent.name
            )));
        }
        for (i, tool) in agent.tools.iter().enumerate() {
            validate_tool(&agent, tool)?;
            validate_output_paths(&agent, tool)?;
            if agent.tools[..i].iter().any(|t| t.name == tool.name) {
                return Err(DefinitionError::DuplicateTool(tool.name.clone()));
            }
        }
        let mut agent = agent;
        for extension in self.extensions {
            agent = extension.apply(agent)?;
        }
        Ok(agent)
    }
}

/// A prescribed or offered output path must be a place the state has (any pointer
/// below the root when the state is untyped).
fn validate_output_paths(agent: &Agent, tool: &Tool) -> Result<(), DefinitionError> {
    let Some(memory) = crate::memory::memory() else {
        return Ok(()); // the tools cannot set one
    };
    memory
        .check_paths(agent.state_schema(), tool)
        .map_err(|path| DefinitionError::UnknownOutputPath {
            tool: tool.name.clone(),
            path,
        })
}

fn validate_tool(agent: &Agent, tool: &Tool) -> Result<(), DefinitionError> {
    let name = &tool.name;
    if RESERVED_TOOL_NAMES.contains(&name.as_str())
        || name.starts_with(crate::tool::companion::COMPANION_PREFIX)
    {
        return Err(DefinitionError::ReservedToolName(name.clone()));
    }
    if !valid_name(name) {
        return Err(DefinitionError::InvalidToolName(name.clone()));
    }
    if !tool.input_schema.is_object() {
        return Err(DefinitionError::InvalidSchema(name.clone()));
    }
    let role = |r: &str| !r.is_empty() && r.len() <= 256 && !r.contains(char::is_whitespace);
    if tool.approvers.as_ref().is_some_and(|a| !role(&a.role)) {
        return Err(DefinitionError::InvalidApprovalRole(name.clone()));
    }
    let child = tool.subagent_of().map(|(child, _)| child);
    let child = child.and_then(|name| agent.subagents.iter().find(|a| a.name == name));
    match child {
        Some(child) if child.output.is_none() => {
            Err(DefinitionError::SubAgentWithoutOutput(name.clone()))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::{Agents, FINISH_TOOL};
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

    fn build_with(tool: impl AgentTool) -> Result<Agent, DefinitionError> {
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
    fn an_approval_role_is_kept_in_either_order_and_must_be_one() {
        let gated = server("pay").approval_always().approval_by_role("finance");
        let tool = Tool::from(gated.not_by_owner());
        let both = crate::store::Approvers {
            role: "finance".into(),
            not_owner: true,
        };
        assert_eq!(tool.approvers(), Some(&both));
        let reversed = server("pay").approval_always().not_by_owner();
        let tool = Tool::from(reversed.approval_by_role("finance"));
        assert_eq!(tool.approvers(), Some(&both));
        let plain = Tool::from(
            server("pay")
                .approval_always()
                .approval_by_role("org:admin"),
        );
        assert!(!plain.approvers().unwrap().not_owner);
        for unnamed in [
            server("pay").approval_always().not_by_owner(),
            server("pay")
                .approval_always()
                .approval_by_role("two words"),
        ] {
            let refused = DefinitionError::InvalidApprovalRole("pay".into());
            assert_eq!(build_with(unnamed).unwrap_err(), refused);
        }
        assert!(build_with(server("pay").approval_always().approval_by_role("ops")).is_ok());
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
