//! Authentication (SPEC §2), fail-closed: the full-access `API_TOKEN`, and session
//! tokens — an HMAC-SHA256 over the session id and an expiry, keyed with `API_TOKEN` —
//! that grant access to one session. Verification is constant-time. No IO, no clock:
//! `now` is passed in.
//!
//! Token form: `<session id>:<expiry, seconds since epoch>:<hex HMAC>`. Session ids
//! never contain `:`, so the form is unambiguous.

use crate::store::{Approvers, Owner};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// Default lifetime of a session token: 24 hours.
pub const SESSION_TOKEN_TTL_SECS: u64 = 24 * 3600;

/// How the deployment authenticates.
#[derive(Clone, PartialEq, Eq)]
pub enum AuthConfig {
    /// `API_TOKEN` is set.
    Token(String),
    /// `ALLOW_UNAUTHENTICATED="true"` and no token: everything is open.
    Open,
    /// Neither: every authenticated route answers 503.
    Unconfigured,
}

impl std::fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Token(_) => "Token([redacted])",
            Self::Open => "Open",
            Self::Unconfigured => "Unconfigured",
        })
    }
}

impl AuthConfig {
    /// From `API_TOKEN` and `ALLOW_UNAUTHENTICATED`. A token always wins over "open".
    pub fn new(api_token: Option<String>, allow_unauthenticated: Option<String>) -> Self {
        match api_token.filter(|t| !t.is_empty()) {
            Some(token) => Self::Token(token),
            None if allow_unauthenticated.as_deref() == Some("true") => Self::Open,
            None => Self::Unconfigured,
        }
    }
}

/// Who a request is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// Full access (the API token, or an open deployment).
    Admin,
    /// Access to one session only.
    Session(String),
    /// A user of the deployment's identity provider: the sessions they own.
    User(Caller),
}

impl Principal {
    /// The user, for a user's request.
    pub fn user(&self) -> Option<&Caller> {
        match self {
            Self::User(caller) => Some(caller),
            _ => None,
        }
    }
}

/// A user whose token the deployment checked, as the routes see them: they own the
/// sessions they create, and reach only those — or, where the deployment groups users
/// in tenants, every session of their tenant.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Caller {
    /// Who they are (the owner of what they create).
    pub user: Owner,
    /// Whether they reach their tenant's sessions, not only their own.
    #[serde(default)]
    pub tenant_wide: bool,
    /// Their roles (from the claim the deployment names), for approvals that need one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<String>,
}

impl Caller {
    /// What an owner must match for them to reach its session: a subject (`None`: any
    /// user of the tenant) and a tenant (`None`: none).
    pub fn scope(&self) -> (Option<&str>, Option<&str>) {
        let tenant = self.user.tenant.as_deref();
        match (self.tenant_wide, tenant) {
            (true, Some(tenant)) => (None, Some(tenant)),
            _ => (Some(self.user.subject.as_str()), tenant),
        }
    }

