//! OAuth 2.1 for an MCP server that needs it (MCP's authorization: RFC 9728, 8414, 7591,
//! 7636, 8707), as a wait on the user. A server that refuses a request (401) is
//! discovered — its protected resource metadata (from its challenge, or the well-known
//! paths), its authorization server's metadata, which must offer PKCE with S256 — this
//! deployment registers as a client there (dynamic registration) unless the server's
//! definition names one, and the user is sent to the authorization URL with a PKCE
//! challenge, a `state` naming the session, and the `resource` the tokens are for.
//! The callback's code is exchanged for tokens, which are kept in the session's vault
//! (never in the record, the stream or the logs), refreshed before they expire and
//! once more when the server refuses them; when that fails the user is asked again.
//!
//! Tokens belong to the session: each session connects on its own, and a fork or a
//! new session starts unconnected.

use super::McpServer;
use super::rpc::{McpError, millis};
use crate::journal::Vault;
use crate::provider::{HttpRequest, Method, secure_url};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// How long an authorization the user was sent to is offered to other calls.
const REUSED_FOR_MS: u64 = 10 * 60 * 1000;

/// How long before it expires an access token is refreshed.
const EARLY_MS: u64 = 60 * 1000;

/// The most bytes of a metadata document or token response read.
const MAX_DOCUMENT_BYTES: usize = 64 * 1024;

/// How long a call waits for tokens another call of the session is getting.
const CONNECTING_MS: u64 = 10_000;

/// How a server's tokens are got: where the user comes back to, and the client and
/// scope the deployment uses, when it does not register one.
#[derive(Debug, Clone, Default)]
pub(super) struct OAuthConfig {
    pub redirect_uri: String,
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    /// The authorization server `client_secret` is for (by default the server's origin).
    pub issuer: Option<String>,
    pub scope: Option<String>,
}

/// The client the tokens are for, and where they come from.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Client {
    id: String,
    secret: Option<String>,
    /// Whether the secret goes as HTTP Basic (else in the form).
    #[serde(default)]
    basic: bool,
    token_endpoint: String,
    resource: String,
    redirect_uri: String,
}

/// A session's tokens for a server.
#[derive(Serialize, Deserialize)]
struct Tokens {
    access: String,
    refresh: Option<String>,
    /// When the access token expires (ms), if the server said.
    expires_at: Option<u64>,
    client: Client,
}

/// An authorization the user was sent to and has not come back from.
#[derive(Serialize, Deserialize)]
struct Started {
    url: String,
    state: String,
    verifier: String,
    client: Client,
    at: u64,
}

impl McpServer {
    fn tokens_key(&self) -> String {
        format!("mcp:{}:tokens", self.name)
    }

    /// Where an authorization started is kept: under its state, and (`None`) the latest,
    /// offered again to other calls.
    fn started_key(&self, state: Option<&str>) -> String {
        match state {
            Some(state) => format!("mcp:{}:authorization:{state}", self.name),
            None => format!("mcp:{}:authorization", self.name),
        }
    }

    fn refused(&self, reason: impl Into<String>) -> McpError {
        McpError::Authorization {
            server: self.name.clone(),
            reason: reason.into(),
        }
    }

    fn read<T: serde::de::DeserializeOwned>(&self, vault: &Vault, key: &str) -> Option<T> {
        let kept = vault.get(key).ok().flatten()?;
        serde_json::from_str(&kept).ok()
    }

    fn keep(&self, vault: &Vault, key: &str, value: &impl Serialize) -> Result<(), McpError> {
        let text = serde_json::to_string(value).map_err(|e| self.refused(e.to_string()))?;
        vault
            .set(key, &text)
            .map_err(|e| self.refused(e.to_string()))
    }

    /// The access token the session's requests carry (refreshed first when it is about
    /// to expire); none before the user connected.
    pub(super) async fn access_token(&self, vault: &Vault) -> Result<Option<String>, McpError> {
        let Some(tokens) = self.read::<Tokens>(vault, &self.tokens_key()) else {
            return Ok(None);
        };
        let now = self.transport.now_ms();
        match tokens.expires_at {
            Some(at) if now + EARLY_MS >= at && tokens.refresh.is_some() => {
                self.refresh(vault, tokens).await
            }
            _ => Ok(Some(tokens.access)),
        }
    }

