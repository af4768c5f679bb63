//! Sign-in through the deployment's OpenID Connect provider, for pages such as the
//! console: the authorization code flow with PKCE (S256), the code exchanged by the
//! worker (so the page needs no route to the provider, and a confidential client's
//! secret stays in the worker). The page makes the verifier and the `state`, sends the
//! user to the provider's authorization endpoint, and posts the code it gets back with
//! its verifier; the provider checks both. The token it answers with is the ID token,
//! whose audience is the client id: the deployment's `JWT_AUDIENCE`.
//!
//! Nothing here does IO: the worker fetches the discovery document and posts the form
//! this module writes.

use super::secure_url;
use serde::Deserialize;
use serde_json::Value;

/// The longest code, verifier or redirect URI taken (bytes).
const MAX_FIELD_BYTES: usize = 2048;

/// How the deployment signs pages in (from `OIDC_CLIENT_ID`, `OIDC_ISSUER` — by default
/// `JWT_ISSUER` — `OIDC_CLIENT_SECRET` and `OIDC_SCOPE`).
#[derive(Clone, PartialEq, Eq)]
pub struct OidcConfig {
    /// The provider (its discovery document is under it).
    pub issuer: String,
    /// This deployment's client id at the provider.
    pub client_id: String,
    /// A confidential client's secret (a public client has none).
    pub client_secret: Option<String>,
    /// The scopes asked for.
    pub scope: String,
}

impl std::fmt::Debug for OidcConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OidcConfig")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .finish_non_exhaustive()
    }
}

impl OidcConfig {
    /// The variables it reads.
    pub const VARS: [&str; 5] = [
        "OIDC_CLIENT_ID",
        "OIDC_ISSUER",
        "OIDC_CLIENT_SECRET",
        "OIDC_SCOPE",
        "JWT_ISSUER",
    ];

    /// From the deployment's variables (`None`: no `OIDC_CLIENT_ID`, no sign-in).
    pub fn from_vars(var: &dyn Fn(&str) -> Option<String>) -> Result<Option<Self>, String> {
        let var = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        let Some(client_id) = var("OIDC_CLIENT_ID") else {
            return Ok(None);
        };
        let issuer = var("OIDC_ISSUER")
            .or_else(|| var("JWT_ISSUER"))
            .ok_or("OIDC_CLIENT_ID needs OIDC_ISSUER (or JWT_ISSUER)")?;
        if !secure_url(&issuer) {
            return Err("OIDC_ISSUER must be https:// (or http:// on loopback)".into());
        }
        Ok(Some(Self {
            issuer: issuer.trim_end_matches('/').to_string(),
            client_id,
            client_secret: var("OIDC_CLIENT_SECRET"),
            scope: var("OIDC_SCOPE").unwrap_or_else(|| "openid profile".into()),
        }))
    }

    /// Where its discovery document is (OpenID Connect Discovery §4).
    pub fn discovery_url(&self) -> String {
        format!("{}/.well-known/openid-configuration", self.issuer)
    }
}

/// The provider's endpoints, from its discovery document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoints {
    /// Where the user signs in.
    pub authorization: String,
    /// Where a code is exchanged.
    pub token: String,
}

impl Endpoints {
    /// Reads a discovery document: its `issuer` must be `config`'s (§4.3), its
    /// endpoints secure URLs.
    pub fn read(config: &OidcConfig, document: &[u8]) -> Result<Self, String> {
        let doc: Value = serde_json::from_slice(document).map_err(|e| format!("not JSON: {e}"))?;
        let issuer = doc["issuer"].as_str().map(|i| i.trim_end_matches('/'));
        if issuer != Some(config.issuer.as_str()) {
            return Err("its issuer is not OIDC_ISSUER".into());
        }
        let endpoint = |name: &str| {
            doc[name]
                .as_str()
                .filter(|u| secure_url(u))
                .map(str::to_string)
                .ok_or(format!("no secure {name}"))
        };
        Ok(Self {
            authorization: endpoint("authorization_endpoint")?,
            token: endpoint("token_endpoint")?,
        })
    }
}

/// A page's request to exchange a code (`POST /v1/auth/oidc/token`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Exchange {
    /// The code the provider gave the page.
    pub code: String,
    /// The PKCE verifier the page made (RFC 7636 §4.1).
    pub code_verifier: String,
    /// The page's redirect URI, as sent to the authorization endpoint.
    pub redirect_uri: String,
}

impl Exchange {
    /// Reads and checks a body; `origin` is the worker's (the redirect URI must be one
    /// of its pages).
    pub fn parse(body: &[u8], origin: &str) -> Result<Self, String> {
        let e: Self = serde_json::from_slice(body).map_err(|e| format!("the body: {e}"))?;
        let long = [&e.code, &e.code_verifier, &e.redirect_uri]
            .iter()
            .any(|f| f.is_empty() || f.len() > MAX_FIELD_BYTES);
        if long {
            return Err(format!("each field is 1 to {MAX_FIELD_BYTES} bytes"));
        }
        let unreserved =
            |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~');
        let verifier = &e.code_verifier;
        if !(43..=128).contains(&verifier.len()) || !verifier.bytes().all(unreserved) {
            return Err("codeVerifier is 43 to 128 unreserved characters (RFC 7636)".into());
        }
        let page = e.redirect_uri.strip_prefix(origin);
        if !page.is_some_and(|p| p.starts_with('/')) {
            return Err("redirectUri is not a page of this worker".into());
        }
        Ok(e)
    }

