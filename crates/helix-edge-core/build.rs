//! Embeds the OpenAPI document minified: `api/openapi.json` without the whitespace
//! between its tokens (strings are copied as they are). What a cargo feature of this
//! crate serves is marked `"x-feature": "<name>"` (a path, a schema, a link); a build
//! without that feature leaves it out, so a worker documents only the routes it serves.

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

/// Drops, at every depth, each member whose value is marked with a feature that is off;
/// whether it dropped anything.
fn drop_disabled(value: &mut Value) -> bool {
    let mut dropped = false;
    match value {
        Value::Object(members) => {
            let before = members.len();
            members.retain(|_, v| {
                let feature = v.get("x-feature").and_then(Value::as_str);
                feature.is_none_or(enabled)
            });
            dropped |= members.len() != before;
            for v in members.values_mut() {
                dropped |= drop_disabled(v);
            }
        }
        Value::Array(items) => {
            for v in items {
                dropped |= drop_disabled(v);
            }
        }
        _ => {}
    }
    dropped
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let source = "api/openapi.json";
    println!("cargo::rerun-if-changed={source}");
    let json = fs::read_to_string(source)?;
    let mut doc: Value = serde_json::from_str(&json)?;
    let out = Path::new(&env::var("OUT_DIR")?).join("openapi.min.json");
    let text = match drop_disabled(&mut doc) {
        true => serde_json::to_string(&doc)?,
        false => minify(&json),
    };
    fs::write(out, text)?;
    Ok(())
}
