//! The reference worker applies exactly the D1 migrations the library ships
//! (`crates/helix-edge/migrations`), as a user's worker copies them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

use std::collections::BTreeMap;
use std::path::Path;

/// The `.sql` files of `dir`, by name.
fn migrations(dir: &Path) -> BTreeMap<String, String> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "sql"))
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&path).unwrap())
        })
        .collect()
}

#[test]
fn the_reference_workers_migrations_are_the_librarys() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let shipped = migrations(&root.join("crates/helix-edge/migrations"));
    assert!(!shipped.is_empty());
    for dir in ["migrations", "examples/minimal-worker/migrations"] {
        let copy = migrations(&root.join(dir));
        assert_eq!(
            copy.keys().collect::<Vec<_>>(),
            shipped.keys().collect::<Vec<_>>(),
            "{dir} has the library's migrations"
        );
        for (name, sql) in &shipped {
            assert_eq!(&copy[name], sql, "{dir}/{name} is the library's");
        }
    }
}
