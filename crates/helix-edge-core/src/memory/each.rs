//! `_forEach`: the meta-argument that runs one call once per item of an array — a
//! plan's instancing. It names the array with a state reference (`"†state.orders"`,
//! resolved in the call's scope) or gives it inline; in the call's arguments `"†item"`
//! (or `"$item"`) is the instance's item and `"†item.id"` a value inside it, each a
//! whole string, replaced keeping its JSON type. The instances run in parallel where
//! the tool allows; each is decided for approval on its own arguments; their results
//! are gathered in item order into one result (and stored at the call's output path).
//!
//! ```
//! use helix_edge_core::memory::each::{Items, instance};
//! use serde_json::json;
//! let mut args = json!({ "orderId": "†item.id", "_forEach": "†state.orders" });
//! let items = Items::take(&mut args).unwrap().unwrap();
//! let state = json!({ "orders": [{ "id": "a" }, { "id": "b" }] });
//! let list = items.list(&state).unwrap();
//! assert_eq!(instance(&args, &list[1]), Ok(json!({ "orderId": "b" })));
//! ```

use super::reference;
use serde_json::Value;

/// The meta-argument's name.
pub const FOR_EACH: &str = "_forEach";

/// The most instances one call may have.
pub const MAX_INSTANCES: usize = 64;

/// The items a call runs over.
#[derive(Debug, Clone, PartialEq)]
pub enum Items {
    /// The array at this JSON Pointer of the state (in the call's scope).
    At(String),
    /// An array given in the call.
    Given(Vec<Value>),
}

impl Items {
    /// Takes `_forEach` out of a call's `arguments`: `None` when it has none.
    pub fn take(arguments: &mut Value) -> Result<Option<Self>, String> {
        let given = arguments
            .as_object_mut()
            .and_then(|a| a.remove(FOR_EACH))
            .filter(|v| !v.is_null());
        match given {
            None => Ok(None),
            Some(Value::Array(items)) => Ok(Some(Self::Given(items))),
            Some(Value::String(text)) => match reference::parse(&text) {
                Some(pointer) => pointer.map(|p| Some(Self::At(p))),
                None => Err(format!(
                    "{FOR_EACH} must be a state reference to an array (†state.items) or an array, got '{text}'"
                )),
            },
            Some(other) => Err(format!(
                "{FOR_EACH} must be a state reference to an array (†state.items) or an array, got {other}"
            )),
        }
    }

    /// The place of the state it reads, if any.
    pub fn pointer(&self) -> Option<&str> {
        match self {
            Self::At(pointer) => Some(pointer),
            Self::Given(_) => None,
        }
    }

    /// The items, in `view` (the state as the call sees it): an array of at most
    /// [`MAX_INSTANCES`].
    pub fn list(&self, view: &Value) -> Result<Vec<Value>, String> {
        let items = match self {
            Self::Given(items) => items.clone(),
            Self::At(pointer) => match view.pointer(pointer) {
                Some(Value::Array(items)) => items.clone(),
                Some(other) => {
                    return Err(format!(
                        "{FOR_EACH} names {pointer}, which holds {} rather than an array",
                        kind(other)
                    ));
                }
                None => return Err(format!("{FOR_EACH} names {pointer}, which holds nothing")),
            },
        };
        if items.len() > MAX_INSTANCES {
            return Err(format!(
                "{FOR_EACH} runs a call at most {MAX_INSTANCES} times, not {}",
                items.len()
            ));
        }
        Ok(items)
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `arguments` for the instance of `item`: every item reference replaced by the value
/// it names in the item; one naming nothing there is an error.
pub fn instance(arguments: &Value, item: &Value) -> Result<Value, String> {
    let mut arguments = arguments.clone();
    resolve_in(&mut arguments, item)?;
    Ok(arguments)
}

fn resolve_in(value: &mut Value, item: &Value) -> Result<(), String> {
    match value {
        Value::String(text) => match reference::parse_item(text) {
            None => Ok(()),
            Some(pointer) => {
                let pointer = pointer?;
                let found = item.pointer(&pointer).ok_or_else(|| {
                    format!("item reference '{text}' points at nothing in the item {item}")
                })?;
                *value = found.clone();
                Ok(())
            }
        },
        Value::Array(items) => items.iter_mut().try_for_each(|v| resolve_in(v, item)),
        Value::Object(members) => members.values_mut().try_for_each(|v| resolve_in(v, item)),
        _ => Ok(()),
    }
}

/// The id of instance `index` of call `call_id`.
pub fn instance_id(call_id: &str, index: usize) -> String {
    format!("{call_id}#{index}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn items_come_from_the_state_or_the_call() {
        let state = json!({ "xs": [1, 2], "n": 3 });
        let mut args = json!({ "_forEach": "$state.xs", "a": 1 });
        let items = Items::take(&mut args).unwrap().unwrap();
        assert_eq!(args, json!({ "a": 1 }));
        assert_eq!(items.pointer(), Some("/xs"));
        assert_eq!(items.list(&state), Ok(vec![json!(1), json!(2)]));
        let given = Items::take(&mut json!({ "_forEach": ["a", "b"] }))
            .unwrap()
            .unwrap();
        assert_eq!(given.list(&state), Ok(vec![json!("a"), json!("b")]));
        assert_eq!(Items::take(&mut json!({ "_forEach": null })), Ok(None));
    }

    #[test]
    fn bad_items_say_why() {
        let state = json!({ "n": 3, "many": vec![0; 65] });
        for (each, why) in [
            (json!("xs"), "must be a state reference to an array"),
            (json!(3), "must be a state reference to an array"),
            (json!("$state..x"), "malformed state reference"),
        ] {
            let err = Items::take(&mut json!({ "_forEach": each })).unwrap_err();
            assert!(err.contains(why), "{each}: {err}");
        }
        let at = |p: &str| Items::At(p.into()).list(&state).unwrap_err();
        assert_eq!(
            at("/n"),
            "_forEach names /n, which holds a number rather than an array"
        );
        assert_eq!(at("/none"), "_forEach names /none, which holds nothing");
        assert_eq!(at("/many"), "_forEach runs a call at most 64 times, not 65");
    }

    #[test]
    fn an_instance_gets_its_item_keeping_json_types() {
        let args = json!({ "id": "†item.id", "all": "$item", "tags": ["†item.tags[1]", "x"], "text": "see †item" });
        let item = json!({ "id": 7, "tags": ["a", "b"] });
        assert_eq!(
            instance(&args, &item),
            Ok(json!({ "id": 7, "all": item, "tags": ["b", "x"], "text": "see †item" }))
        );
        let err = instance(&json!({ "x": "†item.nope" }), &item).unwrap_err();
        assert!(
            err.starts_with("item reference '†item.nope' points at nothing"),
            "{err}"
        );
        assert_eq!(instance_id("call_1", 2), "call_1#2");
    }
}