    /// As JSON with every character past ASCII escaped (`\uXXXX`): a header's value,
    /// whatever the identity provider's names are.
    pub fn to_header(&self) -> String {
        let json = serde_json::to_string(self).unwrap_or_default();
        let mut out = String::with_capacity(json.len());
        for c in json.chars() {
            if c.is_ascii() {
                out.push(c);
            } else {
                for unit in c.encode_utf16(&mut [0; 2]) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
        out
    }

    /// Whether they reach a session of this owner (`None`: made with the API token, so
    /// no user's).
    pub fn reaches(&self, owner: Option<&Owner>) -> bool {
        let Some(owner) = owner else {
            return false;
        };
        let (subject, tenant) = self.scope();
        subject.is_none_or(|s| s == owner.subject) && tenant == owner.tenant.as_deref()
    }

    /// Whether they may decide an approval that needs `approvers`, in a session of
    /// `owner`: they hold the role, in the owner's tenant, and are not the owner where
    /// the owner is refused. A session no user owns is the API token's alone.
    pub fn approves(&self, approvers: &Approvers, owner: Option<&Owner>) -> bool {
        let Some(owner) = owner else {
            return false;
        };
        owner.tenant == self.user.tenant
            && self.roles.contains(&approvers.role)
            && !(approvers.not_owner && *owner == self.user)
    }
}

/// Why a request is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthError {
    /// 503 `auth_not_configured`.
    NotConfigured,
    /// 401: no credentials, or invalid or expired ones.
    Unauthorized,
    /// 403: valid credentials for something else.
    Forbidden,
}

/// The MAC of a token. HMAC takes keys of any length, so this is `None` only in theory;
/// callers treat `None` as "no valid token" rather than panicking.
fn mac(key: &str, session_id: &str, expiry: u64) -> Option<HmacSha256> {
    let mut mac = <HmacSha256 as KeyInit>::new_from_slice(key.as_bytes()).ok()?;
    mac.update(b"helix-edge/session-token/v1\0");
    mac.update(session_id.as_bytes());
    mac.update(b"\0");
    mac.update(expiry.to_string().as_bytes());
    Some(mac)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A token for `session_id` that expires at `expiry` (seconds since the epoch).
pub fn session_token(key: &str, session_id: &str, expiry: u64) -> Option<String> {
    let tag = mac(key, session_id, expiry)?.finalize().into_bytes();
    Some(format!("{session_id}:{expiry}:{}", hex(&tag)))
}

/// The session a token is valid for, if it is genuine and unexpired at `now_secs`.
/// Accepted only exactly as issued: the token is compared, in constant time, with the
/// one [`session_token`] issues for its session and expiry, so an upper-case tag, a
/// signed or zero-padded expiry or any other spelling of the same fields is refused.
pub fn verify_session_token(key: &str, token: &str, now_secs: u64) -> Option<String> {
    let mut parts = token.rsplitn(3, ':');
    let (_tag, expiry, session_id) = (parts.next()?, parts.next()?, parts.next()?);
    let expiry: u64 = expiry.parse().ok()?;
    let issued = session_token(key, session_id, expiry)?;
    constant_time_eq(token.as_bytes(), issued.as_bytes()).then_some(())?;
    (now_secs < expiry).then(|| session_id.to_string())
}

/// Checks a bearer credential (header or `?token=`) for a route. `session` is the
/// session the route is about, if any.
pub fn authorize(
    config: &AuthConfig,
    credential: Option<&str>,
    session: Option<&str>,
    now_secs: u64,
) -> Result<Principal, AuthError> {
    let key = match config {
        AuthConfig::Unconfigured => return Err(AuthError::NotConfigured),
        AuthConfig::Open => return Ok(Principal::Admin),
        AuthConfig::Token(key) => key,
    };
    let credential = credential
        .filter(|c| !c.is_empty())
        .ok_or(AuthError::Unauthorized)?;
    if constant_time_eq(credential.as_bytes(), key.as_bytes()) {
        return Ok(Principal::Admin);
    }
    let owner = verify_session_token(key, credential, now_secs).ok_or(AuthError::Unauthorized)?;
    match session {
        Some(id) if id == owner => Ok(Principal::Session(owner)),
        _ => Err(AuthError::Forbidden),
    }
}

/// Compares without stopping at the first difference.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let len_differs = a.len() != b.len();
    let diff = a
        .iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y));
    !len_differs & (diff == 0)
}

