//! A small JSON Schema validator for the keywords tool input and output schemas use in
//! practice (and that schemars emits): `type`, `properties`, `required`,
//! `additionalProperties`, `items`, `enum`, `const`, `anyOf`/`oneOf`/`allOf`, string,
//! number and array bounds, and local `$ref`s (`#/$defs/…`, `#/definitions/…`).
//! Unknown keywords are ignored, as the specification says. It reports the first
//! violation with its location, in words a model can act on.
//!
//! Schemas can come from outside (an MCP server's `inputSchema` and
//! `requestedSchema`), and `anyOf`/`oneOf` over `$ref`s can make a check take time
//! exponential in the schema's size: the work is bounded by a budget of steps that grows
//! with the value checked ([`budget`]), and a check past it is refused in words.

use serde_json::{Map, Value};

/// Checks `value` against `schema`; on failure, says where and why.
pub fn validate(schema: &Value, value: &Value) -> Result<(), String> {
    let mut validator = Validator {
        root: schema,
        depth: 0,
        steps: budget(value),
    };
    let checked = validator.check(schema, value, "");
    if validator.steps == 0 {
        return Err(format!(
            "the schema takes too long to check (over {} steps for this value)",
            budget(value)
        ));
    }
    checked
}

struct Validator<'a> {
    root: &'a Value,
    /// Guards against `$ref` cycles.
    depth: u32,
    /// Steps left: every schema checked against a value is one.
    steps: u64,
}

const MAX_DEPTH: u32 = 64;

/// The steps a check of `value` may take: a base, and more for each of its nodes (a
/// schema with a few alternatives at each level stays far below it; one that branches
/// at every `$ref` reaches it after a few levels).
fn budget(value: &Value) -> u64 {
    fn nodes(v: &Value) -> u64 {
        match v {
            Value::Array(items) => 1 + items.iter().map(nodes).sum::<u64>(),
            Value::Object(map) => 1 + map.values().map(nodes).sum::<u64>(),
            _ => 1,
        }
    }
    10_000 + 64 * nodes(value)
}

