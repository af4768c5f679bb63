//! A run's model options: `providerOptions` on the request that starts a run (a create, a
//! follow-up message, a chat turn), checked against the agent before anything changes,
//! stored with the run as given and applied over the agent's settings by every model
//! call of that run — across suspensions and restarts, as the run record carries them.
//!
//! The runtime asks for this through [`RunOptions`], which a build has with the feature
//! `provider-options` (`read`: [`ProviderOptions`], registered in [`RUN_OPTIONS`]);
//! without it a request that gives options is refused. [`pass_through`] (an agent's own
//! provider fields) is always there.

#[cfg(feature = "provider-options")]
mod read;

#[cfg(feature = "provider-options")]
pub use read::{MAX_OPTIONS_BYTES, ProviderOptions};

use crate::model::ModelSettings;
use serde_json::{Map, Value};
use std::borrow::Cow;

/// The field of a request body that gives a run's options.
const FIELD: &str = "providerOptions";

/// Why a build without a reader refuses options.
const NOT_TAKEN: &str =
    "This worker does not take providerOptions (helix-edge's `provider-options` feature).";

/// What the runtime asks of a build about runs' options.
pub trait RunOptions {
    /// Checks `given` (a request's `providerOptions`) for a run of `agent`, which has the
    /// tools `has_tool` says; the error says what is wrong, under `providerOptions`.
    fn check(
        &self,
        given: &Value,
        agent: &str,
        has_tool: &dyn Fn(&str) -> bool,
    ) -> Result<(), String>;
    /// `settings` with a run's stored options applied over them.
    fn apply(&self, given: &Value, settings: &ModelSettings) -> Result<ModelSettings, String>;
}

/// This build's reader of runs' options: [`ProviderOptions`] with the feature
/// `provider-options`.
pub const RUN_OPTIONS: &[&dyn RunOptions] = &[
    #[cfg(feature = "provider-options")]
    &read::Reader,
];

/// Checks `given` for a run of `agent`: with this build's reader, or refused without one.
pub fn check(given: &Value, agent: &str, has_tool: &dyn Fn(&str) -> bool) -> Result<(), String> {
    match RUN_OPTIONS.first() {
        Some(reader) => reader.check(given, agent, has_tool),
        None => Err(NOT_TAKEN.into()),
    }
}

/// A request body (JSON) without its `providerOptions`, and them if its top level gives
/// some (read by this build's reader; refused without one). So the bodies' own types do
/// not carry the field, and a build without the feature has no code for it but this. A
/// body that is not a JSON object is left to its parser.
pub fn take(body: &[u8]) -> Result<(Option<Value>, Cow<'_, [u8]>), String> {
    let kept = Ok((None, Cow::Borrowed(body)));
    let needle = FIELD.as_bytes();
    if !body.windows(needle.len()).any(|w| w == needle) {
        return kept;
    }
    let text = std::str::from_utf8(body).unwrap_or_default();
    let Ok(mut fields) = serde_json::from_str::<Map<String, Value>>(text) else {
        return kept;
    };
    let Some(options) = fields.remove(FIELD) else {
        return kept;
    };
    if RUN_OPTIONS.is_empty() {
        return Err(NOT_TAKEN.into());
    }
    if !options.is_object() {
        // Checked here: a `null` would otherwise read as no options on its way on.
        return Err("providerOptions must be an object.".into());
    }
    let rest = serde_json::to_vec(&fields).map_err(|e| e.to_string())?;
    Ok((Some(options), Cow::Owned(rest)))
}

/// `settings` with a run's stored options `given` applied, or `None` when nothing
/// applies: in a build without a reader (which cannot have stored options, so the call
/// compiles away), or for options that no longer read (they were checked when the run
/// started).
pub fn apply(given: &Value, settings: &ModelSettings) -> Option<ModelSettings> {
    RUN_OPTIONS.first()?.apply(given, settings).ok()
}

/// `fields` merged into the request `body` (an object), key by key.
pub fn pass_through(body: &mut Value, fields: &Option<Map<String, Value>>) {
    if let (Some(body), Some(fields)) = (body.as_object_mut(), fields) {
        body.extend(fields.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pass_through_fields_land_in_the_body_key_by_key() {
        let mut body = json!({"model": "m", "stream": true});
        pass_through(
            &mut body,
            &Some(Map::from_iter([("seed".to_string(), json!(3))])),
        );
        assert_eq!(body, json!({"model": "m", "stream": true, "seed": 3}));
        pass_through(&mut body, &None);
        assert_eq!(body["seed"], 3);
    }

    #[test]
    #[cfg(feature = "provider-options")]
    fn options_are_taken_from_the_top_of_a_body_and_nowhere_else() {
        // The options taken, and the JSON the body is left with.
        let rest = |body: &Value| {
            let text = body.to_string();
            let (options, rest) = take(text.as_bytes()).expect("taken");
            let rest: Value = serde_json::from_slice(&rest).expect("JSON");
            (options, rest)
        };
        let given = json!({"toolChoice": "none"});
        let body = json!({"agent": "a", "input": "hi", "providerOptions": given});
        assert_eq!(
            rest(&body),
            (Some(given), json!({"agent": "a", "input": "hi"}))
        );
        // Null is given, not absent: refused, as anything but an object.
        for wrong in [Value::Null, json!([]), json!("high")] {
            let body = json!({"message": "m", "providerOptions": wrong}).to_string();
            let refused = take(body.as_bytes()).expect_err("refused");
            assert_eq!(refused, "providerOptions must be an object.");
        }
        // The name inside a message is a message's text.
        let said =
            json!({"message": "what are providerOptions?", "metadata": {"providerOptions": 1}});
        assert_eq!(rest(&said), (None, said.clone()));
        // What is not a JSON object is its parser's to refuse, unchanged.
        for text in [
            "[\"providerOptions\"]",
            "{\"providerOptions\": ",
            "\"providerOptions\"",
        ] {
            let (options, rest) = take(text.as_bytes()).expect("left");
            assert_eq!((options, &*rest), (None, text.as_bytes()));
        }
    }
}
