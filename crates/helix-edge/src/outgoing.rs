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
    build(url, method, headers, body, web_sys::RequestRedirect::Follow)
}

/// The framework's own requests (to a session's object, a model, an MCP server and its
/// authorization server, a remote deployment, an OTLP receiver): a redirect is answered,
/// never followed, so the credentials they carry reach only the URL they were configured
/// for (and an object's redirect reaches the client).
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
pub(crate) fn unredirected(
    url: &str,
    method: &str,
    headers: &Headers,
    body: Option<JsValue>,
) -> Result<worker::Request> {
    build(url, method, headers, body, web_sys::RequestRedirect::Manual)
}

fn build(
    url: &str,
    method: &str,
    headers: &Headers,
    body: Option<JsValue>,
    redirect: web_sys::RequestRedirect,
) -> Result<worker::Request> {
    let init = web_sys::RequestInit::new();
    init.set_redirect(redirect);
    init.set_method(method);
    init.set_headers(&headers.0);
    if let Some(body) = body {
        init.set_body(&body);
    }
    web_sys::Request::new_with_str_and_init(url, &init)
        .map(worker::Request::from)
        .map_err(worker::Error::from)
}
