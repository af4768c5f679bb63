//! The identity provider's public keys (a JWKS) as the isolate keeps them: which key
//! checks a token, whether it fits the token's algorithm, and when the set is fetched
//! again — after [`KEYS_MAX_AGE_SECS`], or when a token names a key the set lacks (a
//! rotation), at most once per [`REFETCH_MIN_SECS`] so that tokens with made-up key ids
//! cannot make the worker fetch on every request. The platform fetches and verifies;
//! this module decides.

use super::Alg;
use serde::Deserialize;
use serde_json::Value;

/// How long a fetched key set is used before it is fetched again (seconds).
pub const KEYS_MAX_AGE_SECS: u64 = 600;
/// The least time between two fetches for unknown key ids (seconds).
pub const REFETCH_MIN_SECS: u64 = 30;

/// One public key of the set (RFC 7517), kept whole for the platform's key import.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Jwk {
    /// Key type: `RSA`, `EC` or `OKP`.
    pub kty: String,
    /// Its id.
    #[serde(default)]
    pub kid: Option<String>,
    /// The algorithm it is for, if the set says.
    #[serde(default)]
    pub alg: Option<String>,
    /// What it is for (`sig`), if the set says.
    #[serde(default, rename = "use")]
    pub use_: Option<String>,
    /// The curve of an `EC` or `OKP` key.
    #[serde(default)]
    pub crv: Option<String>,
    /// The key as the set gave it.
    #[serde(skip)]
    pub json: Value,
}

impl Jwk {
    /// Whether this key may check a token signed with `alg`: its type and curve are the
    /// algorithm's, and what the set says of its use and algorithm agrees.
    pub fn fits(&self, alg: Alg) -> bool {
        let shape = match alg {
            Alg::Rs256 => self.kty == "RSA",
            Alg::Es256 => self.kty == "EC" && self.crv.as_deref() == Some("P-256"),
            Alg::EdDsa => self.kty == "OKP" && self.crv.as_deref() == Some("Ed25519"),
            Alg::Hs256 => false,
        };
        shape
            && self.use_.as_deref().is_none_or(|u| u == "sig")
            && self
                .alg
                .as_deref()
                .is_none_or(|a| Alg::named(a) == Some(alg))
    }
}

/// Reads a JWKS document (`{"keys": [...]}`); keys it cannot read are left out.
pub fn parse_set(body: &[u8]) -> Option<Vec<Jwk>> {
    let doc: Value = serde_json::from_slice(body).ok()?;
    let keys = doc.get("keys")?.as_array()?;
    Some(
        keys.iter()
            .filter_map(|k| {
                let mut jwk: Jwk = serde_json::from_value(k.clone()).ok()?;
                jwk.json = k.clone();
                Some(jwk)
            })
            .collect(),
    )
}

/// What the cache says about a token's key.
#[derive(Debug, Clone, PartialEq)]
pub enum Lookup {
    /// This key checks it.
    Key(Jwk),
    /// Fetch the set (none yet, too old, or a rotation), then look again.
    Fetch,
    /// No key of the set fits it, and fetching again now is not allowed.
    Unknown,
}

/// The key set of one identity provider, as fetched last.
#[derive(Debug, Clone, Default)]
pub struct KeyCache {
    keys: Vec<Jwk>,
    /// When the set was fetched (seconds), if it was.
    fetched_at: Option<u64>,
}

impl KeyCache {
    /// The key for a token signed with `alg` by key `kid` (a set of one key may omit
    /// ids), at `now` (seconds).
    pub fn lookup(&self, kid: Option<&str>, alg: Alg, now: u64) -> Lookup {
        let Some(fetched) = self.fetched_at else {
            return Lookup::Fetch;
        };
        let age = now.saturating_sub(fetched);
        if age >= KEYS_MAX_AGE_SECS {
            return Lookup::Fetch;
        }
        let named = |k: &&Jwk| match kid {
            Some(kid) => k.kid.as_deref() == Some(kid),
            None => self.keys.len() == 1,
        };
        match self.keys.iter().find(named) {
            Some(key) if key.fits(alg) => Lookup::Key(key.clone()),
            // A key of that id that does not fit the algorithm is no rotation.
            Some(_) => Lookup::Unknown,
            None if age >= REFETCH_MIN_SECS => Lookup::Fetch,
            None => Lookup::Unknown,
        }
    }

