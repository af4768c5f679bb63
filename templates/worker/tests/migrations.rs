//! The worker applies helix-edge's D1 migrations from its own `migrations/` (wrangler.toml's
//! `migrations_dir`): this fails when that copy and the library's differ, as after an
//! upgrade of helix-edge. `HELIX_EDGE_WRITE_MIGRATIONS=1 cargo test migrations` writes
//! them; then apply them with `npx wrangler d1 migrations apply DB` (`--local` or `--remote`).

#![cfg(not(target_arch = "wasm32"))] // Native: it reads files of the checkout.

#[test]
fn migrations_are_the_librarys() {
    helix_edge::migrations::sync(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations"));
}
