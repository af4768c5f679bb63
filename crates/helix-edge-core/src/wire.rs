//! Reading the tagged JSON forms (`Message`, `PatchOp`, `Answer`, the tool-results body)
//! through one flat record per type. serde's derive for an internally tagged enum buffers
//! every object into a generic intermediate tree before it knows the variant; in wasm
//! that buffering code and its per-type instances were 43 KB of the bundle's code. A flat
//! record reads the fields in one pass, and a `TryFrom` picks the variant and says
//! which field is missing or does not belong.
//!
//! A flat record checks the type of every field it knows, whichever variant the tag
//! picks: a stored message or answer with a field of another variant's name and the
//! wrong type is refused (helix-edge never writes one), where the derive ignored it.

use serde::{Deserialize, Deserializer};

/// A field that is `Some` whenever the JSON has it, `null` included (`null` is
/// `Some(Value::Null)`, or `Some(None)` for an `Option`): only a missing field is `None`.
/// Use with `#[serde(default, deserialize_with = "present")]`.
pub(crate) fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

/// `field`, or the error serde gives for a missing one.
pub(crate) fn required<T>(field: Option<T>, name: &str) -> Result<T, String> {
    field.ok_or_else(|| format!("missing field `{name}`"))
}

/// An error unless `field` is absent: it does not belong to the variant `tag`.
pub(crate) fn absent<T>(field: &Option<T>, name: &str, tag: &str) -> Result<(), String> {
    match field {
        Some(_) => Err(format!("unknown field `{name}` for `{tag}`")),
        None => Ok(()),
    }
}
