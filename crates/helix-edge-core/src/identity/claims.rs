//! The claims of a token whose signature held: who it names, for whom and when it is
//! valid. Issuer and audience must be the configured ones, the expiry is required, and
//! times are compared with a bounded leeway for clocks that disagree.

use super::{IdentityError, JwtConfig, User};
use serde_json::{Map, Value};

/// The longest subject, tenant or role read (bytes).
const MAX_NAME_BYTES: usize = 256;

/// The user `claims` name, if they hold at `now_secs` under `config`.
pub fn check(
    config: &JwtConfig,
    claims: &Map<String, Value>,
    now_secs: u64,
) -> Result<User, IdentityError> {
    let leeway = config.leeway_secs;
    if claims.get("iss").and_then(Value::as_str) != Some(config.issuer.as_str()) {
        return Err(IdentityError::WrongIssuer);
    }
    let audience = match claims.get("aud") {
        Some(Value::String(one)) => one == &config.audience,
        Some(Value::Array(many)) => many.iter().any(|a| a.as_str() == Some(&config.audience)),
        _ => false,
    };
    if !audience {
        return Err(IdentityError::WrongAudience);
    }
    let time = |name: &'static str| match claims.get(name) {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .or_else(|| v.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
            .map(Some)
            .ok_or(IdentityError::MissingClaim(name)),
    };
    let expiry = time("exp")?.ok_or(IdentityError::MissingClaim("exp"))?;
    if now_secs >= expiry.saturating_add(leeway) {
        return Err(IdentityError::Expired);
    }
    if time("nbf")?.is_some_and(|nbf| now_secs.saturating_add(leeway) < nbf) {
        return Err(IdentityError::NotYetValid);
    }
    if time("iat")?.is_some_and(|iat| now_secs.saturating_add(leeway) < iat) {
        return Err(IdentityError::NotYetValid);
    }
    let subject = name(claims.get("sub")).ok_or(IdentityError::MissingClaim("sub"))?;
    let tenant = match &config.tenant_claim {
        Some(claim) => Some(name(claims.get(claim)).ok_or(IdentityError::MissingClaim("tenant"))?),
        None => None,
    };
    let roles = match config.roles_claim.as_ref().and_then(|c| claims.get(c)) {
        Some(Value::Array(roles)) => roles.iter().filter_map(|r| name(Some(r))).collect(),
        Some(Value::String(spaced)) => spaced.split(' ').filter_map(text_name).collect(),
        _ => Vec::new(),
    };
    Ok(User {
        subject,
        tenant,
        roles,
    })
}

/// A non-empty string of at most [`MAX_NAME_BYTES`].
fn name(value: Option<&Value>) -> Option<String> {
    text_name(value?.as_str()?)
}

/// `text`, if it is a name: non-empty, at most [`MAX_NAME_BYTES`].
fn text_name(text: &str) -> Option<String> {
    (!text.is_empty() && text.len() <= MAX_NAME_BYTES).then(|| text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::Alg;
    use serde_json::json;

    fn config() -> JwtConfig {
        JwtConfig {
            issuer: "https://id.example".into(),
            audience: "helix".into(),
            algorithms: vec![Alg::Rs256],
            jwks_url: Some("https://id.example/jwks".into()),
            secret: None,
            tenant_claim: Some("org_id".into()),
            roles_claim: Some("roles".into()),
            tenant_sharing: true,
            leeway_secs: 60,
        }
    }

    fn claims(extra: Value) -> Map<String, Value> {
        let base = json!({
            "iss": "https://id.example", "aud": "helix", "sub": "u1", "org_id": "acme",
            "exp": 2_000, "nbf": 1_000, "iat": 1_000, "roles": ["finance", "ops"],
        });
        // `null` leaves the claim out.
        let mut claims = base.as_object().unwrap().clone();
        for (k, v) in extra.as_object().unwrap() {
            match v {
                Value::Null => claims.remove(k),
                v => claims.insert(k.clone(), v.clone()),
            };
        }
        claims
    }

    #[test]
    fn a_valid_token_names_its_subject_tenant_and_roles() {
        let user = check(&config(), &claims(json!({})), 1_500).unwrap();
        assert_eq!(
            user,
            User {
                subject: "u1".into(),
                tenant: Some("acme".into()),
                roles: vec!["finance".into(), "ops".into()],
            }
        );
        let spaced = claims(json!({"roles": "a b", "aud": ["other", "helix"]}));
        assert_eq!(check(&config(), &spaced, 1_500).unwrap().roles, ["a", "b"]);
        let untenanted = JwtConfig {
            tenant_claim: None,
            roles_claim: None,
            tenant_sharing: true,
            ..config()
        };
        let user = check(&untenanted, &claims(json!({"org_id": null})), 1_500).unwrap();
        assert_eq!((user.tenant, user.roles.len()), (None, 0));
    }

    #[test]
    fn times_hold_within_the_leeway_and_not_beyond() {
        let c = config();
        let at = |now| check(&c, &claims(json!({})), now);
        assert!(at(2_059).is_ok(), "expired 59 s ago: within the leeway");
        assert_eq!(at(2_060), Err(IdentityError::Expired));
        assert!(at(940).is_ok(), "valid in 60 s: within the leeway");
        assert_eq!(at(939), Err(IdentityError::NotYetValid));
        let issued_later = claims(json!({"nbf": null, "iat": 1_200}));
        assert_eq!(
            check(&c, &issued_later, 1_100),
            Err(IdentityError::NotYetValid)
        );
        let no_expiry = claims(json!({"exp": null}));
        assert_eq!(
            check(&c, &no_expiry, 1_500),
            Err(IdentityError::MissingClaim("exp"))
        );
    }

    #[test]
    fn another_issuer_audience_or_no_subject_is_refused() {
        let c = config();
        let refused = |extra: Value| check(&c, &claims(extra), 1_500).unwrap_err();
        assert_eq!(
            refused(json!({"iss": "https://evil.example"})),
            IdentityError::WrongIssuer
        );
        assert_eq!(refused(json!({"iss": null})), IdentityError::WrongIssuer);
        assert_eq!(
            refused(json!({"aud": "other"})),
            IdentityError::WrongAudience
        );
        assert_eq!(
            refused(json!({"aud": ["a", "b"]})),
            IdentityError::WrongAudience
        );
        assert_eq!(refused(json!({"aud": null})), IdentityError::WrongAudience);
        assert_eq!(
            refused(json!({"sub": ""})),
            IdentityError::MissingClaim("sub")
        );
        assert_eq!(
            refused(json!({"sub": 7})),
            IdentityError::MissingClaim("sub")
        );
        assert_eq!(
            refused(json!({"org_id": null})),
            IdentityError::MissingClaim("tenant")
        );
        assert_eq!(
            refused(json!({"exp": "soon"})),
            IdentityError::MissingClaim("exp")
        );
    }
}
