//! Users from the deployment's own identity provider (feature `users`):
//! `Authorization: Bearer <JWT>` checked against the provider's public keys (a JWKS, for
//! RS256, ES256 and EdDSA) or a shared secret (HS256), then its claims — issuer,
//! audience, expiry and not-before with a bounded leeway. The algorithms are the
//! configuration's, never the token's alone: `none` is never one, a secret never checks
//! an asymmetric token and a public key never an HS256 one. The user is the `sub` claim,
//! with a tenant and roles from claims the deployment names.
//!
//! - `jws`: the compact form split and decoded, nothing trusted yet.
//! - `keys`: the provider's keys as the isolate keeps them, and when to fetch them again.
//! - `claims`: who the token names, for whom and when.
//! - [`oidc`]: a page's sign-in through the provider (authorization code with PKCE).
//!
//! Public-key signatures are the platform's to check (WebCrypto on Workers, through
//! [`Keys`]); the HS256 MAC is RustCrypto's `hmac`. No signature code is written here.

mod claims;
mod jws;
mod keys;
pub mod oidc;

pub use jws::{Jws, MAX_TOKEN_BYTES, looks_like_jwt, parse};
pub use keys::{Jwk, KEYS_MAX_AGE_SECS, KeyCache, Lookup, REFETCH_MIN_SECS, parse_set};

use futures::future::LocalBoxFuture;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use std::cell::RefCell;

/// The largest leeway for clocks that disagree (seconds).
pub const MAX_LEEWAY_SECS: u64 = 300;
/// The leeway when the deployment names none (seconds).
pub const DEFAULT_LEEWAY_SECS: u64 = 60;
/// The shortest HS256 secret (bytes): the hash's size (RFC 7518 §3.2).
pub const MIN_SECRET_BYTES: usize = 32;

/// A signature algorithm the deployment may accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alg {
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    Rs256,
    /// ECDSA on P-256 with SHA-256.
    Es256,
    /// Ed25519.
    EdDsa,
    /// HMAC with SHA-256, keyed with the deployment's secret.
    Hs256,
}

impl Alg {
    /// The algorithm a JOSE header or key names (`none` and anything else: `None`).
    /// Ed25519 is `EdDSA` (RFC 8037) or `Ed25519` (RFC 9864's fully specified name).
    pub fn named(name: &str) -> Option<Self> {
        match name {
            "RS256" => Some(Self::Rs256),
            "ES256" => Some(Self::Es256),
            "EdDSA" | "Ed25519" => Some(Self::EdDsa),
            "HS256" => Some(Self::Hs256),
            _ => None,
        }
    }

    /// Its JOSE name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Rs256 => "RS256",
            Self::Es256 => "ES256",
            Self::EdDsa => "EdDSA",
            Self::Hs256 => "HS256",
        }
    }
}

pub(crate) use crate::provider::secure_url;

/// How the deployment checks its users' tokens.
#[derive(Clone, PartialEq, Eq)]
pub struct JwtConfig {
    /// The `iss` every token must carry.
    pub issuer: String,
    /// The `aud` every token must carry (or list).
    pub audience: String,
    /// The algorithms accepted.
    pub algorithms: Vec<Alg>,
    /// Where the provider's public keys are (for RS256, ES256, EdDSA).
    pub jwks_url: Option<String>,
    /// The shared secret (for HS256).
    pub secret: Option<String>,
    /// The claim naming the user's tenant, if users are grouped in tenants.
    pub tenant_claim: Option<String>,
    /// The claim listing the user's roles (an array, or a space-separated string).
    pub roles_claim: Option<String>,
    /// Whether a tenant's users share its sessions (`JWT_TENANT_SHARING`, default
    /// yes); when not, each reaches only their own, still within their tenant.
    pub tenant_sharing: bool,
    /// How far clocks may disagree (seconds).
    pub leeway_secs: u64,
}

impl std::fmt::Debug for JwtConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtConfig")
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .field("algorithms", &self.algorithms)
            .field("jwks_url", &self.jwks_url)
            .field("secret", &self.secret.as_ref().map(|_| "[redacted]"))
            .finish_non_exhaustive()
    }
}

