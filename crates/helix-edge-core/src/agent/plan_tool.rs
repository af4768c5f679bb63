//! The `validate_plan` tool (feature `plans`, opted into with
//! [`AgentBuilder::plan_validation`]): the model checks a plan before it lays it out —
//! the same check as `POST …/plans/validate` ([`crate::memory::check`]), against the
//! agent's other tools, its state schema and the session's state as the call sees it.

use crate::agent::{Agent, AgentBuilder, Extension};
use crate::error::{DefinitionError, ToolError};
use crate::memory::check::{MAX_CALLS, PlannedCall, check};
use crate::tool::Tool;
use schemars::JsonSchema;
use serde::Deserialize;
use std::rc::Rc;

/// The tool's name.
pub const VALIDATE_PLAN: &str = "validate_plan";

/// Input of `validate_plan`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ValidatePlan {
    /// The calls of the plan, as you would make them in one step (arguments with
    /// `_outputPath`, `_when`, `_scope` and state references as you would give them).
    calls: Vec<PlannedCall>,
}

/// Whether a builder asked for the tool.
#[derive(Default)]
struct PlanValidation;

impl Extension for PlanValidation {
    fn order(&self) -> u8 {
        2 // after the skill tools: a plan may use them too
    }

    fn apply(self: Box<Self>, mut agent: Agent) -> Result<Agent, DefinitionError> {
        if agent.tool(VALIDATE_PLAN).is_some() {
            return Err(DefinitionError::DuplicateTool(VALIDATE_PLAN.into()));
        }
        let tools: Rc<[Tool]> = agent.tools.clone().into();
        let schema = agent.state_schema.clone();
        let tool = Tool::new(
            VALIDATE_PLAN,
            "Check a plan without running it: every problem with its calls (unknown tools, \
             arguments that do not fit, references to nothing, cycles, two writers of one \
             place) and, when it is valid, the rounds its calls would run in.",
            move |input: ValidatePlan, ctx| {
                let report = match input.calls.len() {
                    0 => Err("a plan has at least one call".to_string()),
                    n if n > MAX_CALLS => Err(format!("a plan has at most {MAX_CALLS} calls")),
                    _ => Ok(check(&tools, schema.as_ref(), &ctx.state(), &input.calls)),
                };
                let report = report.map_err(|reason| ToolError::InputInvalid {
                    tool: VALIDATE_PLAN.into(),
                    reason,
                });
                async move { report }
            },
        )
        .no_state_refs();
        agent.tools.push(tool.into());
        Ok(agent)
    }
}

impl AgentBuilder {
    /// Adds the `validate_plan` tool: the model can check a plan (its calls, with
    /// `_outputPath`, `_when`, `_scope` and state references) before it lays it out.
    pub fn plan_validation(self) -> Self {
        self.extend(|_: &mut PlanValidation| {})
    }
}
