//! `_scope`: the meta-argument that gives a call its own part of the state. A scoped
//! call's state references, its `_when` and an output path it chooses all resolve
//! under the scope, so a sub-plan can be written once and pointed at any part of the
//! state: with `"_scope": "/research"`, `"†state.query"` reads `/research/query` and
//! `"_outputPath": "/summary"` writes `/research/summary`. (A path the tool fixes is
//! where the designer put it, scope or not.) The scope is a JSON Pointer, or a state
//! reference naming the same place, and must be a place the state schema has.

use super::paths::schema_allows;
use super::reference;
use serde_json::Value;

/// The meta-argument's name.
pub const SCOPE: &str = "_scope";

/// Takes `_scope` out of a call's `arguments`: the JSON Pointer it names (`None` for
/// none), checked against the state `schema` when there is one.
pub fn take(arguments: &mut Value, schema: Option<&Value>) -> Result<Option<String>, String> {
    let given = arguments
        .as_object_mut()
        .and_then(|a| a.remove(SCOPE))
        .filter(|v| !v.is_null());
    let Some(given) = given else {
        return Ok(None);
    };
    let Value::String(text) = &given else {
        return Err(format!("{SCOPE} must be a string, got {given}"));
    };
    let pointer = match reference::parse(text) {
        Some(parsed) => parsed?,
        None if text.starts_with('/') && !text.split('/').skip(1).any(str::is_empty) => {
            text.clone()
        }
        None => {
            return Err(format!(
                "{SCOPE} '{text}' is not a place in the state (a JSON Pointer such as /research)"
            ));
        }
    };
    if pointer.is_empty() {
        return Ok(None); // the whole state: no scope
    }
    if schema.is_some_and(|s| !schema_allows(s, &pointer)) {
        return Err(format!(
            "{SCOPE} '{text}' names {pointer}, which the state schema does not have"
        ));
    }
    Ok(Some(pointer))
}

/// `pointer` (inside the scope) as a pointer of the whole state.
pub fn within(scope: Option<&str>, pointer: &str) -> String {
    format!("{}{pointer}", scope.unwrap_or(""))
}

/// The part of `state` a call in `scope` sees (`null` when the state has none there).
pub fn view<'a>(scope: Option<&str>, state: &'a Value) -> &'a Value {
    match scope {
        None => state,
        Some(scope) => state.pointer(scope).unwrap_or(&Value::Null),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_scope_is_a_pointer_or_a_reference_and_is_taken_out() {
        let mut args = json!({ "q": 1, "_scope": "/research" });
        assert_eq!(take(&mut args, None), Ok(Some("/research".into())));
        assert_eq!(args, json!({ "q": 1 }));
        let mut args = json!({ "_scope": "†state.projects[2]" });
        assert_eq!(take(&mut args, None), Ok(Some("/projects/2".into())));
        assert_eq!(take(&mut json!({ "_scope": "$state" }), None), Ok(None));
        assert_eq!(take(&mut json!({ "_scope": null }), None), Ok(None));
        assert_eq!(take(&mut json!({}), None), Ok(None));
    }

    #[test]
    fn a_bad_scope_says_why() {
        for (scope, why) in [
            (json!(3), "must be a string"),
            (json!("research"), "is not a place in the state"),
            (json!("/a//b"), "is not a place in the state"),
            (json!("$state..a"), "malformed state reference"),
            (json!("/nope"), "which the state schema does not have"),
        ] {
            let schema = json!({ "type": "object", "properties": { "research": {} } });
            let err = take(&mut json!({ "_scope": scope }), Some(&schema)).unwrap_err();
            assert!(err.contains(why), "{scope}: {err}");
        }
    }

    #[test]
    fn pointers_and_the_state_resolve_under_the_scope() {
        assert_eq!(within(Some("/r"), "/q"), "/r/q");
        assert_eq!(within(Some("/r"), ""), "/r");
        assert_eq!(within(None, "/q"), "/q");
        let state = json!({ "r": { "q": 1 } });
        assert_eq!(view(Some("/r"), &state), &json!({ "q": 1 }));
        assert_eq!(view(Some("/x"), &state), &Value::Null);
        assert_eq!(view(None, &state), &state);
    }
}
