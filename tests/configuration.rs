//! The book's configuration reference is written from the tables in the code
//! (`helix_edge::settings::SETTINGS`, the reference worker's
//! `reference_agents::settings::SETTINGS`): this fails when the page and the tables
//! differ, and when code reads a var, secret or binding that no table lists.
//! `HELIX_EDGE_WRITE_DOCS=1 cargo test --test configuration` writes the page's tables.

#![cfg(not(target_arch = "wasm32"))] // Native: it reads files of the checkout.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

use helix_edge::settings::{SETTINGS, reference};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const PAGE: &str = "docs/src/configuration.md";

/// Names the code reads that are not a deployment's to set: the test flavour's (its
/// fault injection and the mock ledger) and the build's own.
const NOT_SETTINGS: &[&str] = &[
    "TEST_D1_FAULT",
    "LEDGER_URL",
    "HELIX_EDGE_WRITE_MIGRATIONS",
    "CARGO_MANIFEST_DIR",
    "CARGO_PKG_VERSION",
    "OUT_DIR",
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `text` with what lies between `<!-- {marker} -->` and `<!-- /{marker} -->` replaced.
fn between(text: &str, marker: &str, with: Option<&str>) -> (String, String) {
    let (open, close) = (
        format!("<!-- {marker} -->\n"),
        format!("<!-- /{marker} -->"),
    );
    let start = text
        .find(&open)
        .unwrap_or_else(|| panic!("{PAGE} has {open}"))
        + open.len();
    let end = start
        + text[start..]
            .find(&close)
            .unwrap_or_else(|| panic!("{PAGE} has {close}"));
    let written = format!(
        "{}{}{}",
        &text[..start],
        with.unwrap_or(&text[start..end]),
        &text[end..]
    );
    (text[start..end].to_string(), written)
}

#[test]
fn the_page_lists_exactly_the_tables() {
    let path = root().join(PAGE);
    let page = std::fs::read_to_string(&path).unwrap();
    let library = reference(SETTINGS);
    let worker = reference(reference_agents::settings::SETTINGS);
    if std::env::var_os("HELIX_EDGE_WRITE_DOCS").is_some() {
        let (_, page) = between(&page, "settings", Some(&library));
        let (_, page) = between(&page, "reference-settings", Some(&worker));
        std::fs::write(&path, page).unwrap();
        return;
    }
    let fix = "HELIX_EDGE_WRITE_DOCS=1 cargo test --test configuration writes it";
    assert_eq!(between(&page, "settings", None).0, library, "{PAGE}: {fix}");
    assert_eq!(
        between(&page, "reference-settings", None).0,
        worker,
        "{PAGE}: {fix}"
    );
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .flat_map(|e| {
            let path = e.path();
            match path.is_dir() {
                true => sources(&path),
                false if path.extension().is_some_and(|x| x == "rs") => vec![path],
                false => Vec::new(),
            }
        })
        .collect()
}

/// The upper-case names in string literals of `text` (`"LLM_MODEL"`, `"DB"`) on lines
/// that read a setting.
fn names_read(text: &str) -> BTreeSet<String> {
    const READERS: &[&str] = &[
        "var(",
        "secret(",
        "config_value",
        "number(",
        ".d1(",
        ".bucket(",
        ".kv(",
        "durable_object(",
        "binding",
        "vars(",
        "needs",
        "get(\"",
    ];
    let mut names = BTreeSet::new();
    for line in text.lines() {
        let code = line.trim_start();
        if code.starts_with("//") || !READERS.iter().any(|r| line.contains(r)) {
            continue;
        }
        for literal in line.split('"').skip(1).step_by(2) {
            let name = !literal.is_empty()
                && literal.starts_with(|c: char| c.is_ascii_uppercase())
                && literal
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
            if name && literal.len() > 1 {
                names.insert(literal.to_string());
            }
        }
    }
    names
}

#[test]
fn every_setting_the_code_reads_is_in_a_table() {
    let listed: BTreeSet<&str> = SETTINGS
        .iter()
        .chain(reference_agents::settings::SETTINGS)
        .map(|s| s.name)
        .chain(NOT_SETTINGS.iter().copied())
        .collect();
    let mut unlisted = Vec::new();
    let dirs = [
        "src",
        "crates/helix-edge/src",
        "crates/helix-edge-core/src",
        "crates/reference-agents/src",
    ];
    for file in dirs.iter().flat_map(|d| sources(&root().join(d))) {
        let text = std::fs::read_to_string(&file).unwrap();
        // A module's own tests name made-up settings.
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for name in names_read(code) {
            if !listed.contains(name.as_str()) {
                unlisted.push(format!(
                    "{name} ({})",
                    file.strip_prefix(root()).unwrap().display()
                ));
            }
        }
    }
    assert!(
        unlisted.is_empty(),
        "read but in no settings table: {unlisted:?}"
    );
    assert!(
        names_read(r#"let t = config_value(env, "SOME_VAR");"#).contains("SOME_VAR"),
        "the scan finds a read"
    );
}
