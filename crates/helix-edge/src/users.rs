//! Users of the deployment's identity provider on the routes (feature `users`; SPEC
//! §2c). With `JWT_ISSUER` configured, a bearer credential shaped as a JWT is checked
//! ([`crate::identity`]) and the request becomes that user's: they own the sessions they
//! create and reach only those (or their tenant's, where `JWT_TENANT_CLAIM` names one).
//! The worker tells a session's object who asks in a header only it sets (it never
//! forwards a client's headers); the object's door then answers 404
//! `session_not_found` for a session the user does not reach, as for one that does not
//! exist.

use crate::api::ApiError;
use crate::auth::{AuthConfig, Caller, Principal};
use crate::host::Level;
use crate::identity::{self, JwtConfig, KeyCache, looks_like_jwt};
use crate::identity_keys::WebCryptoKeys;
use crate::store::Owner;
use crate::worker_host::{config_value, log};
use serde_json::json;
use std::cell::RefCell;
use std::rc::Rc;
use worker::{Env, Request};

thread_local! {
    /// This isolate's configuration, read on first use.
    static CONFIG: RefCell<Option<Result<Option<Rc<JwtConfig>>, String>>> =
        const { RefCell::new(None) };
    /// The provider's key set, as fetched last (checks borrow it only between awaits).
    static KEYS: Rc<RefCell<KeyCache>> = Rc::new(RefCell::new(KeyCache::default()));
}

/// The identity provider's settings `names` (vars or secrets, each read once, as
/// [`config_value`]), as the lookup a configuration's `from_vars` takes; a name not
/// among them reads as unset. For the users' tokens and a page's sign-in (`oidc`).
pub(crate) fn config_values(env: &Env, names: &[&str]) -> impl Fn(&str) -> Option<String> {
    let read: Vec<(String, Option<String>)> = names
        .iter()
        .map(|n| (n.to_string(), config_value(env, n)))
        .collect();
    move |name| {
        let found = read.iter().find(|(n, _)| n == name);
        found.and_then(|(_, v)| v.clone())
    }
}

fn config(env: &Env) -> Result<Option<Rc<JwtConfig>>, String> {
    if let Some(read) = CONFIG.with_borrow(Clone::clone) {
        return read;
    }
    let get = config_values(env, JwtConfig::VARS);
    let read = JwtConfig::from_vars(&get).map(|c| c.map(Rc::new));
    CONFIG.set(Some(read.clone()));
    read
}

/// The user `credential` names, when the deployment checks users' tokens and it is one
/// (not the API token): `None` otherwise, for the API token and session tokens to be
/// checked as always. A token that fails its checks is 401; keys that cannot be had,
/// or a configuration that is wrong, 503.
pub(crate) async fn caller(
    env: &Env,
    auth: &AuthConfig,
    credential: &str,
    now_secs: u64,
) -> Option<Result<Caller, ApiError>> {
    // The API token stays the API token, whatever it looks like (compared in constant time).
    let admin = crate::auth::authorize(auth, Some(credential), None, now_secs);
    if !looks_like_jwt(credential) || admin == Ok(Principal::Admin) {
        return None;
    }
    let config = match config(env) {
        Ok(Some(config)) => config,
        Ok(None) => return None,
        Err(why) => {
            let detail = format!("users' tokens are misconfigured: {why}");
            let public = "Users' tokens cannot be checked: the deployment's configuration is incomplete (its log says what to set).";
            return Some(Err(unavailable(
                "auth_not_configured",
                public,
                detail,
                false,
            )));
        }
    };
    let cache = KEYS.with(Rc::clone);
    let checked = identity::verify(&config, credential, now_secs, &cache, &WebCryptoKeys).await;
    Some(match checked {
        Ok(user) => Ok(Caller {
            user: Owner {
                subject: user.subject,
                tenant: user.tenant,
            },
            tenant_wide: config.tenant_claim.is_some() && config.tenant_sharing,
            roles: user.roles,
        }),
        Err(e) if e.code() == "unauthorized" => Err(ApiError::new(
            401,
            e.code(),
            format!("The bearer token is refused: {e}."),
            false,
        )),
        // The keys' URL and the fetch's error are the log's, not the caller's.
        Err(e) => Err(unavailable(
            e.code(),
            "Users' tokens cannot be checked now; try again.",
            e,
            true,
        )),
    })
}

/// The user a session's object is asked by, as the worker told it.
pub(crate) fn asking(req: &Request) -> Result<Option<Caller>, ApiError> {
    let header = req.headers().get(crate::http::USER_HEADER).ok().flatten();
    header
        .map(|h| serde_json::from_str(&h))
        .transpose()
        .map_err(|e| crate::http::internal("user header", e))
}

/// A 503 for a caller who may not be signed in yet: `code` and the safe sentence
/// `public`, while what went wrong (a misconfiguration, a URL, a fetch error) goes to
/// the log only.
pub fn unavailable(
    code: &'static str,
    public: &str,
    detail: impl std::fmt::Display,
    retryable: bool,
) -> ApiError {
    log(
        Level::Error,
        "auth_error",
        json!({ "code": code, "error": detail.to_string() }),
    );
    ApiError::new(503, code, public, retryable)
}