/// Whether `id` is a valid session id: `^[A-Za-z0-9._-]{1,128}$`.
pub fn valid_session_id(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(subject: &str, tenant: Option<&str>, tenant_wide: bool) -> Caller {
        Caller {
            user: owner(subject, tenant),
            tenant_wide,
            roles: Vec::new(),
        }
    }

    fn owner(subject: &str, tenant: Option<&str>) -> Owner {
        Owner {
            subject: subject.into(),
            tenant: tenant.map(Into::into),
        }
    }

    #[test]
    fn a_caller_travels_as_an_ascii_header_and_comes_back_the_same() {
        let caller = Caller {
            user: owner("jürgen 😀", Some("Zürich")),
            tenant_wide: true,
            roles: vec!["finance".into(), "comptabilité".into()],
        };
        let header = caller.to_header();
        assert!(header.is_ascii(), "{header}");
        assert!(header.contains("\\ud83d\\ude00"), "{header}");
        assert_eq!(serde_json::from_str::<Caller>(&header).unwrap(), caller);
    }

    #[test]
    fn an_approval_that_needs_a_role_is_a_holders_in_the_owners_tenant() {
        let holder = |subject: &str, tenant: Option<&str>| Caller {
            roles: vec!["ops".into(), "finance".into()],
            ..caller(subject, tenant, false)
        };
        let finance = Approvers {
            role: "finance".into(),
            not_owner: false,
        };
        let others = Approvers {
            not_owner: true,
            ..finance.clone()
        };
        let ann = owner("ann", Some("acme"));
        let ann_session = Some(&ann);
        assert!(holder("bob", Some("acme")).approves(&finance, ann_session));
        assert!(holder("bob", Some("acme")).approves(&others, ann_session));
        assert!(holder("ann", Some("acme")).approves(&finance, ann_session));
        assert!(!holder("ann", Some("acme")).approves(&others, ann_session));
        // Another tenant's holder, a holder of no tenant, a user without the role.
        assert!(!holder("bob", Some("globex")).approves(&finance, ann_session));
        assert!(!holder("bob", None).approves(&finance, ann_session));
        assert!(!caller("bob", Some("acme"), true).approves(&finance, ann_session));
        // A session no user owns is the API token's alone.
        assert!(!holder("bob", None).approves(&finance, None));
    }

    #[test]
    fn a_user_reaches_their_own_sessions_or_their_tenants_where_configured() {
        let ann = caller("ann", None, false);
        assert!(ann.reaches(Some(&owner("ann", None))));
        assert!(!ann.reaches(Some(&owner("bob", None))));
        assert!(
            !ann.reaches(Some(&owner("ann", Some("acme")))),
            "another tenant's ann"
        );
        assert!(!ann.reaches(None), "an API token's session is no user's");

        let acme_ann = caller("ann", Some("acme"), false);
        assert!(acme_ann.reaches(Some(&owner("ann", Some("acme")))));
        assert!(
            !acme_ann.reaches(Some(&owner("bob", Some("acme")))),
            "own sessions only"
        );
        assert!(!acme_ann.reaches(Some(&owner("ann", None))));

        let wide = caller("ann", Some("acme"), true);
        assert_eq!(wide.scope(), (None, Some("acme")));
        assert!(
            wide.reaches(Some(&owner("bob", Some("acme")))),
            "the tenant's"
        );
        assert!(!wide.reaches(Some(&owner("bob", Some("other")))));
        assert!(!wide.reaches(Some(&owner("bob", None))));

        // Tenant-wide with no tenant in the token: their own sessions only.
        let lone = caller("ann", None, true);
        assert_eq!(lone.scope(), (Some("ann"), None));
        assert!(!lone.reaches(Some(&owner("bob", None))));
    }

    const KEY: &str = "k3y";

    #[test]
    fn a_session_token_opens_its_session_only_until_it_expires() {
        let config = AuthConfig::Token(KEY.into());
        let token = session_token(KEY, "s.1", 1_000).unwrap();
        assert_eq!(
            authorize(&config, Some(&token), Some("s.1"), 999),
            Ok(Principal::Session("s.1".into()))
        );
        assert_eq!(
            authorize(&config, Some(&token), Some("s.2"), 999),
            Err(AuthError::Forbidden)
        );
        assert_eq!(
            authorize(&config, Some(&token), None, 999),
            Err(AuthError::Forbidden),
            "not for global routes"
        );
        assert_eq!(
            authorize(&config, Some(&token), Some("s.1"), 1_000),
            Err(AuthError::Unauthorized),
            "expired"
        );
    }

    #[test]
    fn a_token_is_the_standard_hmac_sha256_of_its_fields() {
        // From Python: hmac.new(b"k3y", b"helix-edge/session-token/v1\0s.1\x001000", sha256).
        assert_eq!(
            session_token(KEY, "s.1", 1_000).unwrap(),
            "s.1:1000:2925710cbce8ddb9eb1bed9dcf32aa5fdf33b4f8ddeca69f69878814f54b966b"
        );
    }

    #[test]
    fn forged_or_malformed_tokens_are_unauthorized() {
        let config = AuthConfig::Token(KEY.into());
        let token = session_token(KEY, "s", 5_000).unwrap();
        let forged = session_token("other key", "s", 5_000).unwrap();
        let extended = token.replace(":5000:", ":9000:");
        for bad in [
            forged.as_str(),
            &extended,
            "s:5000:zz",
            "s:x:00",
            "",
            "garbage",
            "Bearer",
        ] {
            assert_eq!(
                authorize(&config, Some(bad), Some("s"), 1),
                Err(AuthError::Unauthorized),
                "{bad}"
            );
        }
        assert_eq!(
            authorize(&config, None, Some("s"), 1),
            Err(AuthError::Unauthorized)
        );
    }

    #[test]
    fn a_token_is_accepted_only_in_the_form_it_was_issued_in() {
        let config = AuthConfig::Token(KEY.into());
        let token = session_token(KEY, "s", 5_000).unwrap();
        let (fields, tag) = token.rsplit_once(':').unwrap();
        let letter = tag.find(|c: char| c.is_ascii_alphabetic()).unwrap();
        let mut one_upper = tag.to_string();
        one_upper[letter..=letter].make_ascii_uppercase();
        let signed_pair = format!("+{}", &tag[1..]);
        for other in [
            format!("{fields}:{}", tag.to_ascii_uppercase()),
            format!("{fields}:{one_upper}"),
            format!("{fields}:{signed_pair}"),
            token.replace(":5000:", ":05000:"),
            token.replace(":5000:", ":+5000:"),
            format!(" {token}"),
            format!("{token}\n"),
        ] {
            assert_ne!(other, token);
            assert_eq!(
                authorize(&config, Some(&other), Some("s"), 1),
                Err(AuthError::Unauthorized),
                "{other}"
            );
        }
        assert_eq!(
            authorize(&config, Some(&token), Some("s"), 1),
            Ok(Principal::Session("s".into()))
        );
    }

    #[test]
    fn the_api_token_is_full_access_and_configuration_fails_closed() {
        let config = AuthConfig::Token(KEY.into());
        assert_eq!(
            authorize(&config, Some(KEY), Some("any"), 1),
            Ok(Principal::Admin)
        );
        assert_eq!(
            authorize(&config, Some("k3"), None, 1),
            Err(AuthError::Unauthorized)
        );
        assert_eq!(AuthConfig::new(None, None), AuthConfig::Unconfigured);
        assert_eq!(
            AuthConfig::new(Some(String::new()), Some("yes".into())),
            AuthConfig::Unconfigured
        );
        assert_eq!(
            authorize(&AuthConfig::Unconfigured, Some(KEY), None, 1),
            Err(AuthError::NotConfigured)
        );
        assert_eq!(AuthConfig::new(None, Some("true".into())), AuthConfig::Open);
        assert_eq!(
            authorize(&AuthConfig::Open, None, Some("s"), 1),
            Ok(Principal::Admin)
        );
        assert_eq!(
            AuthConfig::new(Some("t".into()), Some("true".into())),
            AuthConfig::Token("t".into())
        );
        assert!(!format!("{config:?}").contains(KEY));
    }

    #[test]
    fn session_ids_follow_the_spec_pattern() {
        assert!(valid_session_id("a.B_c-9"));
        assert!(valid_session_id(&"x".repeat(128)));
        for bad in [
            "",
            "../etc",
            "a/b",
            "a b",
            "é",
            "a;drop",
            "a:b",
            &"x".repeat(129),
        ] {
            assert!(!valid_session_id(bad), "{bad}");
        }
    }
}
