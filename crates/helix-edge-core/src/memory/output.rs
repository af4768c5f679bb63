//! `_outputPath`: the meta-argument that stores a call's result in the state. The
//! workflow designer sets, per tool, whether and where ([`OutputPath`]); the property
//! and its allowed values are part of the tool's JSON Schema, so the model sees them.

use super::paths::schema_allows;
use crate::tool::{OUTPUT_PATH, OutputPath};
use serde_json::{Map, Value, json};

impl OutputPath {
    /// Takes `_outputPath` out of `args` and returns where the result goes under this
    /// policy. `offered` is what [`Choose`](Self::Choose) allows (its own list, else
    /// the state schema's paths); with no list at all any path the state has will do.
    pub fn take(
        &self,
        args: &mut Value,
        offered: &[String],
        schema: Option<&Value>,
    ) -> Result<Option<String>, String> {
        let given = args
            .as_object_mut()
            .and_then(|a| a.remove(OUTPUT_PATH))
            .filter(|v| !v.is_null());
        let given = match given {
            None => None,
            Some(Value::String(path)) => Some(path),
            Some(other) => return Err(format!("{OUTPUT_PATH} must be a string, got {other}")),
        };
        match (self, given) {
            (Self::Off, None) => Ok(None),
            (Self::Off, Some(_)) => Err(format!(
                "this tool does not store its result in the state; leave out {OUTPUT_PATH}"
            )),
            (Self::Fixed(path), Some(given)) if given != *path => Err(format!(
                "this tool's result always goes to {path}; leave out {OUTPUT_PATH} or give {path}"
            )),
            (Self::Fixed(path), _) => Ok(Some(path.clone())),
            (Self::Choose(_), None) => Ok(None),
            (Self::Choose(_), Some(path)) => {
                let known = if offered.is_empty() {
                    valid_pointer(&path) && schema.is_none_or(|s| schema_allows(s, &path))
                } else {
                    offered.contains(&path)
                };
                if known {
                    Ok(Some(path))
                } else if offered.is_empty() {
                    Err(format!(
                        "'{path}' is not a place in the state (a JSON Pointer such as /result, or /list/- to append)"
                    ))
                } else {
                    Err(format!(
                        "'{path}' is not one of the paths this tool may write: {}",
                        offered.join(", ")
                    ))
                }
            }
        }
    }

    /// `input_schema` with the `_outputPath` property this policy offers (optional, so
    /// a strict schema makes it nullable); unchanged for [`Off`](Self::Off).
    pub fn offer(&self, input_schema: &Value, offered: &[String]) -> Value {
        let property = match self {
            Self::Off => return input_schema.clone(),
            Self::Fixed(path) => json!({
                "type": "string",
                "enum": [path],
                "description": format!("The result is always stored in the state at {path}.")
            }),
            Self::Choose(_) if offered.is_empty() => json!({
                "type": "string",
                "description": "Where to store the result in the state, as a JSON Pointer (a last segment '-' appends to an array). Leave it out to only read the result."
            }),
            Self::Choose(_) => json!({
                "type": "string",
                "enum": offered,
                "description": "Where to store the result in the state (a last segment '-' appends to an array). Leave it out to only read the result."
            }),
        };
        let mut schema = input_schema.clone();
        if let Some(obj) = schema.as_object_mut() {
            let properties = obj
                .entry("properties")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Some(properties) = properties.as_object_mut() {
                properties.insert(OUTPUT_PATH.into(), property);
            }
        }
        schema
    }
}

/// Whether `path` is a JSON Pointer below the root (the root is not a place to store).
fn valid_pointer(path: &str) -> bool {
    path.starts_with('/')
        && path.len() > 1
        && !path.split('/').skip(1).any(str::is_empty)
        && path
            .match_indices('~')
            .all(|(i, _)| matches!(path.as_bytes().get(i + 1), Some(b'0' | b'1')))
}

