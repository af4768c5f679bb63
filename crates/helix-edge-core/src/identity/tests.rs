use super::*;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use futures::executor::block_on;
use serde_json::{Value, json};
use std::cell::Cell;

const SECRET: &str = "a-shared-secret-of-at-least-32-bytes!";

fn config(algorithms: &[Alg]) -> JwtConfig {
    JwtConfig {
        issuer: "https://id.example".into(),
        audience: "helix".into(),
        algorithms: algorithms.to_vec(),
        jwks_url: Some("https://id.example/jwks".into()),
        secret: Some(SECRET.into()),
        tenant_claim: None,
        roles_claim: None,
        tenant_sharing: true,
        leeway_secs: 60,
    }
}

fn claims() -> Value {
    json!({"iss": "https://id.example", "aud": "helix", "sub": "u1", "exp": 2_000})
}

fn unsigned(header: Value, claims: &Value) -> String {
    let part = |v: &Value| URL_SAFE_NO_PAD.encode(v.to_string());
    format!("{}.{}", part(&header), part(claims))
}

fn hs256(claims: &Value, secret: &str) -> String {
    let input = unsigned(json!({"alg": "HS256", "typ": "JWT"}), claims);
    let mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes()).unwrap();
    let tag = mac.chain_update(input.as_bytes()).finalize().into_bytes();
    format!("{input}.{}", URL_SAFE_NO_PAD.encode(tag))
}

/// The provider: a key set served from memory (counting fetches), and "signatures" that
/// hold when they are `signed-by-<kid>` (the real ones are the platform's WebCrypto,
/// tested end to end).
struct Provider {
    set: RefCell<Value>,
    fetches: Cell<u32>,
    down: Cell<bool>,
}

impl Provider {
    fn with(kids: &[&str]) -> Self {
        let keys: Vec<Value> = kids
            .iter()
            .map(|kid| json!({"kty": "RSA", "kid": kid, "n": "n", "e": "AQAB"}))
            .collect();
        Self {
            set: RefCell::new(json!({ "keys": keys })),
            fetches: Cell::new(0),
            down: Cell::new(false),
        }
    }
}

impl Keys for Provider {
    fn fetch<'a>(&'a self, _url: &'a str) -> LocalBoxFuture<'a, Result<Vec<u8>, String>> {
        self.fetches.set(self.fetches.get() + 1);
        let body = self.set.borrow().to_string().into_bytes();
        let down = self.down.get();
        Box::pin(async move { if down { Err("503".into()) } else { Ok(body) } })
    }

    fn verify<'a>(
        &'a self,
        _alg: Alg,
        key: &'a Jwk,
        _input: &'a [u8],
        signature: &'a [u8],
    ) -> LocalBoxFuture<'a, Result<bool, String>> {
        let expected = format!("signed-by-{}", key.kid.clone().unwrap_or_default());
        Box::pin(async move { Ok(signature == expected.as_bytes()) })
    }
}

fn rs256(kid: &str, signer: &str, claims: &Value) -> String {
    let input = unsigned(json!({"alg": "RS256", "kid": kid}), claims);
    format!(
        "{input}.{}",
        URL_SAFE_NO_PAD.encode(format!("signed-by-{signer}"))
    )
}

#[test]
fn an_hs256_token_signed_with_the_secret_names_its_user() {
    let cache = RefCell::default();
    let keys = Provider::with(&[]);
    let token = hs256(&claims(), SECRET);
    let user = block_on(verify(&config(&[Alg::Hs256]), &token, 1_000, &cache, &keys)).unwrap();
    assert_eq!(user.subject, "u1");
    let forged = hs256(&claims(), "another-secret-of-at-least-32-bytes!!");
    let refused = block_on(verify(
        &config(&[Alg::Hs256]),
        &forged,
        1_000,
        &cache,
        &keys,
    ));
    assert_eq!(refused, Err(IdentityError::BadSignature));
    let expired = block_on(verify(&config(&[Alg::Hs256]), &token, 2_060, &cache, &keys));
    assert_eq!(expired, Err(IdentityError::Expired));
    assert_eq!(keys.fetches.get(), 0, "a secret needs no key set");
}

#[test]
fn the_algorithm_is_the_configurations_never_the_tokens_alone() {
    let cache = RefCell::default();
    let keys = Provider::with(&["k1"]);
    let rs_only = config(&[Alg::Rs256]);
    let refused = |token: &str| block_on(verify(&rs_only, token, 1_000, &cache, &keys));
    // `none`, unsigned.
    let none = format!("{}.", unsigned(json!({"alg": "none"}), &claims()));
    assert_eq!(refused(&none), Err(IdentityError::AlgorithmNotAllowed));
    // HS256 keyed with what an attacker knows (the public key, or the secret of a
    // deployment that also had one): not accepted where only RS256 is.
    assert_eq!(
        refused(&hs256(&claims(), SECRET)),
        Err(IdentityError::AlgorithmNotAllowed)
    );
    let es = format!(
        "{}.c2ln",
        unsigned(json!({"alg": "ES256", "kid": "k1"}), &claims())
    );
    assert_eq!(refused(&es), Err(IdentityError::AlgorithmNotAllowed));
    // And an RS256 token is not checked with the secret where only HS256 is.
    let hs_only = config(&[Alg::Hs256]);
    let rs = rs256("k1", "k1", &claims());
    let crossed = block_on(verify(&hs_only, &rs, 1_000, &cache, &keys));
    assert_eq!(crossed, Err(IdentityError::AlgorithmNotAllowed));
    assert!(refused(&rs).is_ok());
}

