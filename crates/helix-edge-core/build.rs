//! Embeds the OpenAPI document minified: `api/openapi.json` without the whitespace
//! between its tokens (strings are copied as they are). What a cargo feature of this
//! crate serves is marked `"x-feature": "<name>"` (a path, a schema, a link, an item of
//! a `oneOf`); a build without that feature leaves it out (and the discriminator
//! mappings' entries of what it left out), so a worker documents only what it serves.

use serde_json::Value;
use std::{env, fs, path::Path};

fn minify(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in json.chars() {
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
        } else if !c.is_whitespace() {
            in_string = c == '"';
            out.push(c);
        }
    }
    out
}

/// Whether cargo feature `name` of this crate is on.
fn enabled(name: &str) -> bool {
    let var = format!("CARGO_FEATURE_{}", name.to_uppercase().replace('-', "_"));
    env::var_os(var).is_some()
}

/// Whether `value` is marked with a feature that is off.
fn disabled(value: &Value) -> bool {
    let feature = value.get("x-feature").and_then(Value::as_str);
    feature.is_some_and(|name| !enabled(name))
}

/// Drops, at every depth, each member and item whose value is marked with a feature that
/// is off; whether it dropped anything.
fn drop_disabled(value: &mut Value) -> bool {
    let mut dropped = false;
    match value {
        Value::Object(members) => {
            let before = members.len();
            members.retain(|_, v| !disabled(v));
            dropped |= members.len() != before;
            for v in members.values_mut() {
                dropped |= drop_disabled(v);
            }
        }
        Value::Array(items) => {
            let before = items.len();
            items.retain(|v| !disabled(v));
            dropped |= items.len() != before;
            for v in items {
                dropped |= drop_disabled(v);
            }
        }
        _ => {}
    }
    dropped
}

/// Drops the discriminator mappings' entries (`"type": "#/components/schemas/…"`) whose
/// schema was dropped.
fn drop_dangling_mappings(doc: &mut Value) {
    let Some(schemas) = doc.pointer("/components/schemas").cloned() else {
        return;
    };
    let exists = |target: &str| {
        let name = target.trim_start_matches("#/components/schemas/");
        schemas.get(name).is_some()
    };
    if let Some(Value::Object(all)) = doc.pointer_mut("/components/schemas") {
        for schema in all.values_mut() {
            if let Some(Value::Object(mapping)) = schema.pointer_mut("/discriminator/mapping") {
                mapping.retain(|_, target| target.as_str().is_some_and(exists));
            }
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let source = "api/openapi.json";
    println!("cargo::rerun-if-changed={source}");
    let json = fs::read_to_string(source)?;
    let mut doc: Value = serde_json::from_str(&json)?;
    let out = Path::new(&env::var("OUT_DIR")?).join("openapi.min.json");
    let text = match drop_disabled(&mut doc) {
        true => {
            drop_dangling_mappings(&mut doc);
            serde_json::to_string(&doc)?
        }
        false => minify(&json),
    };
    fs::write(out, text)?;
    Ok(())
}
