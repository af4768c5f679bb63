//! Structured output: the schema an agent's output must match, the `__finish__` tool
//! that delivers it, and how an answer becomes the output. Tool arguments are objects,
//! so an output that is not one (a string, a list, a number) is passed as
//! `{"output": …}` and unwrapped. A string is repaired into the output only when it
//! parses as JSON that matches the schema.

use crate::schema::validate;
use serde_json::{Map, Value, json};

/// The output an agent owes, and the `__finish__` arguments that carry it.
#[derive(Debug, Clone)]
pub(crate) struct OutputSpec {
    /// What the output must match.
    schema: Value,
    /// What `__finish__` takes: `schema`, or an object wrapping it as `output`.
    finish: Value,
    wrapped: bool,
}

impl OutputSpec {
    pub(crate) fn new(schema: Value) -> Self {
        let wrapped = schema.get("type") != Some(&json!("object"));
        let finish = if wrapped {
            wrap(&schema)
        } else {
            schema.clone()
        };
        Self {
            schema,
            finish,
            wrapped,
        }
    }

    /// The output's schema.
    pub(crate) fn schema(&self) -> &Value {
        &self.schema
    }

    /// The schema of `__finish__`'s arguments.
    pub(crate) fn finish_schema(&self) -> &Value {
        &self.finish
    }

    /// The output a `__finish__` call's arguments deliver, or why they do not (in words
    /// the model can act on).
    pub(crate) fn accept(&self, args: &Value) -> Result<Value, String> {
        let value = if self.wrapped {
            match args.get("output") {
                Some(v) => v,
                None => return Err("the input is missing required property 'output'".into()),
            }
        } else {
            args
        };
        match validate(&self.schema, value) {
            Ok(()) => Ok(value.clone()),
            Err(reason) => self.repaired(value).ok_or(reason),
        }
    }

    /// A text answer that is itself the output: JSON matching the schema.
    pub(crate) fn in_text(&self, text: &str) -> Option<Value> {
        self.parsed(text.trim())
    }

    /// A string that parses as JSON matching the schema, parsed.
    fn repaired(&self, value: &Value) -> Option<Value> {
        self.parsed(value.as_str()?)
    }

    fn parsed(&self, text: &str) -> Option<Value> {
        let parsed: Value = serde_json::from_str(text).ok()?;
        validate(&self.schema, &parsed).ok()?;
        Some(parsed)
    }
}

/// `{"type": "object", "properties": {"output": schema}, "required": ["output"]}`, with
/// the schema's definitions moved to the root so its `$ref`s still resolve.
fn wrap(schema: &Value) -> Value {
    let mut inner = schema.clone();
    let mut root = Map::new();
    root.insert("type".into(), json!("object"));
    for key in ["$defs", "definitions"] {
        if let Some(defs) = inner.as_object_mut().and_then(|o| o.remove(key)) {
            root.insert(key.into(), defs);
        }
    }
    root.insert("properties".into(), json!({ "output": inner }));
    root.insert("required".into(), json!(["output"]));
    root.insert("additionalProperties".into(), json!(false));
    Value::Object(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_outputs_are_the_arguments_and_others_are_wrapped() {
        let object = OutputSpec::new(json!({"type": "object", "required": ["a"]}));
        assert_eq!(object.finish_schema(), object.schema());
        assert_eq!(object.accept(&json!({"a": 1})), Ok(json!({"a": 1})));

        let list = OutputSpec::new(json!({
            "type": "array", "items": {"$ref": "#/$defs/Item"},
            "$defs": {"Item": {"type": "integer"}}
        }));
        assert_eq!(list.finish_schema()["required"], json!(["output"]));
        assert_eq!(
            list.finish_schema()["$defs"]["Item"],
            json!({"type": "integer"})
        );
        assert_eq!(list.accept(&json!({"output": [1, 2]})), Ok(json!([1, 2])));
        assert!(list.accept(&json!({"output": ["x"]})).is_err());
        assert!(
            list.accept(&json!({"items": [1]}))
                .unwrap_err()
                .contains("'output'")
        );
    }

    #[test]
    fn a_string_is_repaired_only_when_it_parses_into_the_schema() {
        let list = OutputSpec::new(json!({"type": "array", "items": {"type": "integer"}}));
        assert_eq!(list.accept(&json!({"output": "[1, 2]"})), Ok(json!([1, 2])));
        assert!(list.accept(&json!({"output": "[\"a\"]"})).is_err());
        assert!(list.accept(&json!({"output": "not json"})).is_err());

        let text = OutputSpec::new(json!({"type": "string"}));
        assert_eq!(
            text.accept(&json!({"output": "\"quoted\""})),
            Ok(json!("\"quoted\"")),
            "a string that already matches is kept as it is"
        );

        let object = OutputSpec::new(json!({"type": "object", "required": ["a"]}));
        assert_eq!(object.in_text(" {\"a\": 1}\n"), Some(json!({"a": 1})));
        assert_eq!(object.in_text("{\"b\": 1}"), None);
        assert_eq!(object.in_text("Here it is: {\"a\": 1}"), None);
    }
}