impl JwtConfig {
    /// The variables [`from_vars`](Self::from_vars) reads.
    pub const VARS: &[&str] = &[
        "JWT_ISSUER",
        "JWT_AUDIENCE",
        "JWT_ALGORITHMS",
        "JWT_JWKS_URL",
        "JWT_SECRET",
        "JWT_TENANT_CLAIM",
        "JWT_TENANT_SHARING",
        "JWT_ROLES_CLAIM",
        "JWT_LEEWAY_SECS",
    ];

    /// From the deployment's vars (`JWT_ISSUER`, `JWT_AUDIENCE`, `JWT_ALGORITHMS`,
    /// `JWT_JWKS_URL`, `JWT_SECRET`, `JWT_TENANT_CLAIM`, `JWT_TENANT_SHARING`,
    /// `JWT_ROLES_CLAIM`, `JWT_LEEWAY_SECS`): `None` without `JWT_ISSUER`; an error naming what is missing
    /// or wrong when the configuration is partial.
    pub fn from_vars(get: &dyn Fn(&str) -> Option<String>) -> Result<Option<Self>, String> {
        let var = |name: &str| get(name).filter(|v| !v.trim().is_empty());
        let Some(issuer) = var("JWT_ISSUER") else {
            return Ok(None);
        };
        let audience =
            var("JWT_AUDIENCE").ok_or("JWT_ISSUER is set: JWT_AUDIENCE is needed too")?;
        let names = var("JWT_ALGORITHMS")
            .ok_or("JWT_ISSUER is set: JWT_ALGORITHMS is needed too (e.g. RS256)")?;
        let algorithms = names
            .split(',')
            .map(|n| {
                Alg::named(n.trim()).ok_or(format!(
                    "JWT_ALGORITHMS: {} is not one of RS256, ES256, EdDSA, HS256",
                    n.trim()
                ))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let secret = var("JWT_SECRET");
        let jwks_url = var("JWT_JWKS_URL");
        if algorithms.contains(&Alg::Hs256) {
            let secret = secret.as_deref().ok_or("HS256 needs JWT_SECRET")?;
            if secret.len() < MIN_SECRET_BYTES {
                return Err(format!(
                    "JWT_SECRET must be at least {MIN_SECRET_BYTES} bytes"
                ));
            }
        }
        if algorithms.iter().any(|a| *a != Alg::Hs256) {
            let url = jwks_url
                .as_deref()
                .ok_or("RS256, ES256 and EdDSA need JWT_JWKS_URL")?;
            if !secure_url(url) {
                return Err("JWT_JWKS_URL must be https:// (or http:// on loopback)".into());
            }
        }
        let leeway_secs = match var("JWT_LEEWAY_SECS") {
            None => DEFAULT_LEEWAY_SECS,
            Some(v) => v
                .parse()
                .ok()
                .filter(|s| *s <= MAX_LEEWAY_SECS)
                .ok_or(format!("JWT_LEEWAY_SECS must be 0 to {MAX_LEEWAY_SECS}"))?,
        };
        let tenant_sharing = match var("JWT_TENANT_SHARING").as_deref().map(str::trim) {
            None | Some("true") => true,
            Some("false") => false,
            Some(_) => return Err("JWT_TENANT_SHARING must be true or false".into()),
        };
        Ok(Some(Self {
            issuer,
            audience,
            algorithms,
            jwks_url,
            secret,
            tenant_claim: var("JWT_TENANT_CLAIM"),
            roles_claim: var("JWT_ROLES_CLAIM"),
            tenant_sharing,
            leeway_secs,
        }))
    }
}

/// Who a token says the caller is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// The `sub` claim.
    pub subject: String,
    /// Their tenant (when the deployment names a tenant claim).
    pub tenant: Option<String>,
    /// Their roles (when the deployment names a roles claim).
    pub roles: Vec<String>,
}

/// Why a token is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    /// Not a compact JWS.
    #[error("the token is malformed")]
    Malformed,
    /// Its header names a critical extension (`crit`), which nothing here understands.
    #[error("the token names a critical extension this deployment does not understand")]
    CriticalExtension,
    /// Signed with an algorithm the deployment does not accept (`none` included).
    #[error("the token's algorithm is not accepted")]
    AlgorithmNotAllowed,
    /// No key of the provider's set checks it.
    #[error("the token's key is unknown")]
    KeyUnknown,
    /// The signature does not hold.
    #[error("the token's signature does not hold")]
    BadSignature,
    /// Past its expiry.
    #[error("the token has expired")]
    Expired,
    /// Before its not-before (or issued in the future).
    #[error("the token is not valid yet")]
    NotYetValid,
    /// Another issuer's.
    #[error("the token is another issuer's")]
    WrongIssuer,
    /// For another audience.
    #[error("the token is for another audience")]
    WrongAudience,
    /// A claim is missing or of the wrong kind.
    #[error("the token's {0} claim is missing or invalid")]
    MissingClaim(&'static str),
    /// The provider's keys could not be fetched or used.
    #[error("the identity provider's keys are unavailable: {0}")]
    KeysUnavailable(String),
}

impl IdentityError {
    /// The stable code of the HTTP error: `auth_unavailable` (503) when the keys could
    /// not be had, `unauthorized` (401) for every fault of the token.
    pub fn code(&self) -> &'static str {
        match self {
            Self::KeysUnavailable(_) => "auth_unavailable",
            _ => "unauthorized",
        }
    }
}