    /// The server refused the session's token: a refreshed one, or none (the user is
    /// asked again; the tokens are forgotten).
    pub(super) async fn refused_token(&self, vault: &Vault) -> Result<Option<String>, McpError> {
        match self.read::<Tokens>(vault, &self.tokens_key()) {
            Some(tokens) if tokens.refresh.is_some() => self.refresh(vault, tokens).await,
            _ => {
                let _ = vault.remove(&self.tokens_key());
                Ok(None)
            }
        }
    }

    async fn refresh(&self, vault: &Vault, tokens: Tokens) -> Result<Option<String>, McpError> {
        let Tokens {
            refresh: Some(refresh),
            client,
            ..
        } = tokens
        else {
            return Ok(None);
        };
        let form = [
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh.as_str()),
            ("resource", client.resource.as_str()),
        ];
        match self
            .token_request(&client, &form, Some(refresh.clone()))
            .await
        {
            Ok(tokens) => {
                let access = tokens.access.clone();
                self.keep(vault, &self.tokens_key(), &tokens)?;
                Ok(Some(access))
            }
            // Revoked or expired for good: the user connects again.
            Err(_) => {
                let _ = vault.remove(&self.tokens_key());
                Ok(None)
            }
        }
    }

    /// The links the user follows to connect session `session_id`: the worker's start
    /// link (which binds the flow to whoever opens it with the session's credentials,
    /// [`super::callback`]) and the authorization server's URL it leads to — discovery,
    /// the client's registration and PKCE, from the server's `challenge` (its
    /// `WWW-Authenticate`). One started less than ten minutes ago is offered again.
    pub(super) async fn authorization(
        &self,
        vault: &Vault,
        session_id: &str,
        challenge: Option<&str>,
    ) -> Result<(String, String), McpError> {
        let Some(config) = &self.oauth else {
            return Err(self.refused("it needs authorization, and no OAuth is set for it"));
        };
        let now = self.transport.now_ms();
        if let Some(started) = self.read::<Started>(vault, &self.started_key(None))
            && now.saturating_sub(started.at) < REUSED_FOR_MS
        {
            let start =
                super::callback::start_link(&config.redirect_uri, session_id, &started.state);
            return Ok((start, started.url));
        }
        let (resource, issuer) = self.protected_resource(challenge).await?;
        self.pinned(config, &issuer)?;
        let metadata = self.authorization_server(&issuer).await?;
        let endpoint = |name: &str| {
            let url = metadata[name].as_str().filter(|u| secure_url(u));
            url.map(str::to_string)
                .ok_or_else(|| self.refused(format!("its {name} is missing or not https")))
        };
        let (authorize, token_endpoint) = (
            endpoint("authorization_endpoint")?,
            endpoint("token_endpoint")?,
        );
        let pkce = metadata["code_challenge_methods_supported"].as_array();
        if !pkce.is_some_and(|m| m.iter().any(|m| m == "S256")) {
            return Err(self.refused("its authorization server does not offer PKCE with S256"));
        }
        let (id, secret) = match (&config.client_id, &metadata["registration_endpoint"]) {
            (Some(id), _) => (id.clone(), config.client_secret.clone()),
            (None, Value::String(url)) if secure_url(url) => {
                self.register(url, &config.redirect_uri).await?
            }
            (None, _) => {
                return Err(self.refused(
                    "its authorization server registers no clients: give the server a client id",
                ));
            }
        };
        // A secret goes in the form only where the server says it takes it there; else
        // HTTP Basic, RFC 8414's default.
        let methods = metadata["token_endpoint_auth_methods_supported"].as_array();
        let in_form = methods.is_some_and(|m| m.iter().any(|m| m == "client_secret_post"));
        let client = Client {
            id,
            secret,
            basic: !in_form,
            token_endpoint,
            resource,
            redirect_uri: config.redirect_uri.clone(),
        };
        let verifier = random_text()?;
        let state = format!("{session_id}.{}", random_text()?);
        let code_challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
        let mut query = form_urlencoded::Serializer::new(String::new());
        query
            .append_pair("response_type", "code")
            .append_pair("client_id", &client.id)
            .append_pair("redirect_uri", &client.redirect_uri)
            .append_pair("code_challenge", &code_challenge)
            .append_pair("code_challenge_method", "S256")
            .append_pair("state", &state)
            .append_pair("resource", &client.resource);
        let scope = config.scope.clone();
        let scope = scope.or_else(|| challenge_param(challenge, "scope"));
        if let Some(scope) = &scope {
            query.append_pair("scope", scope);
        }
        let joiner = if authorize.contains('?') { '&' } else { '?' };
        let url = format!("{authorize}{joiner}{}", query.finish());
        let started = Started {
            url: url.clone(),
            state,
            verifier,
            client,
            at: now,
        };
        self.keep(vault, &self.started_key(Some(&started.state)), &started)?;
        self.keep(vault, &self.started_key(None), &started)?;
        let start = super::callback::start_link(&config.redirect_uri, session_id, &started.state);
        Ok((start, url))
    }

    /// Completes the authorization the user came back from with `code` for `state`:
    /// the code exchanged, the tokens kept. Another call of the session may have done
    /// it already (one authorization answers every call that waited on it): then its
    /// tokens are used.
    pub(super) async fn connect(
        &self,
        vault: &Vault,
        code: &str,
        state: &str,
    ) -> Result<(), McpError> {
        let key = self.started_key(Some(state));
        let Some(started) = self.read::<Started>(vault, &key) else {
            return self.connected_meanwhile(vault).await;
        };
        // Taken before the exchange: a code is exchanged once.
        vault
            .remove(&key)
            .map_err(|e| self.refused(e.to_string()))?;
        let _ = vault.remove(&self.started_key(None));
        let client = started.client;
        let form = [
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", client.redirect_uri.as_str()),
            ("code_verifier", started.verifier.as_str()),
            ("resource", client.resource.as_str()),
        ];
        let tokens = self.token_request(&client, &form, None).await?;
        self.keep(vault, &self.tokens_key(), &tokens)
    }

    /// Waits a little for the tokens another call is getting.
    async fn connected_meanwhile(&self, vault: &Vault) -> Result<(), McpError> {
        let until = self.transport.now_ms() + CONNECTING_MS;
        loop {
            if vault.get(&self.tokens_key()).ok().flatten().is_some() {
                return Ok(());
            }
            if self.transport.now_ms() >= until {
                return Err(self.refused("the authorization is no longer pending"));
            }
            self.transport
                .sleep(std::time::Duration::from_millis(250))
                .await;
        }
    }

    /// A configured client secret goes only to the authorization server it is for (the
    /// one named with it, else the server's own origin), whatever discovery says.
    fn pinned(&self, config: &OAuthConfig, issuer: &str) -> Result<(), McpError> {
        if config.client_secret.is_none() {
            return Ok(());
        }
        let own = split_url(&self.url).map(|(origin, _)| origin);
        let expected = config.issuer.as_deref().or(own).unwrap_or_default();
        if issuer.trim_end_matches('/') == expected.trim_end_matches('/') {
            return Ok(());
        }
        Err(self.refused(format!(
            "its authorization server {issuer} is not the one its client secret is for \
             ({expected}): name it with oauth_issuer"
        )))
    }

    /// The resource the tokens are for and its authorization server: from the server's
    /// protected resource metadata, else (servers before 2025-06-18) its own origin.
    async fn protected_resource(
        &self,
        challenge: Option<&str>,
    ) -> Result<(String, String), McpError> {
        let (origin, path) = split_url(&self.url).ok_or_else(|| self.refused("its URL"))?;
        // A challenge's metadata URL is followed only on the server's own origin.
        let mut candidates: Vec<String> = challenge_param(challenge, "resource_metadata")
            .into_iter()
            .filter(|url| split_url(url).map(|(o, _)| o) == Some(origin))
            .collect();
        let path = path.trim_end_matches('/');
        if !path.is_empty() {
            candidates.push(format!(
                "{origin}/.well-known/oauth-protected-resource{path}"
            ));
        }
        candidates.push(format!("{origin}/.well-known/oauth-protected-resource"));
        for url in candidates.iter().filter(|u| secure_url(u)) {
            let Some(metadata) = self.document(url).await? else {
                continue;
            };
            let resource = metadata["resource"].as_str().unwrap_or(&self.url);
            let resource = resource.trim_end_matches('/');
            // The metadata must be this server's (RFC 9728 §3.3): its URL, or a path of
            // it (as MCP servers publish it), on its origin.
            let url = self.url.trim_end_matches('/');
            let ours = url == resource || url.starts_with(&format!("{resource}/"));
            if !ours || split_url(resource).map(|(o, _)| o) != Some(origin) {
                return Err(
                    self.refused(format!("its metadata is for another resource ({resource})"))
                );
            }
            let issuer = metadata["authorization_servers"][0].as_str();
            let issuer =
                issuer.ok_or_else(|| self.refused("its metadata names no authorization server"))?;
            return Ok((resource.to_string(), issuer.to_string()));
        }
        Ok((self.url.clone(), origin.to_string()))
    }

    /// The metadata of authorization server `issuer` (RFC 8414, or OpenID Connect
    /// discovery), checked to be the issuer's own.
    async fn authorization_server(&self, issuer: &str) -> Result<Value, McpError> {
        let issuer = issuer.trim_end_matches('/');
        if !secure_url(&format!("{issuer}/")) {
            return Err(self.refused(format!("its authorization server {issuer} is not https")));
        }
        let (origin, path) = split_url(issuer).ok_or_else(|| self.refused("its issuer"))?;
        let candidates = match path.is_empty() || path == "/" {
            true => vec![
                format!("{origin}/.well-known/oauth-authorization-server"),
                format!("{origin}/.well-known/openid-configuration"),
            ],
            false => vec![
                format!("{origin}/.well-known/oauth-authorization-server{path}"),
                format!("{origin}/.well-known/openid-configuration{path}"),
                format!("{issuer}/.well-known/openid-configuration"),
            ],
        };
        for url in candidates {
            if let Some(metadata) = self.document(&url).await? {
                let named = metadata["issuer"].as_str().map(|i| i.trim_end_matches('/'));
                if named != Some(issuer) {
                    return Err(
                        self.refused("its authorization server's metadata names another issuer")
                    );
                }
                return Ok(metadata);
            }
        }
        Err(self.refused(format!("no metadata for its authorization server {issuer}")))
    }

    /// Registers this deployment as a public client at `endpoint` (RFC 7591).
    async fn register(
        &self,
        endpoint: &str,
        redirect_uri: &str,
    ) -> Result<(String, Option<String>), McpError> {
        let body = json!({
            "client_name": "helix-edge",
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        });
        let request = self.plain(Method::Post, endpoint, "application/json", body.to_string());
        let (status, registered) = self.fetch(request).await?;
        let id = registered["client_id"]
            .as_str()
            .filter(|_| (200..300).contains(&status));
        let id = id.ok_or_else(|| {
            self.refused(format!("its client registration failed (HTTP {status})"))
        })?;
        let secret = registered["client_secret"].as_str().map(str::to_string);
        Ok((id.to_string(), secret))
    }

    /// A token request with `form` for `client`; a refresh keeps `refresh` when the
    /// server issues no new one.
    async fn token_request(
        &self,
        client: &Client,
        form: &[(&str, &str)],
        refresh: Option<String>,
    ) -> Result<Tokens, McpError> {
        let mut body = form_urlencoded::Serializer::new(String::new());
        body.extend_pairs(form).append_pair("client_id", &client.id);
        let mut basic = None;
        match &client.secret {
            Some(secret) if client.basic => {
                // RFC 6749 §2.3.1: each part form-encoded, then base64.
                let encode =
                    |t: &str| form_urlencoded::byte_serialize(t.as_bytes()).collect::<String>();
                let pair = format!("{}:{}", encode(&client.id), encode(secret));
                basic = Some(format!("Basic {}", STANDARD.encode(pair)));
            }
            Some(secret) => {
                body.append_pair("client_secret", secret);
            }
            None => {}
        }
        let form = "application/x-www-form-urlencoded";
        let mut request = self.plain(Method::Post, &client.token_endpoint, form, body.finish());
        request
            .headers
            .extend(basic.map(|b| ("authorization".to_string(), b)));
        let (status, answer) = self.fetch(request).await?;
        let access = answer["access_token"].as_str().filter(|t| !t.is_empty());
        let bearer = answer["token_type"]
            .as_str()
            .is_none_or(|t| t.eq_ignore_ascii_case("bearer"));
        let access = match (access, (200..300).contains(&status) && bearer) {
            (Some(access), true) => access.to_string(),
            _ => {
                let error = answer["error"].as_str().unwrap_or("no access token");
                return Err(self.refused(format!(
                    "its token endpoint refused (HTTP {status}: {error})"
                )));
            }
        };
        let expires_in = answer["expires_in"].as_u64();
        Ok(Tokens {
            access,
            refresh: answer["refresh_token"]
                .as_str()
                .map(str::to_string)
                .or(refresh),
            expires_at: expires_in.map(|s| {
                let now = self.transport.now_ms();
                now.saturating_add(s.saturating_mul(1000))
            }),
            client: client.clone(),
        })
    }

    /// A metadata document at `url`: `None` when there is none (4xx).
    async fn document(&self, url: &str) -> Result<Option<Value>, McpError> {
        let request = self.plain(Method::Get, url, "", String::new());
        let (status, document) = self.fetch(request).await?;
        Ok(match status {
            200..=299 if document.is_object() => Some(document),
            400..=499 => None,
            _ => return Err(self.refused(format!("{url} answered HTTP {status}"))),
        })
    }

    /// A request with the server's timeout and none of its headers (credentials of the
    /// server's own go to the server only).
    fn plain(&self, method: Method, url: &str, content_type: &str, body: String) -> HttpRequest {
        let mut headers = vec![("accept".to_string(), "application/json".to_string())];
        if !content_type.is_empty() {
            headers.push(("content-type".into(), content_type.into()));
        }
        HttpRequest {
            method,
            url: url.to_string(),
            headers,
            body,
        }
    }

    /// Sends `request`; its status and its body as JSON (null when it is not).
    async fn fetch(&self, request: HttpRequest) -> Result<(u16, Value), McpError> {
        let unavailable = |reason: String| McpError::Unavailable {
            server: self.name.clone(),
            reason,
        };
        let deadline = self.transport.now_ms() + millis(self.timeout);
        let mut response = self
            .transport
            .send(&request, self.timeout)
            .await
            .map_err(|e| unavailable(format!("{}: {e:?}", request.url)))?;
        let mut body = Vec::new();
        while let Some(chunk) = response.body.next().await {
            body.extend(chunk.map_err(|e| unavailable(format!("{e:?}")))?);
            if body.len() > MAX_DOCUMENT_BYTES || self.transport.now_ms() > deadline {
                return Err(
                    self.refused(format!("{} answered too much or too slowly", request.url))
                );
            }
        }
        Ok((
            response.status,
            serde_json::from_slice(&body).unwrap_or(Value::Null),
        ))
    }
}

/// 32 random bytes as URL-safe text (a PKCE verifier, a state).
fn random_text() -> Result<String, McpError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| McpError::Authorization {
        server: String::new(),
        reason: format!("no random source: {e}"),
    })?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

/// `scheme://host[:port]` and the path of `url` (without its query).
fn split_url(url: &str) -> Option<(&str, &str)> {
    let url = url.split(['?', '#']).next()?;
    let after = url.find("://")? + 3;
    Some(match url.get(after..)?.find('/') {
        Some(at) => url.split_at(after + at),
        None => (url, ""),
    })
}

/// Parameter `name` of a `WWW-Authenticate` challenge (`Bearer name="value", …`).
fn challenge_param(challenge: Option<&str>, name: &str) -> Option<String> {
    let challenge = challenge?;
    let at = challenge.find(&format!("{name}="))? + name.len() + 1;
    let rest = &challenge[at..];
    let value = match rest.strip_prefix('"') {
        Some(quoted) => quoted.split('"').next()?,
        None => rest.split([',', ' ']).next()?,
    };
    Some(value.to_string()).filter(|v| !v.is_empty())
}

#[cfg(test)]
#[path = "oauth_tests.rs"]
mod tests;
