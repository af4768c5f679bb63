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

/// A unit enum whose JSON form is one fixed string per variant:
///
/// ```ignore
/// wire_enum! {
///     /// Docs and derives as on any enum (not `Serialize`/`Deserialize`).
///     #[derive(Debug, Clone, Copy, PartialEq, Eq)]
///     pub enum Role { System = "system", User = "user" }
/// }
/// ```
///
/// gives `as_str`, `Serialize` (the string) and `Deserialize` (one of the strings,
/// refused with serde's "unknown variant" message otherwise). serde's derive also reads
/// the map form `{"system": null}` and variant numbers, which no helix-edge wire form
/// uses, for ~1 KB of wasm per enum; these share one string visitor.
macro_rules! wire_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $($(#[$vmeta:meta])* $variant:ident = $wire:literal),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis enum $name {
            $($(#[$vmeta])* $variant),+
        }

        impl $name {
            const WIRE: &'static [&'static str] = &[$($wire),+];
            const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The JSON form.
            #[allow(dead_code, reason = "not every wire enum is written by name")]
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $wire),+
                }
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let index = d.deserialize_str($crate::wire::WireName(Self::WIRE))?;
                Self::ALL
                    .get(index)
                    .copied()
                    .ok_or_else(|| serde::de::Error::custom("unknown variant"))
            }
        }
    };
}
pub(crate) use wire_enum;

/// Reads a string that must be one of a `wire_enum!`'s names; yields its index.
pub(crate) struct WireName(pub &'static [&'static str]);

impl<'de> serde::de::Visitor<'de> for WireName {
    type Value = usize;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<usize, E> {
        self.0
            .iter()
            .position(|name| *name == v)
            .ok_or_else(|| E::unknown_variant(v, self.0))
    }
}
