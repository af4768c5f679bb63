//! The provider recordings (`tests/fixtures`, see its README and LICENSE) as
//! the bytes a provider sends: SSE framing restored, `[DONE]` added where recordings
//! omit it.

use helix_edge_core::provider::ProviderConfig;
use serde_json::Value;
use std::path::PathBuf;

/// The provider recordings live in this crate's `tests/fixtures`; `HELIX_FIXTURES_DIR`
/// points elsewhere.
pub fn fixture(path: &str) -> Vec<u8> {
    let dir = std::env::var_os("HELIX_FIXTURES_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures"));
    std::fs::read(dir.join(path)).unwrap_or_else(|e| {
        panic!(
            "fixture {} is missing ({e}): set HELIX_FIXTURES_DIR to a copy of the recordings",
            dir.join(path).display()
        )
    })
}

pub fn lines(bytes: &[u8]) -> Vec<String> {
    String::from_utf8(bytes.to_vec())
        .unwrap()
        .split('\n')
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

/// `data: <line>` per line, then `[DONE]` (the recordings omit it).
pub fn openai_sse(path: &str) -> Vec<u8> {
    let mut out: String = lines(&fixture(path))
        .iter()
        .map(|l| format!("data: {l}\n\n"))
        .collect();
    out.push_str("data: [DONE]\n\n");
    out.into_bytes()
}

/// `event: <type>` + `data: <line>` per line.
pub fn anthropic_sse(path: &str) -> Vec<u8> {
    lines(&fixture(path))
        .iter()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            format!("event: {}\ndata: {l}\n\n", v["type"].as_str().unwrap())
        })
        .collect::<String>()
        .into_bytes()
}

pub fn config(kind: &str) -> ProviderConfig {
    let vars = [
        ("LLM_PROVIDER", kind),
        ("LLM_BASE_URL", "http://127.0.0.1:1/v1"),
        ("LLM_API_KEY", "sk-test"),
    ];
    let mut c = ProviderConfig::from_vars(|k| {
        vars.iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    })
    .unwrap();
    c.max_retries = 0;
    c
}
