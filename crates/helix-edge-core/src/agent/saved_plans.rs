//! Saved plans (feature `plans`, with [`AgentBuilder::saved_plan`]): plans defined with
//! the agent — the calls a model would lay out in one step, with `_outputPath`, state
//! references and `†input.NAME` where a value comes from the run — that the model
//! re-runs by name with new inputs through the `run_plan` tool.
//!
//! A `run_plan` call whose plan and inputs are right is expanded in the step it was made
//! in: its plan's calls join the step as calls of their own (ids `{call}_{step}`), with
//! the inputs put in, and run as the model's own calls do — in dependency order, each
//! approved, suspended and resumed on its own, stored in the transcript. The `run_plan`
//! call answers the ids it added; with an unknown plan or wrong inputs nothing is added
//! and it answers the problem. A `run_plan` call with `_scope` runs the plan in that
//! part of the state: each of its calls works under the scope (its own `_scope`, if it
//! has one, below it), so one plan serves every part of the state shaped alike.

use crate::agent::{Agent, AgentBuilder, Extension};
use crate::error::{DefinitionError, ToolError};
use crate::memory::check::PlannedCall;
use crate::memory::scope::{self, SCOPE};
use crate::message::ToolCall;
use crate::tool::Tool;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::fmt::Write;
use std::rc::Rc;

pub use crate::memory::RUN_PLAN;

/// The most calls a saved plan may have.
pub const MAX_SAVED_CALLS: usize = 32;

/// A plan saved with its agent, re-run by name (see [`AgentBuilder::saved_plan`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SavedPlan {
    name: String,
    description: String,
    inputs: Vec<(String, String)>,
    calls: Vec<PlannedCall>,
}

impl SavedPlan {
    /// A plan named `name` (as `run_plan` is given it), described for the model.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            inputs: Vec::new(),
            calls: Vec::new(),
        }
    }

    /// An input: each run gives it, and `†input.NAME` (or `$input.NAME`) in a call's
    /// arguments stands for it.
    pub fn input(mut self, name: impl Into<String>, description: impl Into<String>) -> Self {
        self.inputs.push((name.into(), description.into()));
        self
    }

    /// A call of the plan, step `id` (letters, digits, `_`, `-`; at most 16): `tool` with
    /// `arguments` as a model would give them (an object).
    pub fn call(
        mut self,
        id: impl Into<String>,
        tool: impl Into<String>,
        arguments: Value,
    ) -> Self {
        self.calls.push(PlannedCall {
            id: Some(id.into()),
            name: tool.into(),
            arguments: match arguments {
                Value::Object(map) => map,
                other => Map::from_iter([(String::new(), other)]),
            },
        });
        self
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What is wrong with it for an agent with `tools` and a state of `schema`.
    fn check(&self, tools: &[Tool], schema: Option<&Value>) -> Result<(), String> {
        if !crate::tool::valid_name(&self.name) {
            return Err("its name must be 1-64 letters, digits, '_' or '-'".into());
        }
        if self.description.trim().is_empty() {
            return Err("it has no description".into());
        }
        if self.calls.is_empty() || self.calls.len() > MAX_SAVED_CALLS {
            return Err(format!("it must have 1-{MAX_SAVED_CALLS} calls"));
        }
        for (i, (input, _)) in self.inputs.iter().enumerate() {
            if !crate::tool::valid_name(input) || self.inputs[..i].iter().any(|(n, _)| n == input) {
                return Err(format!("input '{input}' is not a name, or is given twice"));
            }
        }
        for (i, call) in self.calls.iter().enumerate() {
            let id = call.id.as_deref().unwrap_or_default();
            if id.is_empty() || id.len() > 16 || !crate::tool::valid_name(id) {
                return Err(format!(
                    "step '{id}' must be 1-16 letters, digits, '_' or '-'"
                ));
            }
            if self.calls[..i].iter().any(|c| c.id == call.id) {
                return Err(format!("step '{id}' is given twice"));
            }
            if call.name == RUN_PLAN || !tools.iter().any(|t| t.name == call.name) {
                return Err(format!(
                    "step '{id}' calls '{}', which the agent does not have",
                    call.name
                ));
            }
            if call.arguments.contains_key("") {
                return Err(format!("step '{id}': the arguments must be an object"));
            }
            let mut unknown = None;
            visit(&Value::Object(call.arguments.clone()), &mut |name| {
                if !self.inputs.iter().any(|(n, _)| n == name) {
                    unknown.get_or_insert_with(|| name.to_string());
                }
            });
            if let Some(name) = unknown {
                return Err(format!(
                    "step '{id}' uses input '{name}', which the plan does not declare"
                ));
            }
        }
        // What does not depend on the inputs, the state or the scope a run has: its
        // order, who writes where, and the references' form.
        let report = crate::memory::check::check(tools, schema, &Value::Null, &self.calls);
        let structural = ["cycle", "two_writers", "reference_malformed"];
        match report
            .problems
            .iter()
            .find(|p| structural.contains(&p.code))
        {
            Some(problem) => Err(problem.message.clone()),
            None => Ok(()),
        }
    }

    /// Its calls for `run_plan` call `call_id` with `inputs`: ids `{call_id}_{step}`, the
    /// inputs put in. An error says what is wrong with the inputs.
    fn instantiate(
        &self,
        call_id: &str,
        inputs: &Map<String, Value>,
    ) -> Result<Vec<ToolCall>, String> {
        let missing: Vec<&str> = (self.inputs.iter().map(|(n, _)| n.as_str()))
            .filter(|n| !inputs.contains_key(*n))
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "plan '{}' needs the inputs: {}",
                self.name,
                missing.join(", ")
            ));
        }
        if let Some(extra) = inputs
            .keys()
            .find(|k| !self.inputs.iter().any(|(n, _)| n == *k))
        {
            return Err(format!("plan '{}' has no input '{extra}'", self.name));
        }
        Ok(self
            .calls
            .iter()
            .map(|call| ToolCall {
                id: format!("{call_id}_{}", call.id.as_deref().unwrap_or_default()),
                name: call.name.clone(),
                arguments: put_in(Value::Object(call.arguments.clone()), inputs),
            })
            .collect())
    }
}

