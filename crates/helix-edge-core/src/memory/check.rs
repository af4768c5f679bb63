//! Checking a plan without running it: the calls a model (or a person) would lay out in
//! one step, checked against the agent's tools, its state schema and the session's
//! state as it is now. Every problem is reported, not only the first, and nothing runs:
//! tools unknown, meta-arguments refused (`_outputPath`, `_when`, `_scope`), arguments
//! that do not fit the tool's schema (a reference stands in for any value), malformed
//! references, references to places the state does not have now and no call of the
//! plan writes, places the state schema does not have, cycles, two writers of one
//! place. A valid plan's report says the rounds it would run in.

use super::graph::{Access, Graph, Problem, overlap};
use super::{Memory, StateMemory, offer, reference, scope, state};
use crate::tool::Tool;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// The most calls one plan may have.
pub const MAX_CALLS: usize = 64;

/// A call of a plan, as a model would make it.
#[derive(Debug, Clone, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlannedCall {
    /// Its id, to name it in the report (default `c1`, `c2`, … by position).
    #[serde(default, deserialize_with = "crate::wire::present")]
    pub id: Option<String>,
    /// The tool.
    pub name: String,
    /// Its arguments, meta-arguments included.
    #[serde(default)]
    pub arguments: Map<String, Value>,
}

/// What is wrong with a plan, and how it would run.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PlanReport {
    /// Whether it has no problem.
    pub valid: bool,
    /// Every problem found.
    pub problems: Vec<PlanProblem>,
    /// For a plan without a cycle: its calls in the rounds they would run in (calls of
    /// one round run together).
    pub rounds: Vec<Vec<String>>,
}

/// One problem of a plan.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PlanProblem {
    /// What kind: `duplicate_id`, `unknown_tool`, `input_invalid`,
    /// `reference_malformed`, `reference_to_nothing`, `unknown_path`, `cycle` or
    /// `two_writers`.
    pub code: &'static str,
    /// The calls it is about.
    pub calls: Vec<String>,
    /// What is wrong, in words.
    pub message: String,
}

/// The schema a reference has in the arguments checked (each replaced by a marker).
fn marked_reference() -> Value {
    json!({ "type": "object", "required": ["†state"] })
}

/// Checks `calls` against `tools`, the state `schema` and the current `state`.
pub fn check(
    tools: &[Tool],
    schema: Option<&Value>,
    state: &Value,
    calls: &[PlannedCall],
) -> PlanReport {
    let labels: Vec<String> = calls
        .iter()
        .enumerate()
        .map(|(i, c)| c.id.clone().unwrap_or_else(|| format!("c{}", i + 1)))
        .collect();
    let mut problems = Vec::new();
    let mut problem = |code, call: &str, message: String| {
        problems.push(PlanProblem {
            code,
            calls: vec![call.to_string()],
            message,
        });
    };
    let mut twice: Vec<&String> = Vec::new();
    for (i, label) in labels.iter().enumerate() {
        if labels[..i].contains(label) && !twice.contains(&label) {
            twice.push(label);
        }
    }
    for label in twice {
        let message = format!("the id '{label}' names more than one call");
        problem("duplicate_id", label, message);
    }
    let arguments: Vec<Value> = calls
        .iter()
        .map(|c| Value::Object(c.arguments.clone()))
        .collect();
    let access: Vec<Access> = calls
        .iter()
        .zip(&arguments)
        .map(
            |(call, args)| match tools.iter().find(|t| t.name() == call.name) {
                Some(tool) => StateMemory.access(schema, tool, args),
                None => Access::default(),
            },
        )
        .collect();
    for ((call, label), given) in calls.iter().zip(&labels).zip(&arguments) {
        let Some(tool) = tools.iter().find(|t| t.name() == call.name) else {
            let names: Vec<&str> = tools.iter().map(Tool::name).collect();
            let message = format!(
                "{label} calls '{}', which is not a tool of this agent (tools: {})",
                call.name,
                names.join(", ")
            );
            problem("unknown_tool", label, message);
            continue;
        };
        let (mut arguments, meta) = match state::without_meta(schema, tool, given) {
            Ok(found) => found,
            Err(reason) => {
                problem(
                    "input_invalid",
                    label,
                    format!("{label} ({}): {reason}", call.name),
                );
                continue;
            }
        };
        let mut input = tool.input_schema().clone();
        if tool.takes_state_refs() {
            let mut malformed = false;
            for reason in reference::references(&arguments)
                .into_iter()
                .filter_map(Result::err)
            {
                problem("reference_malformed", label, format!("{label}: {reason}"));
                malformed = true;
            }
            if malformed {
                continue;
            }
            let items = meta
                .each
                .as_ref()
                .and_then(|e| e.pointer())
                .map(String::from);
            let reads = reference::references(&arguments).into_iter().flatten();
            for pointer in reads.chain(items) {
                let at = scope::within(meta.scope.as_deref(), &pointer);
                let known = schema.is_none_or(|s| super::paths::schema_allows(s, &at));
                let written = access.iter().any(|a| {
                    a.write
                        .as_deref()
                        .is_some_and(|w| overlap(w.trim_end_matches("/-"), &at))
                });
                if known && !written && state.pointer(&at).is_none() {
                    let message = format!(
                        "{label} reads {at}, which the state does not have now and no call of the plan writes"
                    );
                    problem("reference_to_nothing", label, message);
                }
            }
            mark(&mut arguments, meta.each.is_some());
            offer::accept(&mut input, &marked_reference());
        }
        if let Err(reason) = crate::schema::validate(&input, &arguments) {
            let message = format!("{label} ({}): {reason}", call.name);
            problem("input_invalid", label, message);
        }
    }
    let graph = Graph::new(&access);
    for found in graph.problems(&access, &labels, schema) {
        let (code, calls) = match &found {
            Problem::UnknownPath { call, .. } => ("unknown_path", vec![call.clone()]),
            Problem::Cycle { calls } => ("cycle", calls.clone()),
            Problem::TwoWriters { calls, .. } => ("two_writers", calls.clone()),
        };
        problems.push(PlanProblem {
            code,
            calls,
            message: found.to_string(),
        });
    }
    let rounds = graph
        .layers()
        .map(|layers| {
            let named = |layer: Vec<usize>| layer.into_iter().map(|i| labels[i].clone()).collect();
            layers.into_iter().map(named).collect()
        })
        .unwrap_or_default();
    PlanReport {
        valid: problems.is_empty(),
        problems,
        rounds,
    }
}

/// Replaces each reference in `value` (and, in an instanced call, each item
/// reference) with a marker its schema check accepts.
fn mark(value: &mut Value, items: bool) {
    match value {
        Value::String(text) => {
            let item = || reference::parse_item(text).filter(|_| items);
            if let Some(Ok(pointer)) = reference::parse(text).or_else(item) {
                *value = json!({ "†state": pointer });
            }
        }
        Value::Array(list) => list.iter_mut().for_each(|v| mark(v, items)),
        Value::Object(members) => members.values_mut().for_each(|v| mark(v, items)),
        _ => {}
    }
}