fn at(path: &str) -> &str {
    if path.is_empty() { "the input" } else { path }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn has_type(v: &Value, ty: &str) -> bool {
    match ty {
        "number" => v.is_number(),
        "integer" => v.as_f64().is_some_and(|f| f.fract() == 0.0),
        other => type_name(v) == other,
    }
}

impl Validator<'_> {
    fn check(&mut self, schema: &Value, value: &Value, path: &str) -> Result<(), String> {
        let schema = match schema {
            Value::Bool(true) => return Ok(()),
            Value::Bool(false) => return Err(format!("{} is not allowed", at(path))),
            Value::Object(s) => s,
            _ => return Ok(()),
        };
        if self.steps == 0 {
            return Err("the schema takes too long to check".into());
        }
        self.steps -= 1;
        if self.depth == MAX_DEPTH {
            return Err("the schema nests too deeply".into());
        }
        self.depth += 1;
        let result = self.check_object(schema, value, path);
        self.depth -= 1;
        result
    }

    fn check_object(
        &mut self,
        s: &Map<String, Value>,
        value: &Value,
        path: &str,
    ) -> Result<(), String> {
        if let Some(Value::String(reference)) = s.get("$ref") {
            let target = reference
                .strip_prefix('#')
                .and_then(|p| self.root.pointer(p))
                .ok_or_else(|| format!("the schema has an unresolvable $ref {reference}"))?;
            self.check(target, value, path)?;
        }
        self.check_type(s, value, path)?;
        if let Some(Value::Array(options)) = s.get("enum")
            && !options.contains(value)
        {
            return Err(format!(
                "{} must be one of {}",
                at(path),
                Value::Array(options.clone())
            ));
        }
        if let Some(expected) = s.get("const")
            && expected != value
        {
            return Err(format!("{} must be {expected}", at(path)));
        }
        self.check_combinators(s, value, path)?;
        match value {
            Value::Object(obj) => self.check_properties(s, obj, path),
            Value::Array(items) => self.check_items(s, items, path),
            Value::String(text) => check_length(s, text.chars().count(), path),
            Value::Number(n) => check_range(s, n.as_f64().unwrap_or(0.0), path),
            _ => Ok(()),
        }
    }

    fn check_type(&self, s: &Map<String, Value>, value: &Value, path: &str) -> Result<(), String> {
        let ok = match s.get("type") {
            Some(Value::String(ty)) => has_type(value, ty),
            Some(Value::Array(types)) => types
                .iter()
                .filter_map(Value::as_str)
                .any(|ty| has_type(value, ty)),
            _ => true,
        };
        if ok {
            return Ok(());
        }
        let expected = s.get("type").map(Value::to_string).unwrap_or_default();
        Err(format!(
            "{} must be of type {expected}, not {}",
            at(path),
            type_name(value)
        ))
    }

    fn check_combinators(
        &mut self,
        s: &Map<String, Value>,
        value: &Value,
        path: &str,
    ) -> Result<(), String> {
        if let Some(Value::Array(all)) = s.get("allOf") {
            for sub in all {
                self.check(sub, value, path)?;
            }
        }
        if let Some(Value::Array(any)) = s.get("anyOf")
            && !any.iter().any(|sub| self.check(sub, value, path).is_ok())
        {
            return Err(format!("{} matches none of the allowed forms", at(path)));
        }
        if let Some(Value::Array(one)) = s.get("oneOf") {
            let matches = one
                .iter()
                .filter(|sub| self.check(sub, value, path).is_ok())
                .count();
            if matches != 1 {
                return Err(format!(
                    "{} must match exactly one allowed form (matches {matches})",
                    at(path)
                ));
            }
        }
        Ok(())
    }

    fn check_properties(
        &mut self,
        s: &Map<String, Value>,
        obj: &Map<String, Value>,
        path: &str,
    ) -> Result<(), String> {
        if let Some(Value::Array(required)) = s.get("required") {
            for key in required.iter().filter_map(Value::as_str) {
                if !obj.contains_key(key) {
                    return Err(format!(
                        "{} is missing the required property '{key}'",
                        at(path)
                    ));
                }
            }
        }
        let props = s.get("properties").and_then(Value::as_object);
        for (key, v) in obj {
            let child = format!("{path}/{key}");
            match props.and_then(|p| p.get(key)) {
                Some(sub) => self.check(sub, v, &child)?,
                None => match s.get("additionalProperties") {
                    Some(Value::Bool(false)) => {
                        return Err(format!("{} has an unknown property '{key}'", at(path)));
                    }
                    Some(extra @ Value::Object(_)) => self.check(extra, v, &child)?,
                    _ => {}
                },
            }
        }
        Ok(())
    }

    fn check_items(
        &mut self,
        s: &Map<String, Value>,
        items: &[Value],
        path: &str,
    ) -> Result<(), String> {
        let count = items.len() as f64;
        if let Some(min) = bound(s, "minItems")
            && count < min.0
        {
            return Err(format!("{} must have at least {} items", at(path), min.1));
        }
        if let Some(max) = bound(s, "maxItems")
            && count > max.0
        {
            return Err(format!("{} must have at most {} items", at(path), max.1));
        }
        if let Some(sub) = s.get("items") {
            for (i, item) in items.iter().enumerate() {
                self.check(sub, item, &format!("{path}/{i}"))?;
            }
        }
        Ok(())
    }
}

/// A numeric keyword: its value, and its text as the schema wrote it (for messages).
fn bound<'a>(s: &'a Map<String, Value>, key: &str) -> Option<(f64, &'a Value)> {
    let v = s.get(key)?;
    Some((v.as_f64()?, v))
}

fn check_length(s: &Map<String, Value>, len: usize, path: &str) -> Result<(), String> {
    // Bounds are printed as the schema wrote them (a float's `Display` would pull
    // core's float formatting into the bundle).
    let len = len as f64;
    if let Some(min) = bound(s, "minLength")
        && len < min.0
    {
        return Err(format!(
            "{} must be at least {} characters long",
            at(path),
            min.1
        ));
    }
    if let Some(max) = bound(s, "maxLength")
        && len > max.0
    {
        return Err(format!(
            "{} must be at most {} characters long",
            at(path),
            max.1
        ));
    }
    Ok(())
}