#[test]
fn a_new_key_id_fetches_the_set_again_once_it_is_30_s_old() {
    let cache = RefCell::default();
    let keys = Provider::with(&["k1"]);
    let c = config(&[Alg::Rs256]);
    let at = |token: &str, now| block_on(verify(&c, token, now, &cache, &keys));
    assert!(at(&rs256("k1", "k1", &claims()), 1_000).is_ok());
    assert!(at(&rs256("k1", "k1", &claims()), 1_001).is_ok());
    assert_eq!(keys.fetches.get(), 1, "fetched once, then kept");
    // The provider rotates to k2; a token of k2 10 s later is refused without a fetch.
    *keys.set.borrow_mut() = json!({"keys": [{"kty": "RSA", "kid": "k2", "n": "n", "e": "AQAB"}]});
    let rotated = rs256("k2", "k2", &claims());
    assert_eq!(at(&rotated, 1_010), Err(IdentityError::KeyUnknown));
    assert_eq!(keys.fetches.get(), 1);
    // 30 s after the fetch, it fetches again and finds k2.
    assert!(at(&rotated, 1_030).is_ok());
    assert_eq!(keys.fetches.get(), 2);
    // A signature by another key does not hold.
    assert_eq!(
        at(&rs256("k2", "k1", &claims()), 1_031),
        Err(IdentityError::BadSignature)
    );
}

#[test]
fn keys_that_cannot_be_had_are_an_outage_not_a_bad_token() {
    let cache = RefCell::default();
    let keys = Provider::with(&["k1"]);
    keys.down.set(true);
    let c = config(&[Alg::Rs256]);
    let failed = block_on(verify(
        &c,
        &rs256("k1", "k1", &claims()),
        1_000,
        &cache,
        &keys,
    ));
    let error = failed.unwrap_err();
    assert_eq!(
        (
            error.code(),
            matches!(error, IdentityError::KeysUnavailable(_))
        ),
        ("auth_unavailable", true)
    );
    assert_eq!(IdentityError::Expired.code(), "unauthorized");
}

#[test]
fn the_configuration_is_whole_or_refused_with_what_is_missing() {
    let vars = |pairs: &[(&str, &str)]| {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        JwtConfig::from_vars(&move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        })
    };
    assert_eq!(vars(&[]), Ok(None), "no issuer: no JWTs");
    let base = [
        ("JWT_ISSUER", "https://id.example"),
        ("JWT_AUDIENCE", "helix"),
        ("JWT_ALGORITHMS", "RS256, ES256"),
        ("JWT_JWKS_URL", "https://id.example/jwks"),
        ("JWT_TENANT_CLAIM", "org_id"),
    ];
    let whole = vars(&base).unwrap().unwrap();
    assert_eq!(whole.algorithms, [Alg::Rs256, Alg::Es256]);
    assert_eq!(
        (whole.leeway_secs, whole.tenant_claim.as_deref()),
        (60, Some("org_id"))
    );
    assert!(
        whole.tenant_sharing,
        "a tenant's users share its sessions by default"
    );
    let with = |k: &'static str, v: &'static str| {
        let mut all: Vec<(&str, &str)> = base.iter().filter(|(n, _)| *n != k).copied().collect();
        all.push((k, v));
        vars(&all)
    };
    for (k, v, says) in [
        ("JWT_ALGORITHMS", "none", "none is not one of"),
        ("JWT_ALGORITHMS", "RS256,HS256", "HS256 needs JWT_SECRET"),
        ("JWT_AUDIENCE", "", "JWT_AUDIENCE is needed"),
        ("JWT_JWKS_URL", "http://id.example/jwks", "must be https://"),
        ("JWT_JWKS_URL", "", "need JWT_JWKS_URL"),
        ("JWT_LEEWAY_SECS", "3600", "JWT_LEEWAY_SECS must be"),
        (
            "JWT_TENANT_SHARING",
            "yes",
            "JWT_TENANT_SHARING must be true or false",
        ),
    ] {
        let error = with(k, v).unwrap_err();
        assert!(error.contains(says), "{k}={v}: {error}");
    }
    assert!(
        with("JWT_JWKS_URL", "http://127.0.0.1:9000/jwks").is_ok(),
        "loopback for local runs"
    );
    // Every variable read is one the platform reads for it.
    let read = std::cell::RefCell::new(Vec::new());
    let _ = JwtConfig::from_vars(&|name| {
        read.borrow_mut().push(name.to_string());
        base.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.to_string())
    });
    for name in read.borrow().iter() {
        assert!(
            JwtConfig::VARS.contains(&name.as_str()),
            "{name} is not in VARS"
        );
    }
    let apart = with("JWT_TENANT_SHARING", "false").unwrap().unwrap();
    assert!(!apart.tenant_sharing);
    let short = vars(&[
        ("JWT_ISSUER", "i"),
        ("JWT_AUDIENCE", "a"),
        ("JWT_ALGORITHMS", "HS256"),
        ("JWT_SECRET", "short"),
    ]);
    assert!(short.unwrap_err().contains("at least 32 bytes"));
    assert!(!format!("{whole:?}").contains("secret-value"));
}
