//! Users' tokens checked with the runtime's WebCrypto, in wasm under Node (whose
//! `crypto.subtle` is the same Web Crypto API as workerd's): keys generated here for
//! RS256, ES256 and EdDSA, tokens signed with them, then checked by
//! `helix_edge::identity::verify` through `WebCryptoKeys`.

#![cfg(all(target_arch = "wasm32", feature = "users"))]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

use futures::future::LocalBoxFuture;
use helix_edge::identity::{Alg, IdentityError, Jwk, JwtConfig, KeyCache, Keys, User, verify};
use helix_edge::identity_keys::WebCryptoKeys;
use serde_json::{Value, json};
use std::cell::RefCell;
use wasm_bindgen::JsValue;
use wasm_bindgen_test::wasm_bindgen_test;
use worker::wasm_bindgen_futures::JsFuture;

fn subtle() -> JsValue {
    let crypto = js_sys::Reflect::get(&js_sys::global(), &"crypto".into()).unwrap();
    js_sys::Reflect::get(&crypto, &"subtle".into()).unwrap()
}

async fn call(method: &str, args: &[JsValue]) -> JsValue {
    let subtle = subtle();
    let f: js_sys::Function = js_sys::Reflect::get(&subtle, &method.into())
        .unwrap()
        .into();
    let args: js_sys::Array = args.iter().collect();
    let promise: js_sys::Promise = f.apply(&subtle, &args).unwrap().into();
    JsFuture::from(promise).await.unwrap()
}

fn js(value: Value) -> JsValue {
    js_sys::JSON::parse(&value.to_string()).unwrap()
}

/// A key pair for `alg`: what signs, and its public JWK (with `kid`).
async fn key_pair(alg: Alg, kid: &str) -> (JsValue, Value, Value) {
    let (generate, sign) = match alg {
        Alg::Rs256 => (
            json!({"name": "RSASSA-PKCS1-v1_5", "modulusLength": 2048,
                   "publicExponent": [1, 0, 1], "hash": "SHA-256"}),
            json!({"name": "RSASSA-PKCS1-v1_5"}),
        ),
        Alg::Es256 => (
            json!({"name": "ECDSA", "namedCurve": "P-256"}),
            json!({"name": "ECDSA", "hash": "SHA-256"}),
        ),
        _ => (json!({"name": "Ed25519"}), json!({"name": "Ed25519"})),
    };
    let mut generate = js(generate);
    if alg == Alg::Rs256 {
        // publicExponent must be a Uint8Array.
        let exponent = js_sys::Uint8Array::from(&[1u8, 0, 1][..]);
        js_sys::Reflect::set(&generate, &"publicExponent".into(), &exponent).unwrap();
        generate = generate.clone();
    }
    let usages = js(json!(["sign", "verify"]));
    let pair = call("generateKey", &[generate, true.into(), usages]).await;
    let private = js_sys::Reflect::get(&pair, &"privateKey".into()).unwrap();
    let public = js_sys::Reflect::get(&pair, &"publicKey".into()).unwrap();
    let exported = call("exportKey", &["jwk".into(), public]).await;
    let mut jwk: Value =
        serde_json::from_str(&String::from(js_sys::JSON::stringify(&exported).unwrap())).unwrap();
    jwk["kid"] = json!(kid);
    (private, jwk, sign)
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

async fn token(alg: Alg, kid: &str, private: &JsValue, sign: &Value, claims: &Value) -> String {
    let header = json!({"alg": alg.name(), "kid": kid, "typ": "JWT"});
    let input = format!(
        "{}.{}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes())
    );
    let data = js_sys::Uint8Array::from(input.as_bytes());
    let signature = call("sign", &[js(sign.clone()), private.clone(), data.into()]).await;
    let signature = js_sys::Uint8Array::new(&signature).to_vec();
    format!("{input}.{}", b64(&signature))
}

/// The provider's key set served from memory; signatures checked by WebCrypto.
struct Provider(Value);

impl Keys for Provider {
    fn fetch<'a>(&'a self, _url: &'a str) -> LocalBoxFuture<'a, Result<Vec<u8>, String>> {
        let body = self.0.to_string().into_bytes();
        Box::pin(async move { Ok(body) })
    }

    fn verify<'a>(
        &'a self,
        alg: Alg,
        key: &'a Jwk,
        input: &'a [u8],
        signature: &'a [u8],
    ) -> LocalBoxFuture<'a, Result<bool, String>> {
        WebCryptoKeys.verify(alg, key, input, signature)
    }
}

fn config(algorithms: &[Alg]) -> JwtConfig {
    JwtConfig {
        issuer: "https://id.example".into(),
        audience: "helix".into(),
        algorithms: algorithms.to_vec(),
        jwks_url: Some("https://id.example/jwks".into()),
        secret: None,
        tenant_claim: Some("org_id".into()),
        roles_claim: None,
        tenant_sharing: true,
        leeway_secs: 60,
    }
}

#[wasm_bindgen_test]
async fn tokens_signed_with_rs256_es256_and_eddsa_keys_are_checked_by_webcrypto() {
    let claims = json!({"iss": "https://id.example", "aud": "helix", "sub": "ada", "org_id": "acme", "exp": 2_000});
    for alg in [Alg::Rs256, Alg::Es256, Alg::EdDsa] {
        let (private, jwk, sign) = key_pair(alg, "k1").await;
        let (other_private, _, _) = key_pair(alg, "k2").await;
        let provider = Provider(json!({ "keys": [jwk] }));
        let cache = RefCell::new(KeyCache::default());
        let c = config(&[alg]);
        let good = token(alg, "k1", &private, &sign, &claims).await;
        let user = verify(&c, &good, 1_000, &cache, &provider).await;
        assert_eq!(
            user,
            Ok(User {
                subject: "ada".into(),
                tenant: Some("acme".into()),
                roles: vec![]
            }),
            "{alg:?}"
        );
        // Signed by another key under k1's id: the signature does not hold.
        let forged = token(alg, "k1", &other_private, &sign, &claims).await;
        assert_eq!(
            verify(&c, &forged, 1_000, &cache, &provider).await,
            Err(IdentityError::BadSignature),
            "{alg:?}"
        );
        // Its claims changed after signing.
        let (input, signature) = good.rsplit_once('.').unwrap();
        let (header, _) = input.split_once('.').unwrap();
        let more = json!({"iss": "https://id.example", "aud": "helix", "sub": "root", "org_id": "acme", "exp": 2_000});
        let edited = format!("{header}.{}.{signature}", b64(more.to_string().as_bytes()));
        assert_eq!(
            verify(&c, &edited, 1_000, &cache, &provider).await,
            Err(IdentityError::BadSignature),
            "{alg:?}"
        );
    }
}