/// The content the model reads for a stored result: the result and where it went.
pub fn stored(result: Value, path: &str) -> Value {
    json!({ "result": result, "storedAt": path })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offered() -> Vec<String> {
        vec!["/order".into(), "/log/-".into()]
    }

    #[test]
    fn off_refuses_a_path_and_takes_the_meta_argument_out() {
        let mut args = json!({ "id": 1 });
        assert_eq!(OutputPath::Off.take(&mut args, &[], None), Ok(None));
        let mut args = json!({ "id": 1, "_outputPath": "/x" });
        let err = OutputPath::Off.take(&mut args, &[], None).unwrap_err();
        assert!(err.contains("does not store its result"), "{err}");
        assert_eq!(args, json!({ "id": 1 }));
        // null is "none" (strict schemas make the property nullable).
        let mut args = json!({ "id": 1, "_outputPath": null });
        assert_eq!(OutputPath::Off.take(&mut args, &[], None), Ok(None));
    }

    #[test]
    fn fixed_always_writes_its_path() {
        let fixed = OutputPath::Fixed("/order".into());
        assert_eq!(
            fixed.take(&mut json!({}), &[], None),
            Ok(Some("/order".into()))
        );
        let same = &mut json!({ "_outputPath": "/order" });
        assert_eq!(fixed.take(same, &[], None), Ok(Some("/order".into())));
        let err = fixed
            .take(&mut json!({ "_outputPath": "/x" }), &[], None)
            .unwrap_err();
        assert!(err.contains("always goes to /order"), "{err}");
    }

    #[test]
    fn choose_takes_one_of_the_offered_paths_or_none() {
        let choose = OutputPath::Choose(Vec::new());
        assert_eq!(choose.take(&mut json!({}), &offered(), None), Ok(None));
        let args = &mut json!({ "_outputPath": "/log/-" });
        assert_eq!(
            choose.take(args, &offered(), None),
            Ok(Some("/log/-".into()))
        );
        let err = choose
            .take(&mut json!({ "_outputPath": "/x" }), &offered(), None)
            .unwrap_err();
        assert_eq!(
            err,
            "'/x' is not one of the paths this tool may write: /order, /log/-"
        );
        let err = choose
            .take(&mut json!({ "_outputPath": 3 }), &offered(), None)
            .unwrap_err();
        assert_eq!(err, "_outputPath must be a string, got 3");
    }

    #[test]
    fn choose_without_a_list_takes_any_pointer_the_state_schema_has() {
        let choose = OutputPath::Choose(Vec::new());
        let args = &mut json!({ "_outputPath": "/a/b" });
        assert_eq!(choose.take(args, &[], None), Ok(Some("/a/b".into())));
        for bad in ["a", "/", "", "/a//b", "/a~2"] {
            let args = &mut json!({ "_outputPath": bad });
            assert!(choose.take(args, &[], None).is_err(), "{bad}");
        }
        let schema = json!({ "type": "object", "properties": { "a": {} } });
        let args = &mut json!({ "_outputPath": "/b" });
        assert!(choose.take(args, &[], Some(&schema)).is_err());
    }

    #[test]
    fn the_schema_offers_the_property_with_its_values() {
        let input = json!({ "type": "object", "properties": { "id": { "type": "string" } }, "required": ["id"] });
        assert_eq!(OutputPath::Off.offer(&input, &offered()), input);
        let chosen = OutputPath::Choose(Vec::new()).offer(&input, &offered());
        assert_eq!(
            chosen["properties"]["_outputPath"]["enum"],
            json!(["/order", "/log/-"])
        );
        assert_eq!(
            chosen["required"],
            json!(["id"]),
            "the meta-argument is optional"
        );
        let fixed = OutputPath::Fixed("/order".into()).offer(&input, &[]);
        assert_eq!(
            fixed["properties"]["_outputPath"]["enum"],
            json!(["/order"])
        );
        let open = OutputPath::Choose(Vec::new()).offer(&json!({ "type": "object" }), &[]);
        assert_eq!(open["properties"]["_outputPath"]["type"], "string");
        assert!(open["properties"]["_outputPath"].get("enum").is_none());
    }
}
