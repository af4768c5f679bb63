//! The worker's global allocator (feature `talc`): [talc](https://docs.rs/talc) in
//! place of Rust's default for wasm (dlmalloc) — smaller code and cheaper allocation,
//! growing the isolate's memory as it needs. A worker crate that sets its own
//! `#[global_allocator]` builds helix-edge without the feature.

#[global_allocator]
static TALC: talc::wasm::WasmDynamicTalc = talc::wasm::new_wasm_dynamic_allocator();