    /// Keeps `keys`, fetched at `now`.
    pub fn store(&mut self, keys: Vec<Jwk>, now: u64) {
        self.keys = keys;
        self.fetched_at = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SET: &str = r#"{"keys":[
        {"kty":"RSA","kid":"r1","use":"sig","alg":"RS256","n":"abc","e":"AQAB"},
        {"kty":"EC","kid":"e1","crv":"P-256","x":"x","y":"y"},
        {"kty":"OKP","kid":"o1","crv":"Ed25519","x":"x"},
        {"kty":"OKP","kid":"o2","crv":"Ed25519","x":"x","alg":"Ed25519"},
        {"kty":"RSA","kid":"enc","use":"enc","n":"abc","e":"AQAB"},
        {"no":"kty"}
    ]}"#;

    fn cache(now: u64) -> KeyCache {
        let mut cache = KeyCache::default();
        cache.store(parse_set(SET.as_bytes()).unwrap(), now);
        cache
    }

    #[test]
    fn a_key_checks_only_tokens_of_its_own_algorithm() {
        let c = cache(0);
        let found = |kid, alg| matches!(c.lookup(Some(kid), alg, 1), Lookup::Key(_));
        assert!(found("r1", Alg::Rs256));
        assert!(found("e1", Alg::Es256));
        assert!(found("o1", Alg::EdDsa));
        assert!(
            found("o2", Alg::EdDsa),
            "RFC 9864's name for it, as WebCrypto exports it"
        );
        for (kid, alg) in [
            ("r1", Alg::Es256),
            ("e1", Alg::Rs256),
            ("o1", Alg::Es256),
            ("r1", Alg::Hs256),
            ("enc", Alg::Rs256),
        ] {
            assert_eq!(
                c.lookup(Some(kid), alg, 1),
                Lookup::Unknown,
                "{kid} {alg:?}"
            );
        }
        let Lookup::Key(key) = c.lookup(Some("r1"), Alg::Rs256, 1) else {
            panic!("no key");
        };
        assert_eq!(key.json["n"], "abc", "kept whole for the key import");
    }

    #[test]
    fn the_set_is_fetched_first_when_old_and_on_a_new_key_id_at_most_every_30_s() {
        assert_eq!(
            KeyCache::default().lookup(Some("r1"), Alg::Rs256, 5),
            Lookup::Fetch
        );
        let c = cache(100);
        assert_eq!(
            c.lookup(Some("new"), Alg::Rs256, 110),
            Lookup::Unknown,
            "just fetched"
        );
        assert_eq!(
            c.lookup(Some("new"), Alg::Rs256, 130),
            Lookup::Fetch,
            "a rotation"
        );
        assert!(matches!(
            c.lookup(Some("r1"), Alg::Rs256, 699),
            Lookup::Key(_)
        ));
        assert_eq!(
            c.lookup(Some("r1"), Alg::Rs256, 700),
            Lookup::Fetch,
            "ten minutes old"
        );
        // After the rotation's fetch the new key is there.
        let mut rotated = c.clone();
        let set = r#"{"keys":[{"kty":"RSA","kid":"new","n":"n","e":"AQAB"}]}"#;
        rotated.store(parse_set(set.as_bytes()).unwrap(), 130);
        assert!(matches!(
            rotated.lookup(Some("new"), Alg::Rs256, 131),
            Lookup::Key(_)
        ));
        assert!(
            matches!(rotated.lookup(None, Alg::Rs256, 131), Lookup::Key(_)),
            "the only key"
        );
        assert_eq!(
            c.lookup(None, Alg::Rs256, 101),
            Lookup::Unknown,
            "no id among several"
        );
    }

    #[test]
    fn a_document_that_is_not_a_key_set_is_none() {
        assert_eq!(parse_set(b"[]"), None);
        assert_eq!(parse_set(br#"{"keys":{}}"#), None);
        assert_eq!(parse_set(br#"{"keys":[]}"#), Some(vec![]));
    }
}