/// The platform's half: the provider's key set over HTTP, and public-key signatures.
pub trait Keys {
    /// The body of the key set at `url`.
    fn fetch<'a>(&'a self, url: &'a str) -> LocalBoxFuture<'a, Result<Vec<u8>, String>>;
    /// Whether `signature` over `input` is `key`'s, for `alg`.
    fn verify<'a>(
        &'a self,
        alg: Alg,
        key: &'a Jwk,
        input: &'a [u8],
        signature: &'a [u8],
    ) -> LocalBoxFuture<'a, Result<bool, String>>;
}

/// The user `token` names, if it is genuine and valid at `now_secs` under `config`;
/// `cache` holds the provider's keys between calls.
pub async fn verify(
    config: &JwtConfig,
    token: &str,
    now_secs: u64,
    cache: &RefCell<KeyCache>,
    keys: &dyn Keys,
) -> Result<User, IdentityError> {
    let jws = parse(token)?;
    let alg = Alg::named(&jws.header.alg)
        .filter(|a| config.algorithms.contains(a))
        .ok_or(IdentityError::AlgorithmNotAllowed)?;
    match alg {
        Alg::Hs256 => {
            let secret = config
                .secret
                .as_deref()
                .ok_or(IdentityError::AlgorithmNotAllowed)?;
            let mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes())
                .map_err(|_| IdentityError::AlgorithmNotAllowed)?;
            mac.chain_update(&jws.signing_input)
                .verify_slice(&jws.signature)
                .map_err(|_| IdentityError::BadSignature)?;
        }
        _ => {
            let key = key_for(config, &jws, alg, now_secs, cache, keys).await?;
            let holds = keys
                .verify(alg, &key, &jws.signing_input, &jws.signature)
                .await
                .map_err(IdentityError::KeysUnavailable)?;
            if !holds {
                return Err(IdentityError::BadSignature);
            }
        }
    }
    claims::check(config, &jws.claims, now_secs)
}

/// The provider's key for `jws`, fetching the set when the cache says so.
async fn key_for(
    config: &JwtConfig,
    jws: &Jws,
    alg: Alg,
    now: u64,
    cache: &RefCell<KeyCache>,
    keys: &dyn Keys,
) -> Result<Jwk, IdentityError> {
    let kid = jws.header.kid.as_deref();
    let lookup = cache.borrow().lookup(kid, alg, now);
    match lookup {
        Lookup::Key(key) => return Ok(key),
        Lookup::Unknown => return Err(IdentityError::KeyUnknown),
        Lookup::Fetch => {}
    }
    let url = config
        .jwks_url
        .as_deref()
        .ok_or(IdentityError::AlgorithmNotAllowed)?;
    let body = keys
        .fetch(url)
        .await
        .map_err(IdentityError::KeysUnavailable)?;
    let set = parse_set(&body)
        .ok_or_else(|| IdentityError::KeysUnavailable(format!("{url} is not a key set")))?;
    cache.borrow_mut().store(set, now);
    match cache.borrow().lookup(kid, alg, now) {
        Lookup::Key(key) => Ok(key),
        _ => Err(IdentityError::KeyUnknown),
    }
}

#[cfg(test)]
mod tests;
