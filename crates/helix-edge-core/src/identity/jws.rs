//! A compact JWS (`header.claims.signature`, each base64url without padding): split and
//! decoded, nothing trusted yet. The header's `alg` and `kid` say how to check it; the
//! claims are read only once the signature holds ([`super::verify`]).

use super::IdentityError;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Deserialize;
use serde_json::{Map, Value};

/// The largest token read (bytes): far above any identity provider's, far below harm.
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// The protected header, as far as checking needs it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Header {
    /// The algorithm the token says it is signed with (checked against the
    /// configuration's, never taken from here alone).
    pub alg: String,
    /// Which key of the set signed it.
    #[serde(default)]
    pub kid: Option<String>,
    /// Extensions the token says must be understood (RFC 7515 §4.1.11): none are, so a
    /// token that names any is refused.
    #[serde(default)]
    pub crit: Option<Value>,
}

/// A token split into its parts.
#[derive(Debug, Clone, PartialEq)]
pub struct Jws {
    /// Its header.
    pub header: Header,
    /// What the signature covers: the first two parts as they came, with their dot.
    pub signing_input: Vec<u8>,
    /// The signature's bytes.
    pub signature: Vec<u8>,
    /// The claims (an object), unchecked.
    pub claims: Map<String, Value>,
}

/// Whether `credential` has a JWT's shape (three base64url parts), so that it is read
/// as one rather than as another kind of token.
pub fn looks_like_jwt(credential: &str) -> bool {
    let parts: Vec<&str> = credential.split('.').collect();
    parts.len() == 3
        && parts[..2].iter().all(|p| !p.is_empty())
        && parts.iter().all(|p| {
            p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// Splits and decodes `token`.
pub fn parse(token: &str) -> Result<Jws, IdentityError> {
    if token.len() > MAX_TOKEN_BYTES || !looks_like_jwt(token) {
        return Err(IdentityError::Malformed);
    }
    let mut parts = token.split('.');
    let (header, claims, signature) = match (parts.next(), parts.next(), parts.next()) {
        (Some(h), Some(c), Some(s)) => (h, c, s),
        _ => return Err(IdentityError::Malformed),
    };
    let decode = |part: &str| {
        URL_SAFE_NO_PAD
            .decode(part)
            .map_err(|_| IdentityError::Malformed)
    };
    let header: Header =
        serde_json::from_slice(&decode(header)?).map_err(|_| IdentityError::Malformed)?;
    // helix-edge understands no extension: a critical one cannot be honoured.
    if header.crit.is_some() {
        return Err(IdentityError::CriticalExtension);
    }
    let claims: Map<String, Value> =
        serde_json::from_slice(&decode(claims)?).map_err(|_| IdentityError::Malformed)?;
    let signing_input = token.as_bytes()[..token.len() - signature.len() - 1].to_vec();
    Ok(Jws {
        header,
        signing_input,
        signature: decode(signature)?,
        claims,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_token_that_names_a_critical_extension_is_refused() {
        let claims = b64(r#"{"sub":"ann"}"#);
        for header in [
            r#"{"alg":"HS256","crit":["exp"]}"#,
            r#"{"alg":"HS256","crit":[]}"#,
            r#"{"alg":"HS256","crit":"b64"}"#,
        ] {
            let token = format!("{}.{claims}.c2ln", b64(header));
            assert_eq!(
                parse(&token).unwrap_err(),
                IdentityError::CriticalExtension,
                "{header}"
            );
        }
    }

    use super::*;

    fn b64(json: &str) -> String {
        URL_SAFE_NO_PAD.encode(json)
    }

    #[test]
    fn a_token_splits_into_header_claims_and_the_bytes_its_signature_covers() {
        let token = format!(
            "{}.{}.{}",
            b64(r#"{"alg":"RS256","kid":"k1","typ":"JWT"}"#),
            b64(r#"{"sub":"u1"}"#),
            URL_SAFE_NO_PAD.encode([1u8, 2, 3])
        );
        let jws = parse(&token).unwrap();
        assert_eq!(jws.header.alg, "RS256");
        assert_eq!(jws.header.kid.as_deref(), Some("k1"));
        assert_eq!(jws.claims["sub"], "u1");
        assert_eq!(jws.signature, [1, 2, 3]);
        let (input, _) = token.rsplit_once('.').unwrap();
        assert_eq!(jws.signing_input, input.as_bytes());
    }

    #[test]
    fn anything_else_is_malformed() {
        let header = b64(r#"{"alg":"HS256"}"#);
        let claims = b64(r#"{"sub":"u"}"#);
        for bad in [
            String::new(),
            "a.b".into(),
            "a.b.c.d".into(),
            format!("{header}.{claims}.sig=="),
            format!("{header}..sig"),
            format!("{}.{claims}.c2ln", b64("not json")),
            format!("{}.{claims}.c2ln", b64(r#"{"kid":"no alg"}"#)),
            format!("{header}.{}.c2ln", b64("[1,2]")),
            format!("{header}.{claims}.{}", "A".repeat(MAX_TOKEN_BYTES)),
            "s_1:1700000000:ab12".into(),
        ] {
            assert_eq!(parse(&bad), Err(IdentityError::Malformed), "{bad}");
        }
        assert!(
            !looks_like_jwt("s_1:1700000000:ab12"),
            "a session token is not one"
        );
        assert!(
            looks_like_jwt(&format!("{header}.{claims}.")),
            "an unsigned one is"
        );
    }
}