/// The input `value` stands for, if it is a `†input.NAME` (or `$input.NAME`) reference.
fn input_ref(value: &str) -> Option<&str> {
    value
        .strip_prefix("†input.")
        .or_else(|| value.strip_prefix("$input."))
}

/// Calls `found` with each input `value` references.
fn visit(value: &Value, found: &mut impl FnMut(&str)) {
    match value {
        Value::String(s) => {
            if let Some(name) = input_ref(s) {
                found(name);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| visit(v, found)),
        Value::Object(map) => map.values().for_each(|v| visit(v, found)),
        _ => {}
    }
}

/// `value` with each input reference replaced by the input.
fn put_in(value: Value, inputs: &Map<String, Value>) -> Value {
    match value {
        Value::String(s) => match input_ref(&s).and_then(|name| inputs.get(name)) {
            Some(input) => input.clone(),
            None => Value::String(s),
        },
        Value::Array(items) => Value::Array(items.into_iter().map(|v| put_in(v, inputs)).collect()),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (k, put_in(v, inputs)))
                .collect(),
        ),
        other => other,
    }
}

/// Input of `run_plan`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RunPlan {
    /// The saved plan.
    name: String,
    /// Its inputs, by name.
    #[serde(default)]
    inputs: Map<String, Value>,
}

/// The calls `call` (of `run_plan`) adds to its step, when its plan and inputs are
/// right.
fn expand(
    plans: &[SavedPlan],
    schema: Option<&Value>,
    call: &ToolCall,
) -> Result<Vec<ToolCall>, String> {
    let mut arguments = call.arguments.clone();
    let outer = scope::take(&mut arguments, schema)?;
    let input: RunPlan = serde_json::from_value(arguments).map_err(|e| e.to_string())?;
    let mut calls = find(plans, &input.name)?.instantiate(&call.id, &input.inputs)?;
    if let Some(outer) = outer {
        calls.iter_mut().try_for_each(|c| within_scope(&outer, c))?;
    }
    Ok(calls)
}

