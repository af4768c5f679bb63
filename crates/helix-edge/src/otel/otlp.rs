//! Kept spans (as [`crate::telemetry::Span`] serializes them) as an OTLP
//! `ExportTraceServiceRequest` in OTLP/HTTP's JSON encoding (the protobuf messages'
//! JSON mapping, with trace and span ids as hex, enums as numbers and 64-bit integers as
//! decimal strings): one resource (`service.name`) and one scope. JSON over the
//! serde_json every build has, rather than protobuf through prost and the generated
//! messages, which cost the bundle more (README "What it weighs").

use serde_json::{Map, Value, json};

/// The scope (and SDK) spans are reported under.
const SCOPE: &str = "helix-edge";

/// The content type of what [`encode`] writes.
pub const CONTENT_TYPE: &str = "application/json";

/// OTLP's `SPAN_KIND_INTERNAL` and `SPAN_KIND_CLIENT`.
const INTERNAL: u8 = 1;
const CLIENT: u8 = 3;
/// OTLP's `STATUS_CODE_ERROR`.
const ERROR: u8 = 2;

/// `spans` as the body of an OTLP/HTTP JSON export for service `service`; spans that
/// are not as kept spans are (no ids) are left out.
pub fn encode(spans: &[Value], service: &str) -> Vec<u8> {
    let version = env!("CARGO_PKG_VERSION");
    let resource = [
        ("service.name", service),
        ("telemetry.sdk.name", SCOPE),
        ("telemetry.sdk.language", "rust"),
        ("telemetry.sdk.version", version),
    ];
    let attributes: Vec<Value> = resource
        .iter()
        .map(|(key, value)| json!({ "key": key, "value": { "stringValue": value } }))
        .collect();
    let request = json!({
        "resourceSpans": [{
            "resource": { "attributes": attributes },
            "scopeSpans": [{
                "scope": { "name": SCOPE, "version": version },
                "spans": spans.iter().filter_map(span_of).collect::<Vec<_>>(),
            }],
        }],
    });
    request.to_string().into_bytes()
}

/// An id as OTLP/JSON writes it (lower-case hex), if `v` is one.
fn id(v: &Value, len: usize) -> Option<Value> {
    let hex = v.as_str()?;
    let valid = hex.len() == len && hex.bytes().all(|b| b.is_ascii_hexdigit());
    valid.then(|| Value::String(hex.to_ascii_lowercase()))
}

/// Milliseconds as OTLP's nanoseconds (`fixed64`: a decimal string).
fn nanos(v: &Value) -> Value {
    Value::String(
        v.as_u64()
            .unwrap_or(0)
            .saturating_mul(1_000_000)
            .to_string(),
    )
}

/// An attribute's value as an `AnyValue`.
fn any(v: &Value) -> Option<Value> {
    Some(match v {
        Value::String(s) => json!({ "stringValue": s }),
        Value::Bool(b) => json!({ "boolValue": b }),
        Value::Number(n) => match n.as_i64() {
            Some(i) => json!({ "intValue": i.to_string() }),
            None => json!({ "doubleValue": n.as_f64()? }),
        },
        Value::Array(items) => {
            json!({ "arrayValue": { "values": items.iter().filter_map(any).collect::<Vec<_>>() } })
        }
        _ => return None,
    })
}

