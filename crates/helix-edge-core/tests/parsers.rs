//! Property tests for every parser of outside input (proptest): on any input none
//! panics and each answers in bounded time; where a format has a round trip (a time, a
//! `traceparent`, a stream position, a session token, a state reference), what is
//! written is read back as it was. Tokens, key sets, schemas and their values, cron
//! patterns and `every`, `traceparent`, `Last-Event-ID`, session tokens and the plans'
//! references and conditions. `PROPTEST_CASES` sets the cases per property (default
//! 1024).

#![cfg(not(target_arch = "wasm32"))] // proptest is a native dev-dependency.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

use helix_edge_core::api::StreamQuery;
use helix_edge_core::auth::{session_token, verify_session_token};
use helix_edge_core::memory::reference;
use helix_edge_core::memory::when::Condition;
use helix_edge_core::schedule::ScheduleBody;
use helix_edge_core::schedule::civil::parse_rfc3339;
use helix_edge_core::schedule::when::{format_time, parse_cron, parse_time};
use helix_edge_core::trace::TraceContext;
use helix_edge_core::{identity, schema};
use proptest::prelude::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1024);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Any JSON, biased towards what schemas and plans are made of.
fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "(object|string|integer|number|array|boolean|null|#/\\$defs/[a-z]|\\$state[.a-z0-9\\[\\]]{0,8}|[a-z]{0,6})"
            .prop_map(Value::from),
    ];
    let key = prop_oneof![
        Just("type".to_string()),
        Just("anyOf".into()),
        Just("oneOf".into()),
        Just("allOf".into()),
        Just("$ref".into()),
        Just("$defs".into()),
        Just("properties".into()),
        Just("items".into()),
        Just("required".into()),
        Just("enum".into()),
        Just("const".into()),
        Just("minimum".into()),
        Just("maxLength".into()),
        Just("additionalProperties".into()),
        "[a-z]{1,4}",
    ];
    leaf.prop_recursive(5, 96, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(key.clone(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn b64url(max: usize) -> impl Strategy<Value = String> {
    proptest::string::string_regex(&format!("[A-Za-z0-9_-]{{0,{max}}}")).unwrap()
}

/// Runs `f`, failing the property when it takes more than a second.
fn bounded<T>(f: impl FnOnce() -> T) -> Result<T, TestCaseError> {
    let started = Instant::now();
    let out = f();
    let took = started.elapsed();
    prop_assert!(took < Duration::from_secs(1), "took {took:?}");
    Ok(out)
}

/// [`bounded`] for a parser whose answer (read or refused) does not matter here.
fn ends<T>(f: impl FnOnce() -> T) -> Result<(), TestCaseError> {
    bounded(f).map(drop)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn tokens_of_any_text_are_refused_or_read(token in ".{0,400}") {
        ends(|| identity::parse(&token))?;
    }

    #[test]
    fn tokens_of_three_base64url_parts_are_refused_or_read(
        header in b64url(120), claims in b64url(200), signature in b64url(90),
    ) {
        ends(|| identity::parse(&format!("{header}.{claims}.{signature}")))?;
    }

    #[test]
    fn tokens_of_json_headers_and_claims_are_refused_or_read(header in json(), claims in json()) {
        use base64::Engine;
        let enc = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
        ends(|| identity::parse(&format!("{}.{}.c2ln", enc(&header), enc(&claims))))?;
    }

    #[test]
    fn key_sets_of_any_bytes_or_json_are_refused_or_read(
        bytes in prop::collection::vec(any::<u8>(), 0..400), key in json(),
    ) {
        ends(|| identity::parse_set(&bytes))?;
        let set = serde_json::to_vec(&json!({ "keys": [key] })).unwrap();
        ends(|| identity::parse_set(&set))?;
    }

    #[test]
    fn a_schema_check_of_any_schema_and_value_ends_in_bounded_time(schema in json(), value in json()) {
        ends(|| schema::validate(&schema, &value))?;
    }

    #[test]
    fn cron_patterns_and_zones_are_refused_or_read(
        pattern in "[0-9*/,\\- A-Za-z?LW#]{0,40}", zone in "(UTC|Europe/Paris|[A-Za-z/_+-]{0,20})",
    ) {
        if let Ok(cron) = bounded(|| parse_cron(&pattern, &zone))? {
            ends(|| cron.next_civil(0))?;
        }
    }

    #[test]
    fn schedules_of_any_body_are_refused_or_read(body in json(), every in any::<i64>()) {
        for body in [body, json!({ "every": every, "message": "m" })] {
            if let Ok(parsed) = serde_json::from_value::<ScheduleBody>(body) {
                ends(|| parsed.into_schedule("sch".into(), 1_800_000_000_000))?;
            }
        }
    }

    #[test]
    fn times_are_refused_or_read_and_round_trip(text in ".{0,40}", ms in 0u64..253_402_300_799_999) {
        ends(|| parse_rfc3339(&text))?;
        let written = format_time(ms);
        prop_assert_eq!(parse_time("at", &written).unwrap(), ms, "{}", written);
    }

    #[test]
    fn traceparents_are_refused_or_read_and_round_trip(
        text in ".{0,80}", trace in "[0-9a-f]{32}", span in "[0-9a-f]{16}",
    ) {
        ends(|| TraceContext::parse(&text))?;
        if let Some(read) = TraceContext::parse(&format!("00-{trace}-{span}-01")) {
            prop_assert_eq!((&read.trace_id, &read.span_id), (&trace, &span));
            prop_assert_eq!(TraceContext::parse(&read.header()), Some(read));
        } else {
            prop_assert!(trace.bytes().all(|b| b == b'0') || span.bytes().all(|b| b == b'0'));
        }
    }

    #[test]
    fn stream_positions_are_refused_or_read_and_round_trip(text in ".{0,40}", n in any::<u64>()) {
        ends(|| StreamQuery::parse(Some(&text), &[]))?;
        let read = StreamQuery::parse(Some(&n.to_string()), &[]).unwrap();
        prop_assert_eq!(read.after, n);
    }

    #[test]
    fn session_tokens_are_refused_or_read_and_round_trip(
        text in ".{0,200}", id in "[A-Za-z0-9._-]{1,128}", expiry in 1_000u64..4_000_000_000,
    ) {
        prop_assert_eq!(bounded(|| verify_session_token("key", &text, 0))?, None::<String>);
        let token = session_token("key", &id, expiry).unwrap();
        prop_assert_eq!(verify_session_token("key", &token, expiry - 1), Some(id.clone()));
        prop_assert_eq!(verify_session_token("other", &token, expiry - 1), None::<String>);
        prop_assert_eq!(verify_session_token("key", &token, expiry + 1), None::<String>);
    }

    #[test]
    fn references_and_conditions_are_refused_or_read_and_round_trip(
        text in ".{0,60}", keys in prop::collection::vec("[a-z_]{1,8}|[0-9]{1,3}", 1..6),
    ) {
        ends(|| reference::parse(&text))?;
        ends(|| reference::parse_item(&text))?;
        ends(|| Condition::parse(&text))?;
        let written: String = keys
            .iter()
            .map(|k| if k.bytes().all(|b| b.is_ascii_digit()) { format!("[{k}]") } else { format!(".{k}") })
            .collect();
        let pointer: String = keys.iter().map(|k| format!("/{k}")).collect();
        prop_assert_eq!(reference::parse(&format!("$state{written}")), Some(Ok(pointer)));
    }
}
