//! Every worker here applies exactly the D1 migrations the library ships
//! (`crates/helix-edge/migrations`), from the library's own directory, as a generated
//! worker does.

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
fn every_worker_here_applies_the_librarys_own_migrations() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let library = root.join("crates/helix-edge/migrations");
    let shipped = migrations(&library);
    assert!(!shipped.is_empty());
    for dir in [".", "examples/minimal-worker", "templates/worker"] {
        let config = std::fs::read_to_string(root.join(dir).join("wrangler.toml")).unwrap();
        let line = config
            .lines()
            .find_map(|l| l.strip_prefix("migrations_dir = "))
            .unwrap_or_else(|| panic!("{dir}/wrangler.toml names its migrations_dir"));
        let named = line.split('"').nth(1).unwrap();
        if dir == "templates/worker" {
            // Filled in by scripts/new-worker.sh with the path to this checkout's.
            assert_eq!(named, "{{migrations}}");
            continue;
        }
        let resolved = root.join(dir).join(named).canonicalize().unwrap();
        assert_eq!(
            resolved,
            library.canonicalize().unwrap(),
            "{dir} applies the library's migrations"
        );
    }
}
