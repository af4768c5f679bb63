//! The browser console (feature `console`): a page, its script and its style, embedded
//! in the worker and served at `/`, `/console.js` and `/console.css` to anyone — the
//! page holds no secret; everything it shows comes from the API with the user's token.
//! Its sources are in `console/` (the script is built from `console/src` and the
//! TypeScript client by `console/build.mjs`, and committed).
//!
//! The same directory is a Workers static assets directory (the reference worker serves
//! the console that way, at no cost to its bundle); its `_headers` file holds the
//! headers of both ways: the content security policy and the rest.

use worker::{Response, Result};

const PAGE: &str = include_str!("../console/index.html");
const SCRIPT: &str = include_str!("../console/console.js");
const STYLE: &str = include_str!("../console/console.css");
/// `Name: value` lines under `/*`, as Workers static assets read them.
const HEADERS: &str = include_str!("../console/_headers");

/// The console's answer for `path`, if it is one of its files.
pub fn serve(method: &str, path: &str) -> Option<Result<Response>> {
    let (body, content_type) = match path {
        "/" => (PAGE, "text/html; charset=utf-8"),
        "/console.js" => (SCRIPT, "text/javascript; charset=utf-8"),
        "/console.css" => (STYLE, "text/css; charset=utf-8"),
        _ => return None,
    };
    if !matches!(method, "GET" | "HEAD") {
        return None;
    }
    Some(respond(body, content_type))
}

/// The headers `_headers` sets: its indented `Name: value` lines (comments and the
/// `/*` pattern line skipped).
fn headers() -> impl Iterator<Item = (&'static str, &'static str)> {
    HEADERS
        .lines()
        .filter(|line| line.starts_with(' '))
        .filter_map(|line| line.trim().split_once(": "))
}

fn respond(body: &str, content_type: &str) -> Result<Response> {
    let mut resp = Response::ok(body)?;
    let out = resp.headers_mut();
    out.set("content-type", content_type)?;
    for (name, value) in headers() {
        out.set(name, value)?;
    }
    Ok(resp)
}