fn check_range(s: &Map<String, Value>, n: f64, path: &str) -> Result<(), String> {
    if let Some(min) = bound(s, "minimum")
        && n < min.0
    {
        return Err(format!("{} must be at least {}", at(path), min.1));
    }
    if let Some(max) = bound(s, "maximum")
        && n > max.0
    {
        return Err(format!("{} must be at most {}", at(path), max.1));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::validate;
    use serde_json::json;

    #[test]
    fn objects_are_checked_for_required_types_and_unknown_properties() {
        let schema = json!({
            "type": "object",
            "properties": {"to": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                           "n": {"type": "integer", "minimum": 0}},
            "required": ["to"],
            "additionalProperties": false
        });
        assert_eq!(validate(&schema, &json!({"to": ["a"], "n": 2})), Ok(()));
        assert!(
            validate(&schema, &json!({}))
                .unwrap_err()
                .contains("required property 'to'")
        );
        assert!(
            validate(&schema, &json!({"to": [1]}))
                .unwrap_err()
                .contains("/to/0")
        );
        assert!(
            validate(&schema, &json!({"to": []}))
                .unwrap_err()
                .contains("at least 1 items")
        );
        assert!(
            validate(&schema, &json!({"to": ["a"], "x": 1}))
                .unwrap_err()
                .contains("unknown property 'x'")
        );
        assert!(validate(&schema, &json!({"to": ["a"], "n": 1.5})).is_err());
        assert!(
            validate(&schema, &json!("text"))
                .unwrap_err()
                .contains("must be of type")
        );
    }

    #[test]
    fn local_refs_nullable_types_and_combinators_resolve() {
        let schema = json!({
            "$defs": {"Item": {"type": "object", "properties": {"k": {"enum": ["a", "b"]}}, "required": ["k"]}},
            "type": "object",
            "properties": {
                "item": {"$ref": "#/$defs/Item"},
                "maybe": {"type": ["string", "null"]},
                "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]}
            }
        });
        assert_eq!(
            validate(
                &schema,
                &json!({"item": {"k": "a"}, "maybe": null, "either": 3})
            ),
            Ok(())
        );
        assert!(
            validate(&schema, &json!({"item": {"k": "c"}}))
                .unwrap_err()
                .contains("one of")
        );
        assert!(validate(&schema, &json!({"either": true})).is_err());
        assert!(validate(&json!({"$ref": "#/$defs/Nope"}), &json!(1)).is_err());
    }

    #[test]
    fn alternatives_over_refs_are_checked_within_a_budget() {
        // 2^40 paths: each level's two alternatives both lead to the next level.
        let mut defs = serde_json::Map::new();
        for i in 0..40 {
            let next = json!({"$ref": format!("#/$defs/L{}", i + 1)});
            defs.insert(format!("L{i}"), json!({"anyOf": [next.clone(), next]}));
        }
        defs.insert("L40".into(), json!({"type": "string"}));
        let schema = json!({"$defs": defs, "$ref": "#/$defs/L0"});
        let started = std::time::Instant::now();
        let refused = validate(&schema, &json!(1)).unwrap_err();
        assert!(refused.contains("too long to check"), "{refused}");
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
        // A schema with a few alternatives per level passes untouched.
        let shallow = json!({"$defs": {"S": {"anyOf": [{"type": "integer"}, {"type": "string"}]}},
            "type": "array", "items": {"oneOf": [{"$ref": "#/$defs/S"}, {"type": "null"}]}});
        let many: Vec<serde_json::Value> = (0..10_000).map(|i| json!(i)).collect();
        assert_eq!(validate(&shallow, &serde_json::Value::Array(many)), Ok(()));
        // An alternative that nests too deeply fails alone; the next one is still checked.
        let deep = json!({"$defs": {"L": {"$ref": "#/$defs/L"}},
            "anyOf": [{"$ref": "#/$defs/L"}, {"type": "integer"}]});
        assert_eq!(validate(&deep, &json!(1)), Ok(()));
    }

    #[test]
    fn a_self_referencing_schema_does_not_recurse_forever() {
        let schema = json!({"$defs": {"L": {"$ref": "#/$defs/L"}}, "$ref": "#/$defs/L"});
        assert!(
            validate(&schema, &json!(1))
                .unwrap_err()
                .contains("nests too deeply")
        );
    }
}