    /// The token request's form body (RFC 6749 §4.1.3, with RFC 7636's verifier).
    pub fn form(&self, config: &OidcConfig) -> String {
        let mut form = form_urlencoded::Serializer::new(String::new());
        form.append_pair("grant_type", "authorization_code")
            .append_pair("code", &self.code)
            .append_pair("redirect_uri", &self.redirect_uri)
            .append_pair("client_id", &config.client_id)
            .append_pair("code_verifier", &self.code_verifier);
        if let Some(secret) = &config.client_secret {
            form.append_pair("client_secret", secret);
        }
        form.finish()
    }
}

/// The ID token of a token endpoint's answer, or why there is none (the provider's
/// `error`).
pub fn id_token(answer: &[u8]) -> Result<String, String> {
    let v: Value = serde_json::from_slice(answer).map_err(|_| "an answer that is not JSON")?;
    match (v["id_token"].as_str(), v["error"].as_str()) {
        (Some(token), _) if crate::identity::looks_like_jwt(token) => Ok(token.to_string()),
        (_, Some(error)) => Err(error.chars().take(64).collect()),
        _ => Err("no ID token".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> OidcConfig {
        let vars = |n: &str| match n {
            "OIDC_CLIENT_ID" => Some("console".into()),
            "JWT_ISSUER" => Some("https://id.example/".into()),
            "OIDC_CLIENT_SECRET" => Some("s3cret&=".into()),
            _ => None,
        };
        OidcConfig::from_vars(&vars).unwrap().unwrap()
    }

    #[test]
    fn the_configuration_needs_a_client_id_and_a_secure_issuer() {
        let c = config();
        assert_eq!(c.issuer, "https://id.example");
        assert_eq!(c.scope, "openid profile");
        assert_eq!(
            c.discovery_url(),
            "https://id.example/.well-known/openid-configuration"
        );
        assert!(
            !format!("{c:?}").contains("s3cret"),
            "the secret is never printed"
        );
        assert_eq!(OidcConfig::from_vars(&|_| None), Ok(None));
        let only_id = |n: &str| (n == "OIDC_CLIENT_ID").then(|| "c".to_string());
        assert!(OidcConfig::from_vars(&only_id).is_err());
        let plain = |n: &str| match n {
            "OIDC_CLIENT_ID" => Some("c".into()),
            "OIDC_ISSUER" => Some("http://id.example".into()),
            _ => None,
        };
        assert!(OidcConfig::from_vars(&plain).is_err());
    }

    #[test]
    fn a_discovery_document_must_name_the_issuer_and_secure_endpoints() {
        let doc = |issuer: &str, token: &str| {
            serde_json::json!({
                "issuer": issuer,
                "authorization_endpoint": "https://id.example/authorize",
                "token_endpoint": token,
            })
            .to_string()
        };
        let read = Endpoints::read(
            &config(),
            doc("https://id.example", "https://id.example/token").as_bytes(),
        )
        .unwrap();
        assert_eq!(read.authorization, "https://id.example/authorize");
        assert_eq!(read.token, "https://id.example/token");
        assert!(
            Endpoints::read(
                &config(),
                doc("https://evil.example", "https://id.example/token").as_bytes()
            )
            .is_err()
        );
        assert!(
            Endpoints::read(
                &config(),
                doc("https://id.example", "http://id.example/token").as_bytes()
            )
            .is_err()
        );
        assert!(Endpoints::read(&config(), b"<html>").is_err());
    }

    #[test]
    fn an_exchange_takes_a_verifier_and_a_page_of_this_worker_and_writes_the_form() {
        let verifier = "a".repeat(43);
        let body = |uri: &str, verifier: &str| {
            serde_json::json!({"code": "c 1", "codeVerifier": verifier, "redirectUri": uri})
                .to_string()
        };
        let origin = "https://w.example";
        let e = Exchange::parse(body("https://w.example/", &verifier).as_bytes(), origin).unwrap();
        let form = e.form(&config());
        assert_eq!(
            form,
            format!(
                "grant_type=authorization_code&code=c+1&redirect_uri=https%3A%2F%2Fw.example%2F&client_id=console&code_verifier={verifier}&client_secret=s3cret%26%3D"
            )
        );
        for (uri, v) in [
            ("https://w.example.evil/", verifier.as_str()),
            ("https://evil.example/", verifier.as_str()),
            ("https://w.example/", "short"),
            ("https://w.example/", &"a".repeat(129)),
            ("https://w.example/", &format!("{}!", "a".repeat(43))),
        ] {
            assert!(
                Exchange::parse(body(uri, v).as_bytes(), origin).is_err(),
                "{uri} {v}"
            );
        }
        assert!(Exchange::parse(br#"{"code": "c"}"#, origin).is_err());
    }

    #[test]
    fn the_answer_gives_its_id_token_or_the_providers_error() {
        assert_eq!(
            id_token(br#"{"id_token": "a.b.c", "access_token": "x"}"#),
            Ok("a.b.c".into())
        );
        assert_eq!(
            id_token(br#"{"error": "invalid_grant"}"#),
            Err("invalid_grant".into())
        );
        assert!(id_token(br#"{"access_token": "x"}"#).is_err());
        assert!(id_token(b"nope").is_err());
    }
}
