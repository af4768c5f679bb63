//! Kept spans (as [`crate::telemetry::Span`] serializes them) as an OTLP
//! `ExportTraceServiceRequest`, in protobuf: the wire types are opentelemetry-proto's
//! (prost's messages, no gRPC), one resource (`service.name`) and one scope.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{
    AnyValue, ArrayValue, InstrumentationScope, KeyValue, any_value,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{
    ResourceSpans, ScopeSpans, Span, Status, span, status,
};
use prost::Message;
use serde_json::Value;

/// The scope (and SDK) spans are reported under.
const SCOPE: &str = "helix-edge";

/// `spans` as the body of an OTLP/HTTP protobuf export for service `service`; spans
/// that are not as kept spans are (no ids) are left out.
pub fn encode(spans: &[Value], service: &str) -> Vec<u8> {
    let version = env!("CARGO_PKG_VERSION");
    let resource = Resource {
        attributes: vec![
            text("service.name", service),
            text("telemetry.sdk.name", SCOPE),
            text("telemetry.sdk.language", "rust"),
            text("telemetry.sdk.version", version),
        ],
        ..Default::default()
    };
    let request = ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(resource),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: SCOPE.into(),
                    version: version.into(),
                    ..Default::default()
                }),
                spans: spans.iter().filter_map(span_of).collect(),
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
    };
    request.encode_to_vec()
}

fn text(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.into())),
        }),
        ..Default::default()
    }
}

/// Hex digits as bytes (`None` for anything else).
fn bytes(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

fn nanos(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0).saturating_mul(1_000_000)
}

fn any(v: &Value) -> Option<AnyValue> {
    let value = match v {
        Value::String(s) => any_value::Value::StringValue(s.clone()),
        Value::Bool(b) => any_value::Value::BoolValue(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => any_value::Value::IntValue(i),
            None => any_value::Value::DoubleValue(n.as_f64()?),
        },
        Value::Array(items) => any_value::Value::ArrayValue(ArrayValue {
            values: items.iter().filter_map(any).collect(),
        }),
        _ => return None,
    };
    Some(AnyValue { value: Some(value) })
}

fn span_of(v: &Value) -> Option<Span> {
    let attributes = v["attributes"].as_object().map_or(Vec::new(), |attrs| {
        attrs
            .iter()
            .filter_map(|(key, value)| {
                Some(KeyValue {
                    key: key.clone(),
                    value: Some(any(value)?),
                    ..Default::default()
                })
            })
            .collect()
    });
    let links = v["links"].as_array().map_or(Vec::new(), |links| {
        links
            .iter()
            .filter_map(|l| {
                Some(span::Link {
                    trace_id: bytes(l["traceId"].as_str()?)?,
                    span_id: bytes(l["spanId"].as_str()?)?,
                    ..Default::default()
                })
            })
            .collect()
    });
    let status = match v["error"].as_str() {
        Some(message) => Status {
            code: status::StatusCode::Error as i32,
            message: message.into(),
        },
        None => Status::default(),
    };
    let kind = match v["kind"].as_str() {
        Some("client") => span::SpanKind::Client,
        _ => span::SpanKind::Internal,
    };
    Some(Span {
        trace_id: bytes(v["traceId"].as_str()?)?,
        span_id: bytes(v["spanId"].as_str()?)?,
        parent_span_id: v["parentSpanId"]
            .as_str()
            .and_then(bytes)
            .unwrap_or_default(),
        name: v["name"].as_str()?.into(),
        kind: kind as i32,
        start_time_unix_nano: nanos(&v["startMs"]),
        end_time_unix_nano: nanos(&v["endMs"]),
        attributes,
        links,
        status: Some(status),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kept_spans_encode_as_otlp_protobuf() {
        let chat = json!({
            "traceId": "4bf92f3577b34da6a3ce929d0e0e4736", "spanId": "00f067aa0ba902b7",
            "parentSpanId": "b7ad6b7169203331", "name": "chat gpt-4o", "kind": "client",
            "startMs": 1_700_000_000_000u64, "endMs": 1_700_000_000_250u64,
            "attributes": { "gen_ai.usage.input_tokens": 11, "gen_ai.system": "openai",
                "gen_ai.response.finish_reasons": ["stop"], "helix.flag": true },
            "links": [{ "traceId": "4bf92f3577b34da6a3ce929d0e0e4736", "spanId": "b7ad6b7169203331" }],
            "error": "rate limited"
        });
        let body = encode(&[chat, json!({"name": "no ids"})], "my-agents");
        let decoded = ExportTraceServiceRequest::decode(body.as_slice()).unwrap();
        let resource = &decoded.resource_spans[0];
        let service = &resource.resource.as_ref().unwrap().attributes[0];
        assert_eq!(service.key, "service.name");
        let spans = &resource.scope_spans[0].spans;
        assert_eq!(spans.len(), 1, "a span without ids is left out");
        let s = &spans[0];
        assert_eq!(
            s.trace_id,
            bytes("4bf92f3577b34da6a3ce929d0e0e4736").unwrap()
        );
        assert_eq!(
            s.parent_span_id,
            vec![0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31]
        );
        assert_eq!(
            (s.name.as_str(), s.kind),
            ("chat gpt-4o", span::SpanKind::Client as i32)
        );
        assert_eq!(s.end_time_unix_nano - s.start_time_unix_nano, 250_000_000);
        let tokens = s
            .attributes
            .iter()
            .find(|a| a.key == "gen_ai.usage.input_tokens");
        let tokens = tokens.and_then(|a| a.value.clone()).and_then(|v| v.value);
        assert_eq!(tokens, Some(any_value::Value::IntValue(11)));
        assert_eq!(s.links.len(), 1);
        let status = s.status.as_ref().unwrap();
        assert_eq!(status.code, status::StatusCode::Error as i32);
        assert_eq!(bytes("0g"), None);
    }
}
