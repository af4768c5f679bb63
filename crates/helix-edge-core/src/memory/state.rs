//! [`StateMemory`]: the session's state as the workflow's memory — `_outputPath`,
//! state references and plans — as the feature `plans` gives it to the runtime.

use super::each::{FOR_EACH, Items, instance};
use super::scope::{self, SCOPE};
use super::when::{Conditions, WHEN};
use super::{Access, Memory, Prepared, paths, reference};
use crate::error::ToolError;
use crate::tool::{OUTPUT_PATH, OutputPath, Tool};
use serde_json::{Value, json};

/// A call's meta-arguments besides `_outputPath`.
#[derive(Debug, Default)]
pub(crate) struct Meta {
    /// `_scope`: the part of the state it works in.
    pub scope: Option<String>,
    /// `_when`: what must hold for it to run.
    pub when: Option<Conditions>,
    /// `_forEach`: the items it runs once per.
    pub each: Option<Items>,
}

/// Takes `_scope`, `_when` and `_forEach` out of a call's `arguments`; a path the model
/// chooses with `_outputPath` is then made one of the whole state (see [`scope`]).
fn take_meta(arguments: &mut Value, schema: Option<&Value>, tool: &Tool) -> Result<Meta, String> {
    let scope = scope::take(arguments, schema)?;
    let when = Conditions::take(arguments)?;
    let each = Items::take(arguments)?;
    if tool.name() == super::RUN_PLAN && (when.is_some() || each.is_some()) {
        return Err(format!(
            "{} takes no _when or _forEach (its plan's calls may have them)",
            super::RUN_PLAN
        ));
    }
    if let (Some(scope), OutputPath::Choose(_), Some(Value::String(path))) =
        (&scope, tool.output_path(), arguments.get_mut(OUTPUT_PATH))
    {
        *path = scope::within(Some(scope), path);
    }
    Ok(Meta { scope, when, each })
}

/// State as memory: results stored with `_outputPath`, arguments that reference the
/// state, and a step's calls run as a plan in dependency order.
#[derive(Debug, Clone, Copy, Default)]
pub struct StateMemory;

/// The paths `tool` may store to in a state of `schema`: its own list, else (when the
/// model chooses) every path of the schema.
fn offered_paths(schema: Option<&Value>, tool: &Tool) -> Vec<String> {
    match tool.output_path() {
        OutputPath::Choose(list) if list.is_empty() => {
            schema.map(paths::output_paths).unwrap_or_default()
        }
        OutputPath::Choose(list) => list.clone(),
        _ => Vec::new(),
    }
}

/// A call's `arguments` without the meta-arguments, as the tool would get them but
/// with the references not resolved, and its meta-arguments; why not when one is
/// refused (for checking a plan without running it).
pub(crate) fn without_meta(
    schema: Option<&Value>,
    tool: &Tool,
    arguments: &Value,
) -> Result<(Value, Meta), String> {
    let mut arguments = arguments.clone();
    let meta = take_meta(&mut arguments, schema, tool)?;
    let offered = offered_in(meta.scope.as_deref(), schema, tool);
    tool.output_path().take(&mut arguments, &offered, schema)?;
    Ok((arguments, meta))
}

/// [`offered_paths`] for a call in `scope`: where the tool lets the model choose any
/// place, any place the schema has under the scope (the catalog offered to the model
/// lists only the first levels).
fn offered_in(scope: Option<&str>, schema: Option<&Value>, tool: &Tool) -> Vec<String> {
    match tool.output_path() {
        OutputPath::Choose(list) if list.is_empty() && scope.is_some() => Vec::new(),
        _ => offered_paths(schema, tool),
    }
}

impl Memory for StateMemory {
    fn input_schema(&self, schema: Option<&Value>, tool: &Tool, plans: bool) -> Value {
        let offered = offered_paths(schema, tool);
        let mut input = tool.output_path().offer(tool.input_schema(), &offered);
        if tool.name() == super::RUN_PLAN {
            super::offer::scope_only(&mut input);
        } else if plans {
            super::offer::plan_meta(&mut input, tool.takes_state_refs() && tool.strict);
        }
        input
    }

    /// A prescribed or offered output path must be a place the state has (any pointer
    /// below the root when the state is untyped).
    fn check_paths(&self, schema: Option<&Value>, tool: &Tool) -> Result<(), String> {
        let paths: &[String] = match tool.output_path() {
            OutputPath::Off => &[],
            OutputPath::Fixed(path) => std::slice::from_ref(path),
            OutputPath::Choose(list) => list,
        };
        for path in paths {
            let mut args = json!({ (OUTPUT_PATH): path });
            let choose = OutputPath::Choose(Vec::new());
            if choose.take(&mut args, &[], schema).is_err() {
                return Err(path.clone());
            }
        }
        Ok(())
    }

    fn prepare(
        &self,
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
        let Meta { scope, when, each } =
            take_meta(&mut arguments, schema, tool).map_err(invalid)?;
        let offered = offered_in(scope.as_deref(), schema, tool);
        let output = tool
            .output_path()
            .take(&mut arguments, &offered, schema)
            .map_err(invalid)?;
        let view = scope::view(scope.as_deref(), state);
        let skip = match &when {
            Some(when) => when.unmet(view).map_err(invalid)?,
            None => None,
        };
        if skip.is_some() {
            return Ok(Prepared {
                arguments,
                output,
                skip,
                each: None,
            });
        }
        if tool.takes_state_refs() {
            reference::resolve_in(&mut arguments, view).map_err(invalid)?;
        }
        let each = match each {
            None => None,
            Some(items) => {
                let items = items.list(view).map_err(invalid)?;
                let instances: Result<Vec<Value>, String> = items
                    .iter()
                    .map(|item| instance(&arguments, item))
                    .collect();
                Some(instances.map_err(invalid)?)
            }
        };
        Ok(Prepared {
            arguments,
            output,
            skip,
            each,
        })
    }

    fn access(&self, schema: Option<&Value>, tool: &Tool, arguments: &Value) -> Access {
        let mut arguments = arguments.clone();
        let meta = take_meta(&mut arguments, schema, tool).unwrap_or_default();
        let scope = meta.scope.as_deref();
        let items = meta.each.iter().filter_map(Items::pointer);
        let mut reads: Vec<String> = meta
            .when
            .iter()
            .flat_map(Conditions::pointers)
            .chain(items)
            .map(|p| scope::within(scope, p))
            .collect();
        if tool.takes_state_refs() {
            let refs = reference::references(&arguments).into_iter().flatten();
            reads.extend(refs.map(|p| scope::within(scope, &p)));
        }
        let offered = offered_in(scope, schema, tool);
        let write = tool
            .output_path()
            .take(&mut arguments, &offered, schema)
            .ok()
            .flatten();
        Access { reads, write }
    }

    fn guidance(&self, tools: &[Tool], schema: Option<&Value>) -> Option<String> {
        if tools.iter().all(|t| *t.output_path() == OutputPath::Off) {
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
             order, so you can lay out a whole chain of calls at once. A call with `{WHEN}` \
             (such as \"†state.check.ok == true\") runs only when that holds once the calls \
             it reads have run, else it is skipped; a call with `{SCOPE}` (a JSON Pointer) \
             reads, decides and stores under that part of the state. A call with `{FOR_EACH}` \
             (a reference to an array, \"†state.items\") runs once per item, \"†item\" or \
             \"†item.field\" in its arguments standing for the item; the results come back \
             together, in item order."
        ))
    }
}