/// Puts `call` (of a plan run with `_scope`) in `outer`: its own scope, if it has one,
/// under it.
fn within_scope(outer: &str, call: &mut ToolCall) -> Result<(), String> {
    let inner = scope::take(&mut call.arguments, None)?;
    let scope = scope::within(Some(outer), inner.as_deref().unwrap_or(""));
    if let Some(arguments) = call.arguments.as_object_mut() {
        arguments.insert(SCOPE.into(), Value::String(scope));
    }
    Ok(())
}

/// The plan called `name`.
fn find<'a>(plans: &'a [SavedPlan], name: &str) -> Result<&'a SavedPlan, String> {
    plans.iter().find(|p| p.name == name).ok_or_else(|| {
        let names: Vec<&str> = plans.iter().map(|p| p.name.as_str()).collect();
        format!(
            "there is no saved plan '{name}' (plans: {})",
            names.join(", ")
        )
    })
}

/// The plans given to a builder.
#[derive(Default)]
struct SavedPlans(Vec<SavedPlan>);

impl Extension for SavedPlans {
    fn order(&self) -> u8 {
        3 // after `validate_plan`: a saved plan may call every other tool
    }

    fn apply(self: Box<Self>, mut agent: Agent) -> Result<Agent, DefinitionError> {
        let invalid = |plan: &str, reason: String| DefinitionError::InvalidPlan {
            agent: agent.name.clone(),
            reason: format!("saved plan '{plan}': {reason}"),
        };
        if agent.tool(RUN_PLAN).is_some() {
            return Err(DefinitionError::DuplicateTool(RUN_PLAN.into()));
        }
        for (i, plan) in self.0.iter().enumerate() {
            plan.check(&agent.tools, agent.state_schema.as_ref())
                .map_err(|e| invalid(&plan.name, e))?;
            if self.0[..i].iter().any(|p| p.name == plan.name) {
                return Err(invalid(&plan.name, "is given twice".into()));
            }
        }
        let plans: Rc<[SavedPlan]> = self.0.into();
        let mut description =
            "Run a saved plan by name with its inputs: its calls join this step and run as yours \
             do (in the order their state references give). Saved plans:"
                .to_string();
        for plan in plans.iter() {
            let inputs: Vec<&str> = plan.inputs.iter().map(|(n, _)| n.as_str()).collect();
            let _ = write!(
                description,
                "\n- `{}` (inputs: {}): {}",
                plan.name,
                inputs.join(", "),
                plan.description
            );
            for (name, about) in &plan.inputs {
                let _ = write!(description, "\n  - `{name}`: {about}");
            }
        }
        let answers = plans.clone();
        let mut tool: Tool = Tool::new(RUN_PLAN, description, move |input: RunPlan, ctx| {
            let answer = find(&answers, &input.name)
                .and_then(|plan| plan.instantiate(ctx.tool_call_id(), &input.inputs))
                .map(|calls| {
                    let ids: Vec<&str> = calls.iter().map(|c| c.id.as_str()).collect();
                    json!({ "plan": input.name, "calls": ids })
                })
                .map_err(|reason| ToolError::InputInvalid {
                    tool: RUN_PLAN.into(),
                    reason,
                });
            async move { answer }
        })
        .no_state_refs()
        .into();
        let names: Vec<&str> = plans.iter().map(|p| p.name.as_str()).collect();
        tool.input_schema["properties"]["name"]["enum"] = json!(names);
        agent.tools.push(tool);
        let schema = agent.state_schema.clone();
        agent.expand = Some(Rc::new(move |call: &ToolCall| {
            (call.name == RUN_PLAN).then(|| expand(&plans, schema.as_ref(), call))
        }));
        Ok(agent)
    }
}

impl AgentBuilder {
    /// Saves a plan with the agent: the model re-runs it by name with new inputs through
    /// the `run_plan` tool (see [`SavedPlan`]).
    pub fn saved_plan(self, plan: SavedPlan) -> Self {
        self.extend(|plans: &mut SavedPlans| plans.0.push(plan))
    }
}
