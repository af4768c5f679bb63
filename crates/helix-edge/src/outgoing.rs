//! Outgoing requests for tools that call HTTP APIs ([`request`]). On every target, so
//! that a worker crate's tools build natively for its tests.

use worker::wasm_bindgen::JsValue;
use worker::worker_sys::web_sys;
use worker::{Headers, Result};

/// An outgoing request for `worker::Fetch`, for tools that call HTTP APIs: built with
/// `web_sys` directly, because `worker::RequestInit` also serializes Cloudflare's
/// per-request options, which costs a worker ~6 KiB of bundle.
///
/// ```ignore
/// let headers = worker::Headers::new();
/// headers.set("authorization", &format!("Bearer {key}"))?;
/// let request = helix_edge::request(&url, "POST", &headers, Some(body.into()))?;
/// let mut response = worker::Fetch::Request(request).send().await?;
/// ```
pub fn request(
    url: &str,
    method: &str,
    headers: &Headers,
    body: Option<JsValue>,
) -> Result<worker::Request> {
    let init = web_sys::RequestInit::new();
    init.set_method(method);
    init.set_headers(&headers.0);
    if let Some(body) = body {
        init.set_body(&body);
    }
    web_sys::Request::new_with_str_and_init(url, &init)
        .map(worker::Request::from)
        .map_err(worker::Error::from)
}
