//! The reference worker is the whole product: `wrangler deploy` builds its default
//! features, which are every capability helix-edge offers. This fails when helix-edge
//! gains a capability the reference does not turn on, or the default is not `full`.

#![cfg(not(target_arch = "wasm32"))] // Native: it reads files of the checkout.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

use serde_json::Value;
use std::collections::BTreeSet;

/// helix-edge's features that are not capabilities of a deployment: its default set,
/// what tests build with, the console it can embed (the reference serves the same files
/// as static assets) and the object stores its capabilities bring in.
const NOT_CAPABILITIES: &[&str] = &["default", "testing", "test-routes", "console", "objects"];

fn features(meta: &Value, package: &str) -> serde_json::Map<String, Value> {
    let found = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == package);
    found.unwrap()["features"].as_object().unwrap().clone()
}

/// Every feature `name` turns on, itself included, within `all`.
fn closure(all: &serde_json::Map<String, Value>, name: &str, out: &mut BTreeSet<String>) {
    if !out.insert(name.to_string()) {
        return;
    }
    // A dependency's feature (`helix-edge/x`) is recorded as it is.
    for needed in all
        .get(name)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        closure(all, needed.as_str().unwrap(), out);
    }
}

#[test]
fn the_reference_builds_every_capability_by_default() {
    let output = std::process::Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let meta: Value = serde_json::from_slice(&output.stdout).unwrap();
    let reference = features(&meta, "helix-edge-reference");
    assert_eq!(reference["default"], serde_json::json!(["full"]));
    let mut on = BTreeSet::new();
    closure(&reference, "default", &mut on);
    let library = features(&meta, "helix-edge");
    let missing: Vec<&String> = library
        .keys()
        .filter(|f| !NOT_CAPABILITIES.contains(&f.as_str()))
        .filter(|f| !on.contains(&format!("helix-edge/{f}")))
        .collect();
    assert!(
        missing.is_empty(),
        "capabilities the reference worker leaves out: {missing:?}"
    );
}
