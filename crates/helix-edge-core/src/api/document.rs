//! The OpenAPI document as a deployment serves it: the static document
//! ([`OPENAPI`](super::OPENAPI)) plus what only the hosted agents know — a create's
//! `agent` is one of their names, and a typed agent's `input.state` overrides follow
//! its state's schema (every key optional: overrides are merged into the defaults).

use crate::agent::Agents;
use serde_json::{Map, Value, json};

/// The document for `agents`, as JSON text.
pub fn document(agents: &Agents) -> String {
    let Ok(mut doc) = serde_json::from_str::<Value>(super::OPENAPI) else {
        return super::OPENAPI.to_string();
    };
    let names: Vec<&str> = agents.iter().map(|a| a.name()).collect();
    let mut defs = Map::new();
    let mut rules = Vec::new();
    for agent in agents.iter() {
        let Some(schema) = agent.state_schema() else {
            continue;
        };
        let overrides = overrides_schema(agent.name(), schema, &mut defs);
        rules.push(json!({
            "if": { "required": ["agent"], "properties": { "agent": { "const": agent.name() } } },
            "then": { "properties": { "input": { "properties": { "state": overrides } } } },
        }));
    }
    let schemas = &mut doc["components"]["schemas"];
    if let Some(all) = schemas.as_object_mut() {
        all.extend(defs);
    }
    let create = &mut schemas["CreateSession"];
    create["properties"]["agent"]["enum"] = json!(names);
    if !rules.is_empty() {
        create["allOf"] = Value::Array(rules);
    }
    doc.to_string()
}

/// `schema` with its top-level properties optional, its `$defs` moved to the
/// document's components as `{agent}.{name}`, and references to them rewritten.
fn overrides_schema(agent: &str, schema: &Value, defs: &mut Map<String, Value>) -> Value {
    let mut schema = schema.clone();
    if let Some(obj) = schema.as_object_mut() {
        obj.remove("required");
        if let Some(Value::Object(local)) = obj.remove("$defs") {
            for (name, def) in local {
                defs.insert(format!("{agent}.{name}"), def);
            }
        }
    }
    rewrite_refs(&mut schema, agent);
    for def in defs.values_mut() {
        rewrite_refs(def, agent);
    }
    schema
}

fn rewrite_refs(value: &mut Value, agent: &str) {
    match value {
        Value::Object(obj) => {
            for (key, v) in obj.iter_mut() {
                match (key.as_str(), v) {
                    ("$ref", Value::String(r)) => {
                        if let Some(name) = r.strip_prefix("#/$defs/") {
                            *r = format!("#/components/schemas/{agent}.{name}");
                        }
                    }
                    (_, v) => rewrite_refs(v, agent),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| rewrite_refs(v, agent)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::document;
    use crate::agent::{Agent, Agents};
    use serde_json::{Value, json};

    #[derive(Default, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
    struct Plan {
        steps: Vec<Step>,
        done: u32,
    }

    #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
    struct Step {
        title: String,
    }

    #[test]
    fn the_served_document_names_the_agents_and_their_state_overrides() {
        let agents = Agents::new()
            .with(Agent::builder("chat").build().unwrap())
            .and_then(|a| a.with(Agent::builder("planner").state::<Plan>().build()?))
            .unwrap();
        let doc: Value = serde_json::from_str(&document(&agents)).unwrap();
        let create = &doc["components"]["schemas"]["CreateSession"];
        assert_eq!(
            create["properties"]["agent"]["enum"],
            json!(["chat", "planner"])
        );
        let rules = create["allOf"].as_array().unwrap();
        assert_eq!(rules.len(), 1, "only the typed agent has a rule");
        assert_eq!(rules[0]["if"]["properties"]["agent"]["const"], "planner");
        let state = &rules[0]["then"]["properties"]["input"]["properties"]["state"];
        assert!(state.get("required").is_none(), "overrides are partial");
        let steps = &state["properties"]["steps"]["items"]["$ref"];
        assert_eq!(steps, "#/components/schemas/planner.Step");
        assert!(doc["components"]["schemas"]["planner.Step"]["properties"]["title"].is_object());
        assert!(
            !doc.to_string().contains("#/$defs/"),
            "every reference resolves"
        );
    }
}
