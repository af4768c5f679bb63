//! The platform's half of users' tokens (feature `users`): the identity provider's key
//! set fetched over `fetch`, and public-key signatures checked by the runtime's
//! WebCrypto (`crypto.subtle`: RSASSA-PKCS1-v1_5, ECDSA P-256, Ed25519) — no signature
//! code in the bundle. What is checked, and when keys are fetched again, is the core's
//! ([`crate::identity`]).

use crate::identity::{Alg, Jwk, Keys};
use futures::future::LocalBoxFuture;
use worker::js_sys::{self, Function, Promise, Reflect, Uint8Array};
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;

/// The largest key set read (bytes).
const MAX_KEY_SET_BYTES: usize = 64 * 1024;

/// Keys over `fetch` and WebCrypto.
pub struct WebCryptoKeys;

impl Keys for WebCryptoKeys {
    fn fetch<'a>(&'a self, url: &'a str) -> LocalBoxFuture<'a, Result<Vec<u8>, String>> {
        Box::pin(async move {
            let headers = worker::Headers::new();
            let request = crate::outgoing::unredirected(url, "GET", &headers, None)
                .map_err(|e| e.to_string())?;
            let mut response = worker::Fetch::Request(request)
                .send()
                .await
                .map_err(|e| format!("{url}: {e}"))?;
            if response.status_code() != 200 {
                return Err(format!("{url} answered HTTP {}", response.status_code()));
            }
            let body = response.bytes().await.map_err(|e| format!("{url}: {e}"))?;
            if body.len() > MAX_KEY_SET_BYTES {
                return Err(format!(
                    "{url}: the key set is over {MAX_KEY_SET_BYTES} bytes"
                ));
            }
            Ok(body)
        })
    }

    fn verify<'a>(
        &'a self,
        alg: Alg,
        key: &'a Jwk,
        input: &'a [u8],
        signature: &'a [u8],
    ) -> LocalBoxFuture<'a, Result<bool, String>> {
        Box::pin(async move {
            let fail = |what: &str, e: JsValue| format!("{what}: {}", describe(&e));
            let subtle = subtle().ok_or("crypto.subtle is not available")?;
            let (import, check) = algorithms(alg)?;
            let jwk = js_sys::JSON::parse(&key.json.to_string()).map_err(|e| fail("the key", e))?;
            let usages = js_sys::Array::of1(&"verify".into());
            let args = js_sys::Array::of5(&"jwk".into(), &jwk, &import, &false.into(), &usages);
            let imported = call(&subtle, "importKey", &args).map_err(|e| fail("importKey", e))?;
            let imported = JsFuture::from(imported)
                .await
                .map_err(|e| fail("the key's import", e))?;
            let args = js_sys::Array::of4(
                &check,
                &imported,
                &Uint8Array::from(signature),
                &Uint8Array::from(input),
            );
            let checked = call(&subtle, "verify", &args).map_err(|e| fail("verify", e))?;
            let holds = JsFuture::from(checked)
                .await
                .map_err(|e| fail("verify", e))?;
            Ok(holds.as_bool() == Some(true))
        })
    }
}

/// `crypto.subtle` of the global scope.
fn subtle() -> Option<JsValue> {
    let crypto = Reflect::get(&js_sys::global(), &"crypto".into()).ok()?;
    Reflect::get(&crypto, &"subtle".into())
        .ok()
        .filter(|s| s.is_object())
}

/// WebCrypto's parameters for `alg`: to import its key, and to verify with it.
fn algorithms(alg: Alg) -> Result<(JsValue, JsValue), String> {
    let object = |pairs: &[(&str, &str)]| -> JsValue {
        let o = js_sys::Object::new();
        for (k, v) in pairs {
            // Setting a property of a fresh plain object cannot fail.
            let _ = Reflect::set(&o, &(*k).into(), &(*v).into());
        }
        o.into()
    };
    Ok(match alg {
        Alg::Rs256 => (
            object(&[("name", "RSASSA-PKCS1-v1_5"), ("hash", "SHA-256")]),
            object(&[("name", "RSASSA-PKCS1-v1_5")]),
        ),
        Alg::Es256 => (
            object(&[("name", "ECDSA"), ("namedCurve", "P-256")]),
            object(&[("name", "ECDSA"), ("hash", "SHA-256")]),
        ),
        Alg::EdDsa => (
            object(&[("name", "Ed25519")]),
            object(&[("name", "Ed25519")]),
        ),
        Alg::Hs256 => return Err("HS256 is checked with the secret, not a public key".into()),
    })
}

/// Calls `subtle[method](...args)`, which answers a promise.
fn call(subtle: &JsValue, method: &str, args: &js_sys::Array) -> Result<Promise, JsValue> {
    let function: Function = Reflect::get(subtle, &method.into())?.dyn_into()?;
    function.apply(subtle, args)?.dyn_into()
}

/// A thrown value's message.
fn describe(e: &JsValue) -> String {
    e.dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .or_else(|| e.as_string())
        .unwrap_or_else(|| "failed".into())
}
