//! What a tool's input schema offers the model when its agent lays out plans: the
//! meta-arguments `_when`, `_scope` and `_forEach` beside the tool's own properties,
//! and — for a
//! `strict` tool, whose schema the provider enforces while decoding — a state
//! reference accepted wherever a value is, so a reference can stand in for a number,
//! a boolean or an object. (Arguments are validated against the tool's own schema
//! after the references are resolved.)

use super::each::FOR_EACH;
use super::scope::SCOPE;
use super::when::WHEN;
use serde_json::{Map, Value, json};

/// The schema of a state reference.
fn reference() -> Value {
    json!({
        "type": "string",
        "pattern": "^[†$](state|item)([.\\[].*)?$",
        "description": "A state reference (†state.path) or, in a call with _forEach, an item reference (†item.path), replaced by the value there."
    })
}

/// Adds `_when` and `_scope` to `input`'s properties; with `references`, every value
/// below them may also be a state reference.
pub fn plan_meta(input: &mut Value, references: bool) {
    if references {
        accept(input, &reference());
    }
    let Some(properties) = input
        .as_object_mut()
        .map(|o| {
            o.entry("properties")
                .or_insert_with(|| Value::Object(Map::new()))
        })
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    properties.insert(
        WHEN.into(),
        json!({
            "type": "string",
            "description": "Run this call only when a condition on the state holds, decided just before it runs: '†state.path' (present), '!†state.path' (absent), '†state.path == <JSON>' or != , or a numeric '<', '<=', '>', '>=' with a number. Leave it out to always run."
        }),
    );
    properties.insert(SCOPE.into(), scope_property());
    properties.insert(
        FOR_EACH.into(),
        json!({
            "type": "string",
            "description": "Run this call once per item of an array in the state, named by a reference ('†state.items'): in its arguments '†item' is the item and '†item.field' a value in it. The results come back together in item order (stored as one array at _outputPath). Leave it out to run once."
        }),
    );
}

/// The schema of `_scope`.
fn scope_property() -> Value {
    json!({
        "type": "string",
        "description": "A part of the state (JSON Pointer) this call works in: its state references, _when and _outputPath resolve under it (for run_plan: those of every call of the plan). Leave it out for the whole state."
    })
}

/// Adds `_scope` alone to `input`'s properties (`run_plan`'s: a saved plan run in a
/// part of the state).
pub fn scope_only(input: &mut Value) {
    if let Some(Value::Object(properties)) = input.get_mut("properties") {
        properties.insert(SCOPE.into(), scope_property());
    }
}

/// Lets every property (at any depth) and every array item of `schema` also be
/// `alternative` (the schema of a reference).
pub(crate) fn accept(schema: &mut Value, alternative: &Value) {
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    let mut either = |inner: &mut Value| {
        accept(inner, alternative);
        let taken = std::mem::take(inner);
        *inner = json!({ "anyOf": [taken, alternative] });
    };
    if let Some(Value::Object(properties)) = obj.get_mut("properties") {
        properties.values_mut().for_each(&mut either);
    }
    if let Some(items) = obj.get_mut("items").filter(|i| i.is_object()) {
        either(items);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_meta_arguments_are_offered_beside_the_tools_own() {
        let mut input = json!({ "type": "object", "properties": { "id": { "type": "string" } }, "required": ["id"] });
        plan_meta(&mut input, false);
        let properties = input["properties"].as_object().unwrap();
        assert_eq!(
            properties.keys().collect::<Vec<_>>(),
            ["_forEach", "_scope", "_when", "id"]
        );
        assert_eq!(input["properties"]["id"], json!({ "type": "string" }));
        assert_eq!(
            input["required"],
            json!(["id"]),
            "the meta-arguments stay optional"
        );
    }

    #[test]
    fn a_strict_tool_accepts_a_reference_wherever_it_accepts_a_value() {
        let mut input = json!({
            "type": "object",
            "properties": {
                "total": { "type": "number" },
                "order": { "type": "object", "properties": { "ok": { "type": "boolean" } } },
                "tags": { "type": "array", "items": { "type": "integer" } }
            }
        });
        plan_meta(&mut input, true);
        let p = &input["properties"];
        assert_eq!(p["total"]["anyOf"][0], json!({ "type": "number" }));
        assert_eq!(p["total"]["anyOf"][1], reference());
        assert_eq!(
            p["order"]["anyOf"][0]["properties"]["ok"]["anyOf"][0],
            json!({ "type": "boolean" })
        );
        assert_eq!(
            p["tags"]["anyOf"][0]["items"]["anyOf"][1]["pattern"],
            "^[†$](state|item)([.\\[].*)?$"
        );
        // The meta-arguments themselves are not references.
        assert_eq!(p["_when"]["type"], "string");
        assert!(p["_when"].get("anyOf").is_none());
    }
}
