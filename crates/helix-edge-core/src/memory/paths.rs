//! The places a state schema has: whether a JSON Pointer names one of them, and the
//! paths a model may choose for a call's `_outputPath` (every property, and `…/-` for
//! every array, to append). Local `$ref`s (`#/$defs/…`, `#/definitions/…`, as schemars
//! writes them) are followed; `anyOf`/`oneOf`/`allOf` alternatives are each tried.

use serde_json::Value;

/// How deep the catalog of output paths goes (`/a/b/c/d`).
const MAX_DEPTH: usize = 4;

/// Whether `pointer` (`""` for the whole state; a last segment `-` appends to an array)
/// names a place `schema` describes. An object with declared properties has only those
/// unless it allows more (`additionalProperties` other than `false`, or
/// `patternProperties`); a schema that says nothing about a value's shape allows any
/// path below it.
pub fn schema_allows(schema: &Value, pointer: &str) -> bool {
    let Some(rest) = pointer.strip_prefix('/') else {
        return pointer.is_empty();
    };
    let segments: Vec<String> = rest.split('/').map(unescape).collect();
    allows(schema, schema, &segments, 0)
}

fn unescape(segment: &str) -> String {
    segment.replace("~1", "/").replace("~0", "~")
}

fn allows(root: &Value, schema: &Value, segments: &[String], depth: usize) -> bool {
    let Some((first, rest)) = segments.split_first() else {
        return true;
    };
    if depth > 32 {
        return false; // a $ref loop
    }
    let schema = follow(root, schema);
    let alternatives = ["anyOf", "oneOf", "allOf"]
        .iter()
        .filter_map(|k| schema.get(*k)?.as_array())
        .flatten()
        .collect::<Vec<_>>();
    if !alternatives.is_empty() {
        return alternatives
            .iter()
            .any(|alt| allows(root, alt, segments, depth + 1));
    }
    let Some(object) = schema.as_object() else {
        return schema != &Value::Bool(false);
    };
    let container = |t: &Value| t == "object" || t == "array";
    let holds_members = match object.get("type") {
        None => true,
        Some(Value::Array(types)) => types.iter().any(container),
        Some(t) => container(t),
    };
    if !holds_members {
        return false; // a string, a number, null… has nothing below it
    }
    let properties = object.get("properties").and_then(Value::as_object);
    if let Some(member) = properties.and_then(|p| p.get(first)) {
        return allows(root, member, rest, depth + 1);
    }
    if let Some(items) = object.get("items") {
        let index =
            first == "-" || (!first.is_empty() && first.bytes().all(|b| b.is_ascii_digit()));
        return index && (first != "-" || rest.is_empty()) && allows(root, items, rest, depth + 1);
    }
    match object.get("additionalProperties") {
        Some(Value::Bool(false)) => false,
        Some(more) => allows(root, more, rest, depth + 1),
        // No word on the members: allowed unless properties were listed.
        None => !object.contains_key("properties") || object.contains_key("patternProperties"),
    }
}

/// The schema a local `$ref` points at (or `schema` itself).
fn follow<'a>(root: &'a Value, schema: &'a Value) -> &'a Value {
    let mut at = schema;
    for _ in 0..32 {
        let Some(target) = at.get("$ref").and_then(Value::as_str) else {
            return at;
        };
        match target.strip_prefix('#').and_then(|p| root.pointer(p)) {
            Some(next) => at = next,
            None => return at,
        }
    }
    at
}

/// The output paths `schema` offers, in its property order: each property (to depth
/// 4) and, for each array, `…/-` (append an item).
pub fn output_paths(schema: &Value) -> Vec<String> {
    let mut out = Vec::new();
    collect(schema, schema, "", 0, &mut out);
    out
}

fn collect(root: &Value, schema: &Value, at: &str, depth: usize, out: &mut Vec<String>) {
    if depth == MAX_DEPTH {
        return;
    }
    let schema = follow(root, schema);
    for key in ["anyOf", "oneOf", "allOf"] {
        for alt in schema
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            collect(root, alt, at, depth, out);
        }
    }
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (key, member) in properties {
        let path = format!("{at}/{}", crate::state::pointer_segment(key));
        if out.contains(&path) {
            continue;
        }
        out.push(path.clone());
        if is_array(root, member) {
            out.push(format!("{path}/-"));
        }
        collect(root, member, &path, depth + 1, out);
    }
}

fn is_array(root: &Value, schema: &Value) -> bool {
    let schema = follow(root, schema);
    let typed = |t: &Value| match t {
        Value::String(s) => s == "array",
        Value::Array(types) => types.iter().any(|t| t == "array"),
        _ => false,
    };
    schema.get("type").is_some_and(typed)
        || schema.get("items").is_some()
        || ["anyOf", "oneOf"].iter().any(|k| {
            schema
                .get(*k)
                .and_then(Value::as_array)
                .is_some_and(|alts| alts.iter().any(|a| is_array(root, a)))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::schema_of;
    use schemars::JsonSchema;
    use serde_json::json;
    use std::collections::BTreeMap;

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct Order {
        id: String,
        total: f64,
    }

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct State {
        order: Option<Order>,
        checks: Vec<String>,
        labels: BTreeMap<String, String>,
        note: String,
    }

    #[test]
    fn a_typed_state_has_its_fields_and_nothing_else() {
        let schema = schema_of::<State>();
        for ok in [
            "",
            "/order",
            "/order/id",
            "/checks",
            "/checks/-",
            "/checks/0",
            "/labels",
            "/labels/anything",
            "/note",
        ] {
            assert!(schema_allows(&schema, ok), "{ok} should be allowed");
        }
        for unknown in [
            "/orders",
            "/order/name",
            "/checks/x",
            "/checks/-/x",
            "/note/x/y",
            "order",
            "/",
        ] {
            assert!(
                !schema_allows(&schema, unknown),
                "{unknown} should be unknown"
            );
        }
    }

    #[test]
    fn output_paths_list_properties_and_appends() {
        let schema = schema_of::<State>();
        assert_eq!(
            output_paths(&schema),
            vec![
                "/checks",
                "/checks/-",
                "/labels",
                "/note",
                "/order",
                "/order/id",
                "/order/total"
            ]
        );
    }

    #[test]
    fn an_untyped_schema_allows_anything_and_offers_nothing() {
        assert!(schema_allows(&json!({}), "/x/y"));
        assert!(schema_allows(&json!(true), "/x"));
        assert!(!schema_allows(&json!(false), "/x"));
        assert!(output_paths(&json!({})).is_empty());
        let closed =
            json!({ "type": "object", "properties": { "a": {} }, "additionalProperties": false });
        assert!(schema_allows(&closed, "/a/anything"));
        assert!(!schema_allows(&closed, "/b"));
    }

    #[test]
    fn ref_loops_end() {
        let looped = json!({ "$ref": "#/$defs/A", "$defs": { "A": { "$ref": "#/$defs/A" } } });
        assert!(schema_allows(&looped, "/x"));
        assert!(output_paths(&looped).is_empty());
    }
}
