//! What proves a notification and a decision genuine. A webhook body is signed the
//! Standard Webhooks way: `webhook-signature: v1,<base64 HMAC-SHA256 of
//! "{webhook-id}.{webhook-timestamp}.{body}">`. A decision link carries its session, its
//! call, the decision and an expiry, MACed with the deployment's API token: it decides
//! only that call, only that way, only until it expires, and only while the call waits
//! (an answer is taken once: a second use finds it decided).

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// The session object's internal route that answers the call a decision link names
/// (`{"call": toolCallId}` → `{"agent", "call"}`, the call with when it started
/// waiting; 404 when it does not wait).
pub const DECISION_CALL_PATH: &str = "/__internal/decision-call";

/// The `webhook-signature` header of `body`, sent as `id` at `timestamp` (seconds).
pub fn signature(secret: &[u8], id: &str, timestamp: u64, body: &str) -> String {
    let Ok(mut mac) = <HmacSha256 as KeyInit>::new_from_slice(secret) else {
        return String::new(); // HMAC takes any key length: never in practice
    };
    mac.update(format!("{id}.{timestamp}.{body}").as_bytes());
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

/// What a decision link decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The session the call waits in.
    pub session: String,
    /// The call (its `toolCallId`).
    pub call: String,
    /// When the call started waiting (ms): a later call that reuses the id (after a
    /// retry, in a session made again) is another call.
    pub since: u64,
    /// Approve (else deny).
    pub approve: bool,
    /// When the link stops holding (seconds since the epoch).
    pub expires: u64,
}

/// Why a link decides nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkError {
    /// Not a link this deployment made (or altered).
    Invalid,
    /// Past its expiry.
    Expired,
}

fn tag(key: &str, payload: &str) -> Option<Vec<u8>> {
    let mut mac = <HmacSha256 as KeyInit>::new_from_slice(key.as_bytes()).ok()?;
    mac.update(b"helix-edge/decision-link/v1\0");
    mac.update(payload.as_bytes());
    Some(mac.finalize().into_bytes().to_vec())
}

/// The token of a decision link (the last segment of `/v1/decisions/{token}`), MACed
/// with `key`.
pub fn decision_token(key: &str, d: &Decision) -> Option<String> {
    let verdict = if d.approve { "approve" } else { "deny" };
    let fields = format!(
        "{}\0{}\0{}\0{verdict}\0{}",
        d.session, d.call, d.since, d.expires
    );
    let payload = URL_SAFE_NO_PAD.encode(fields);
    let tag = URL_SAFE_NO_PAD.encode(tag(key, &payload)?);
    Some(format!("{payload}.{tag}"))
}

/// The decision `token` carries, if this deployment's `key` made it and it holds at
/// `now_secs`.
pub fn verify_decision(key: &str, token: &str, now_secs: u64) -> Result<Decision, LinkError> {
    let (payload, given) = token.split_once('.').ok_or(LinkError::Invalid)?;
    let expected = tag(key, payload).ok_or(LinkError::Invalid)?;
    let given = URL_SAFE_NO_PAD
        .decode(given)
        .map_err(|_| LinkError::Invalid)?;
    if !crate::auth::constant_time_eq(&expected, &given) {
        return Err(LinkError::Invalid);
    }
    let fields = URL_SAFE_NO_PAD
        .decode(payload)
        .map_err(|_| LinkError::Invalid)?;
    let fields = String::from_utf8(fields).map_err(|_| LinkError::Invalid)?;
    let parts: Vec<&str> = fields.split('\0').collect();
    let [session, call, since, verdict, expires] = parts[..] else {
        return Err(LinkError::Invalid);
    };
    let since = since.parse().map_err(|_| LinkError::Invalid)?;
    let approve = match verdict {
        "approve" => true,
        "deny" => false,
        _ => return Err(LinkError::Invalid),
    };
    let expires = expires.parse().map_err(|_| LinkError::Invalid)?;
    if now_secs >= expires {
        return Err(LinkError::Expired);
    }
    Ok(Decision {
        session: session.into(),
        call: call.into(),
        since,
        approve,
        expires,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_standard_webhooks() {
        // The Standard Webhooks specification's own example (its secret, id, timestamp
        // and body), and the signature it gives.
        let secret = STANDARD.decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = r#"{"test": 2432232314}"#;
        assert_eq!(
            signature(&secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn a_link_decides_its_call_its_way_until_it_expires() {
        let d = Decision {
            session: "s.1".into(),
            call: "call_0".into(),
            since: 7,
            approve: true,
            expires: 2_000,
        };
        let token = decision_token("k", &d).unwrap();
        assert_eq!(verify_decision("k", &token, 1_999), Ok(d.clone()));
        assert_eq!(verify_decision("k", &token, 2_000), Err(LinkError::Expired));
        assert_eq!(verify_decision("other", &token, 1), Err(LinkError::Invalid));
        // Another verdict under the same tag is refused.
        let deny = decision_token(
            "k",
            &Decision {
                approve: false,
                ..d
            },
        )
        .unwrap();
        let (payload, _) = deny.split_once('.').unwrap();
        let (_, tag) = token.split_once('.').unwrap();
        assert_eq!(
            verify_decision("k", &format!("{payload}.{tag}"), 1),
            Err(LinkError::Invalid)
        );
        for bad in ["", ".", "x.y", "a.b.c", &token[1..]] {
            assert_eq!(
                verify_decision("k", bad, 1),
                Err(LinkError::Invalid),
                "{bad}"
            );
        }
    }
}
