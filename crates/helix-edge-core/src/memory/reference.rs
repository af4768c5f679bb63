//! State references: an argument value that names a place in the session's state, so
//! the model can pass what an earlier call stored without copying it through its own
//! context. The reference is resolved just before the call runs and replaced by the
//! value it names, keeping that value's JSON type.
//!
//! A reference is a whole string argument value (anywhere in the arguments, nested in
//! objects and arrays), in one of two spellings:
//! - `"†state.currentUser.id"` (the design's form, U+2020 DAGGER);
//! - `"$state.currentUser.id"` (the plain-ASCII form).
//!
//! After `state` come object keys (`.key`) and array indexes (`.0` or `[0]`); `†state`
//! alone is the whole state. A string that merely contains a reference is left as it
//! is: references are never interpolated into text.
//!
//! ```
//! use helix_edge_core::memory::reference::{parse, resolve};
//! use serde_json::json;
//! assert_eq!(parse("†state.orders[0].id"), Some(Ok("/orders/0/id".to_string())));
//! let state = json!({ "user": { "id": 42 } });
//! let args = resolve(&json!({ "userId": "$state.user.id" }), &state).unwrap();
//! assert_eq!(args, json!({ "userId": 42 }));
//! ```

use crate::state::pointer_segment;
use serde_json::Value;

/// The design's prefix.
pub const DAGGER: &str = "†state";
/// The plain-ASCII prefix.
pub const ASCII: &str = "$state";

/// An instance's item (see [`super::each`]), in the design's and the ASCII spelling.
pub const ITEM: [&str; 2] = ["†item", "$item"];

/// The JSON Pointer a string names, if it is a reference: `None` for ordinary text,
/// `Some(Err(reason))` for a reference that is malformed.
pub fn parse(text: &str) -> Option<Result<String, String>> {
    parse_at(text, [DAGGER, ASCII], "state")
}

/// The JSON Pointer into an instance's item a string names, if it is an item
/// reference (`"†item"`, `"†item.id"`, `"$item[0]"`).
pub fn parse_item(text: &str) -> Option<Result<String, String>> {
    parse_at(text, ITEM, "item")
}

fn parse_at(text: &str, [dagger, ascii]: [&str; 2], what: &str) -> Option<Result<String, String>> {
    let rest = text
        .strip_prefix(dagger)
        .or_else(|| text.strip_prefix(ascii))?;
    if !(rest.is_empty() || rest.starts_with('.') || rest.starts_with('[')) {
        return None; // "$statement" is text
    }
    Some(
        pointer_of(rest).map_err(|reason| format!("malformed {what} reference '{text}': {reason}")),
    )
}

/// `.a.b[0]` as `/a/b/0`.
fn pointer_of(mut rest: &str) -> Result<String, String> {
    let mut pointer = String::new();
    while !rest.is_empty() {
        let segment;
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            segment = &after[..end];
            rest = &after[end..];
            if segment.is_empty() {
                return Err("an empty key".into());
            }
        } else if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']').ok_or("a '[' without its ']'")?;
            segment = &after[..end];
            rest = &after[end + 1..];
            if segment.is_empty() || !segment.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!("'[{segment}]' is not an array index"));
            }
        } else {
            return Err(format!("expected '.' or '[' before '{rest}'"));
        }
        pointer.push('/');
        pointer.push_str(&pointer_segment(segment));
    }
    Ok(pointer)
}

/// Every reference in `args`, in document order: the pointer, or why it is malformed.
pub fn references(args: &Value) -> Vec<Result<String, String>> {
    let mut found = Vec::new();
    visit(args, &mut |text| {
        if let Some(parsed) = parse(text) {
            found.push(parsed);
        }
    });
    found
}

fn visit(value: &Value, f: &mut impl FnMut(&str)) {
    match value {
        Value::String(text) => f(text),
        Value::Array(items) => items.iter().for_each(|v| visit(v, f)),
        Value::Object(members) => members.values().for_each(|v| visit(v, f)),
        _ => {}
    }
}

/// `args` with every reference replaced by the value it names in `state`. A reference
/// to nothing, or a malformed one, is an error naming it (the call must not run).
pub fn resolve(args: &Value, state: &Value) -> Result<Value, String> {
    let mut args = args.clone();
    resolve_in(&mut args, state)?;
    Ok(args)
}

