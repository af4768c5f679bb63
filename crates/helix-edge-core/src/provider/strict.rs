//! Schemas in the form constrained decoding accepts (OpenAI's `strict` function calling,
//! Anthropic's strict tool use): every object closed (`additionalProperties: false`)
//! with all its properties required, a property that was optional made nullable
//! instead. Arguments are still validated against the original schema.

use serde_json::{Value, json};

/// `schema` in strict form.
pub fn strict_schema(schema: &Value) -> Value {
    let mut schema = schema.clone();
    tighten(&mut schema);
    schema
}

fn tighten(schema: &mut Value) {
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    for key in ["$defs", "definitions", "properties"] {
        if let Some(Value::Object(children)) = obj.get_mut(key) {
            children.values_mut().for_each(tighten);
        }
    }
    for key in ["anyOf", "oneOf", "allOf", "prefixItems"] {
        if let Some(Value::Array(children)) = obj.get_mut(key) {
            children.iter_mut().for_each(tighten);
        }
    }
    if let Some(items) = obj.get_mut("items") {
        tighten(items);
    }
    let is_object = obj.get("type") == Some(&json!("object")) || obj.contains_key("properties");
    if !is_object {
        return;
    }
    obj.insert("additionalProperties".into(), json!(false));
    let required: Vec<String> = match obj.get("required") {
        Some(Value::Array(r)) => r
            .iter()
            .filter_map(Value::as_str)
            .map(String::from)
            .collect(),
        _ => Vec::new(),
    };
    let Some(Value::Object(properties)) = obj.get_mut("properties") else {
        obj.insert("properties".into(), json!({}));
        obj.insert("required".into(), json!([]));
        return;
    };
    let names: Vec<String> = properties.keys().cloned().collect();
    for (name, property) in properties.iter_mut() {
        if !required.contains(name) {
            nullable(property);
        }
    }
    obj.insert("required".into(), json!(names));
}

/// Lets `schema` also accept `null`.
fn nullable(schema: &mut Value) {
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    match obj.get_mut("type") {
        Some(Value::String(t)) if t != "null" => {
            let t = std::mem::take(t);
            obj.insert("type".into(), json!([t, "null"]));
        }
        Some(Value::Array(types)) if !types.contains(&json!("null")) => types.push(json!("null")),
        Some(_) => {}
        None => {
            let inner = std::mem::take(schema);
            *schema = json!({ "anyOf": [inner, { "type": "null" }] });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_are_closed_with_every_property_required_and_optional_ones_nullable() {
        let schema = json!({
            "type": "object",
            "properties": {
                "to": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
                "cc": {"type": "string"},
                "kind": {"$ref": "#/$defs/Kind"}
            },
            "required": ["to"],
            "$defs": {"Kind": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}
        });
        let strict = strict_schema(&schema);
        assert_eq!(strict["additionalProperties"], json!(false));
        assert_eq!(strict["required"], json!(["cc", "kind", "to"]));
        assert_eq!(
            strict["properties"]["to"]["type"],
            json!("array"),
            "required stays as is"
        );
        assert_eq!(
            strict["properties"]["cc"]["type"],
            json!(["string", "null"])
        );
        assert_eq!(
            strict["properties"]["kind"],
            json!({"anyOf": [{"$ref": "#/$defs/Kind"}, {"type": "null"}]})
        );
        let item = &strict["properties"]["to"]["items"];
        assert_eq!(item["additionalProperties"], json!(false));
        assert_eq!(item["required"], json!(["name"]));
        assert_eq!(
            strict["$defs"]["Kind"]["additionalProperties"],
            json!(false)
        );
        assert_eq!(
            json!({}),
            strict_schema(&json!({})),
            "no object, nothing to close"
        );
    }
}
