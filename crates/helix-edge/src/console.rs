//! The browser console (feature `console`): a page, its script and its style, embedded
//! in the worker and served at `/`, `/console.js` and `/console.css` to anyone — the
//! page holds no secret; everything it shows comes from the API with the user's token.
//! Its sources are in `console/` (the script is built from `console/src` and the
//! TypeScript client by `console/build.mjs`, and committed).

use worker::{Response, Result};

const PAGE: &str = include_str!("../console/index.html");
const SCRIPT: &str = include_str!("../console/console.js");
const STYLE: &str = include_str!("../console/console.css");

/// The page only talks to its own origin, runs only its own script, and is never framed.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

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

fn respond(body: &str, content_type: &str) -> Result<Response> {
    let mut resp = Response::ok(body)?;
    let headers = resp.headers_mut();
    headers.set("content-type", content_type)?;
    headers.set("content-security-policy", CSP)?;
    headers.set("x-content-type-options", "nosniff")?;
    headers.set("referrer-policy", "no-referrer")?;
    // Revalidated on every load, so a deploy is seen at once.
    headers.set("cache-control", "no-cache")?;
    Ok(resp)
}
