//! A page's sign-in through the deployment's OpenID Connect provider (feature `users`,
//! with `OIDC_CLIENT_ID` set; [`crate::identity::oidc`]): `GET /v1/auth/oidc` tells the
//! page where to send the user, `POST /v1/auth/oidc/token` exchanges the code it gets
//! back (with its PKCE verifier) for the ID token it then uses as its bearer token. Both
//! come before authentication: the caller has no token yet. Without `OIDC_CLIENT_ID`
//! the first answers `{}` and the second 404. The provider's endpoints are read from its discovery document once
//! per isolate.

use crate::api::ApiError;
use crate::http::{RawRequest, internal, json_response, read_body};
use crate::identity::oidc::{Endpoints, Exchange, OidcConfig, id_token};
use crate::users::{config_values, unavailable};
use serde_json::json;
use std::cell::RefCell;
use worker::{Env, Headers, Response};

type Reply = std::result::Result<Response, ApiError>;

/// The largest answer read from the provider (bytes).
const MAX_ANSWER_BYTES: usize = 64 * 1024;

thread_local! {
    /// The provider's endpoints, once read (a failure is not kept: the next asks again).
    static ENDPOINTS: RefCell<Option<Endpoints>> = const { RefCell::new(None) };
}

/// The answer for `path`, if it is one of sign-in's.
pub(crate) async fn route(req: &RawRequest, path: &str, env: &Env) -> Option<Reply> {
    // Every request passes here: the path first, the request's method only for these.
    let get = match path {
        "/v1/auth/oidc" => "GET",
        "/v1/auth/oidc/token" => "POST",
        _ => return None,
    };
    if req.method() != get {
        return None;
    }
    Some(answer(req, path, env, get == "GET").await)
}

async fn answer(req: &RawRequest, path: &str, env: &Env, get: bool) -> Reply {
    let var = config_values(env, &OidcConfig::VARS);
    let config = OidcConfig::from_vars(&var).map_err(|why| {
        let public = "Sign-in is not available: the deployment's configuration is incomplete (its log says what to set).";
        unavailable("auth_not_configured", public, format!("sign-in is misconfigured: {why}"), false)
    })?;
    // No provider: the page offers none (and a code has nothing to be exchanged with).
    let Some(config) = config else {
        return match get {
            true => json_response(200, &json!({})),
            false => Err(ApiError::route_not_found(path)),
        };
    };
    let endpoints = endpoints(&config).await?;
    if get {
        return json_response(
            200,
            &json!({
                "issuer": config.issuer,
                "clientId": config.client_id,
                "authorizationEndpoint": endpoints.authorization,
                "scope": config.scope,
            }),
        );
    }
    let url = req.url();
    let origin = crate::api::origin(&url);
    let body = read_body(req).await?;
    let exchange = Exchange::parse(&body, origin).map_err(ApiError::validation)?;
    let headers = Headers::new();
    let set = |k: &str, v: &str| headers.set(k, v).map_err(|e| internal("headers", e));
    set("content-type", "application/x-www-form-urlencoded")?;
    set("accept", "application/json")?;
    let form = exchange.form(&config);
    let (status, answer) = fetch(&endpoints.token, "POST", &headers, Some(form)).await?;
    match id_token(&answer) {
        Ok(token) => json_response(200, &json!({ "token": token })),
        Err(why) => Err(ApiError::new(
            if (400..500).contains(&status) {
                401
            } else {
                503
            },
            if (400..500).contains(&status) {
                "unauthorized"
            } else {
                "auth_unavailable"
            },
            format!("The identity provider gave no token ({why})."),
            !(400..500).contains(&status),
        )),
    }
}

/// The provider's endpoints: kept, or read from its discovery document.
async fn endpoints(config: &OidcConfig) -> Result<Endpoints, ApiError> {
    if let Some(kept) = ENDPOINTS.with_borrow(Clone::clone) {
        return Ok(kept);
    }
    let (status, document) = fetch(&config.discovery_url(), "GET", &Headers::new(), None).await?;
    let read = match status {
        200 => Endpoints::read(config, &document),
        other => Err(format!("HTTP {other}")),
    };
    let endpoints = read.map_err(|why| {
        let detail = format!("the identity provider's discovery document cannot be used: {why}");
        unavailable(
            "auth_unavailable",
            "Sign-in is not available now; try again.",
            detail,
            true,
        )
    })?;
    ENDPOINTS.set(Some(endpoints.clone()));
    Ok(endpoints)
}

/// Status and body of a request to the provider (bounded); no answer is a retryable 503.
async fn fetch(
    url: &str,
    method: &str,
    headers: &Headers,
    body: Option<String>,
) -> Result<(u16, Vec<u8>), ApiError> {
    let public = "Sign-in is not available now; try again.";
    let failed = |e: worker::Error| {
        let detail = format!("the identity provider at {url} cannot be reached: {e}");
        unavailable("auth_unavailable", public, detail, true)
    };
    let request = crate::outgoing::unredirected(url, method, headers, body.map(Into::into))
        .map_err(failed)?;
    let mut response = worker::Fetch::Request(request)
        .send()
        .await
        .map_err(failed)?;
    let bytes = response.bytes().await.map_err(failed)?;
    if bytes.len() > MAX_ANSWER_BYTES {
        let detail = format!("the identity provider's answer from {url} is too large");
        return Err(unavailable("auth_unavailable", public, detail, true));
    }
    Ok((response.status_code(), bytes))
}
