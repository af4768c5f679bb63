//! Every worker here applies helix-edge's D1 migrations from its own `migrations/`
//! (wrangler.toml's `migrations_dir`), a copy of the library's (`crates/helix-edge/migrations`,
//! embedded as `helix_edge::migrations::FILES`): this fails when a copy differs.
//! `HELIX_EDGE_WRITE_MIGRATIONS=1 cargo test migrations` writes the reference worker's.

#![cfg(not(target_arch = "wasm32"))] // Native: it reads files of the checkout.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

use std::path::Path;

#[test]
fn migrations_are_the_librarys() {
    helix_edge::migrations::sync(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations"));
}

#[test]
fn every_worker_here_applies_its_own_copy() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for dir in [".", "examples/minimal-worker", "templates/worker"] {
        let config = std::fs::read_to_string(root.join(dir).join("wrangler.toml")).unwrap();
        let line = config
            .lines()
            .find_map(|l| l.strip_prefix("migrations_dir = "))
            .unwrap_or_else(|| panic!("{dir}/wrangler.toml names its migrations_dir"));
        assert_eq!(line, "\"migrations\"", "{dir} applies its own migrations/");
        let test = std::fs::read_to_string(root.join(dir).join("tests/migrations.rs"));
        let test = test.unwrap_or_else(|e| panic!("{dir}/tests/migrations.rs: {e}"));
        assert!(
            test.contains("helix_edge::migrations::sync("),
            "{dir} checks its copy"
        );
    }
    // The example's copy, checked here too (its own test runs in its own workspace).
    helix_edge::migrations::sync(root.join("examples/minimal-worker/migrations"));
}

#[test]
fn the_embedded_files_are_the_crates_migrations_in_order() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/helix-edge/migrations");
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".sql"))
        .collect();
    on_disk.sort();
    let embedded: Vec<&str> = helix_edge::migrations::FILES
        .iter()
        .map(|(n, _)| *n)
        .collect();
    assert_eq!(on_disk, embedded);
    assert_eq!(embedded, helix_edge::migrations::MIGRATIONS);
    for (name, sql) in helix_edge::migrations::FILES {
        assert_eq!(
            std::fs::read_to_string(dir.join(name)).unwrap(),
            *sql,
            "{name}"
        );
    }
}