fn span_of(v: &Value) -> Option<Value> {
    let attributes: Vec<Value> = v["attributes"].as_object().map_or(Vec::new(), |attrs| {
        attrs
            .iter()
            .filter_map(|(key, value)| Some(json!({ "key": key, "value": any(value)? })))
            .collect()
    });
    let links: Vec<Value> = v["links"].as_array().map_or(Vec::new(), |links| {
        let link = |l: &Value| {
            Some(json!({ "traceId": id(&l["traceId"], 32)?, "spanId": id(&l["spanId"], 16)? }))
        };
        links.iter().filter_map(link).collect()
    });
    let kind = match v["kind"].as_str() {
        Some("client") => CLIENT,
        _ => INTERNAL,
    };
    let mut span = Map::new();
    span.insert("traceId".into(), id(&v["traceId"], 32)?);
    span.insert("spanId".into(), id(&v["spanId"], 16)?);
    if let Some(parent) = id(&v["parentSpanId"], 16) {
        span.insert("parentSpanId".into(), parent);
    }
    span.insert("name".into(), Value::String(v["name"].as_str()?.into()));
    span.insert("kind".into(), json!(kind));
    span.insert("startTimeUnixNano".into(), nanos(&v["startMs"]));
    span.insert("endTimeUnixNano".into(), nanos(&v["endMs"]));
    span.insert("attributes".into(), Value::Array(attributes));
    if !links.is_empty() {
        span.insert("links".into(), Value::Array(links));
    }
    if let Some(message) = v["error"].as_str() {
        span.insert(
            "status".into(),
            json!({ "code": ERROR, "message": message }),
        );
    }
    Some(Value::Object(span))
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::any_value;
    use opentelemetry_proto::tonic::trace::v1::{span, status};

    #[test]
    fn kept_spans_encode_as_otlp_json_that_the_official_types_read() {
        let chat = json!({
            "traceId": "4bf92f3577b34da6a3ce929d0e0e4736", "spanId": "00f067aa0ba902b7",
            "parentSpanId": "b7ad6b7169203331", "name": "chat gpt-4o", "kind": "client",
            "startMs": 1_700_000_000_000u64, "endMs": 1_700_000_000_250u64,
            "attributes": { "gen_ai.usage.input_tokens": 11, "gen_ai.system": "openai",
                "gen_ai.response.finish_reasons": ["stop"], "helix.flag": true, "helix.ratio": 0.5 },
            "links": [{ "traceId": "4bf92f3577b34da6a3ce929d0e0e4736", "spanId": "b7ad6b7169203331" }],
            "error": "rate limited"
        });
        let root = json!({
            "traceId": "4bf92f3577b34da6a3ce929d0e0e4736", "spanId": "b7ad6b7169203331",
            "name": "invoke_agent assistant", "startMs": 1, "endMs": 2, "attributes": {}
        });
        let body = encode(
            &[
                chat,
                root,
                json!({"name": "no ids"}),
                json!({"traceId": "xyz", "spanId": "00f067aa0ba902b7", "name": "bad id"}),
            ],
            "my-agents",
        );
        // opentelemetry-proto's own reading of OTLP/JSON (hex ids, string integers).
        let decoded: ExportTraceServiceRequest = serde_json::from_slice(&body).unwrap();
        let resource = &decoded.resource_spans[0];
        let service = &resource.resource.as_ref().unwrap().attributes[0];
        assert_eq!(service.key, "service.name");
        let spans = &resource.scope_spans[0].spans;
        assert_eq!(spans.len(), 2, "spans without valid ids are left out");
        let s = &spans[0];
        assert_eq!(hex(&s.trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(
            s.parent_span_id,
            vec![0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31]
        );
        assert_eq!(
            (s.name.as_str(), s.kind),
            ("chat gpt-4o", span::SpanKind::Client as i32)
        );
        assert_eq!(s.end_time_unix_nano - s.start_time_unix_nano, 250_000_000);
        let value = |key: &str| {
            let found = s.attributes.iter().find(|a| a.key == key);
            found.and_then(|a| a.value.clone()).and_then(|v| v.value)
        };
        assert_eq!(
            value("gen_ai.usage.input_tokens"),
            Some(any_value::Value::IntValue(11))
        );
        assert_eq!(value("helix.flag"), Some(any_value::Value::BoolValue(true)));
        assert_eq!(
            value("helix.ratio"),
            Some(any_value::Value::DoubleValue(0.5))
        );
        assert!(matches!(
            value("gen_ai.response.finish_reasons"),
            Some(any_value::Value::ArrayValue(_))
        ));
        assert_eq!(s.links.len(), 1);
        let status = s.status.as_ref().unwrap();
        assert_eq!(status.code, status::StatusCode::Error as i32);
        let root = &spans[1];
        assert!(root.parent_span_id.is_empty());
        assert_eq!(root.kind, span::SpanKind::Internal as i32);
        assert_eq!(root.status.as_ref().map_or(0, |s| s.code), 0, "unset");
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }
}