/// [`resolve`] in place (`value` is left half resolved on an error).
pub fn resolve_in(value: &mut Value, state: &Value) -> Result<(), String> {
    match value {
        Value::String(text) => match parse(text) {
            None => Ok(()),
            Some(Err(reason)) => Err(reason),
            Some(Ok(pointer)) => {
                let Some(found) = state.pointer(&pointer) else {
                    let at = if pointer.is_empty() { "/" } else { &pointer };
                    return Err(format!(
                        "state reference '{text}' points at nothing (no value at {at})"
                    ));
                };
                *value = found.clone();
                Ok(())
            }
        },
        Value::Array(items) => items.iter_mut().try_for_each(|v| resolve_in(v, state)),
        Value::Object(members) => members.values_mut().try_for_each(|v| resolve_in(v, state)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn both_spellings_name_the_same_place() {
        for text in ["†state.user.id", "$state.user.id", "$state[\"x\"]"] {
            assert!(parse(text).is_some(), "{text}");
        }
        assert_eq!(parse("†state.user.id"), Some(Ok("/user/id".into())));
        assert_eq!(parse("$state.user.id"), Some(Ok("/user/id".into())));
        assert_eq!(parse("$state"), Some(Ok(String::new())));
        assert_eq!(parse("$state.items.2"), Some(Ok("/items/2".into())));
        assert_eq!(parse("$state.a[10].b"), Some(Ok("/a/10/b".into())));
        // Keys are escaped as JSON Pointer segments.
        assert_eq!(parse("$state.a/b.c~d"), Some(Ok("/a~1b/c~0d".into())));
    }

    #[test]
    fn text_is_not_a_reference() {
        for text in [
            "$statement",
            "state.user",
            "see †state.user",
            " $state.user",
            "",
        ] {
            assert_eq!(parse(text), None, "{text}");
        }
    }

    #[test]
    fn malformed_references_say_why() {
        for text in [
            "$state.",
            "$state..a",
            "$state[",
            "$state[x]",
            "$state[]",
            "$state.a[1",
        ] {
            let parsed = parse(text);
            assert!(matches!(parsed, Some(Err(_))), "{text}: {parsed:?}");
        }
        let Some(Err(reason)) = parse("$state[-1]") else {
            panic!("a negative index is malformed");
        };
        assert!(reason.contains("'[-1]' is not an array index"), "{reason}");
    }

    #[test]
    fn resolution_keeps_json_types_and_walks_nested_arguments() {
        let state = json!({
            "user": { "id": 42, "name": "Ada", "admin": false, "tags": ["a", "b"] },
            "orders": [{ "id": "o1", "total": 9.5 }],
            "none": null,
        });
        let args = json!({
            "id": "†state.user.id",
            "name": "$state.user.name",
            "admin": "$state.user.admin",
            "tags": "$state.user.tags",
            "nested": { "order": "$state.orders[0]", "list": ["$state.orders.0.total", 1, "plain"] },
            "nothing": "$state.none",
            "text": "the id is $state.user.id",
        });
        let resolved = resolve(&args, &state).unwrap();
        assert_eq!(
            resolved,
            json!({
                "id": 42,
                "name": "Ada",
                "admin": false,
                "tags": ["a", "b"],
                "nested": { "order": { "id": "o1", "total": 9.5 }, "list": [9.5, 1, "plain"] },
                "nothing": null,
                "text": "the id is $state.user.id",
            })
        );
        assert_eq!(
            resolve(&json!({ "all": "$state" }), &state).unwrap()["all"],
            state
        );
    }

    #[test]
    fn a_reference_to_nothing_is_an_error_naming_it() {
        let state = json!({ "user": { "id": 1 }, "items": [] });
        for (text, at) in [
            ("$state.user.email", "/user/email"),
            ("†state.items[0]", "/items/0"),
            ("$state.user.id.x", "/user/id/x"),
            ("$state.missing", "/missing"),
        ] {
            let err = resolve(&json!({ "deep": [{ "x": text }] }), &state).unwrap_err();
            assert_eq!(
                err,
                format!("state reference '{text}' points at nothing (no value at {at})")
            );
        }
        let err = resolve(&json!(["$state.."]), &state).unwrap_err();
        assert!(
            err.starts_with("malformed state reference '$state..'"),
            "{err}"
        );
    }

    #[test]
    fn references_are_listed_in_document_order() {
        let args = json!({ "a": ["$state.x", { "b": "†state.y[1]" }], "c": "$state..", "d": 3 });
        assert_eq!(
            references(&args),
            vec![
                Ok("/x".to_string()),
                Ok("/y/1".to_string()),
                Err("malformed state reference '$state..': an empty key".to_string()),
            ]
        );
    }
}
