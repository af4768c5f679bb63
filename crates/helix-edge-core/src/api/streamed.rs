//! An answer given as the run's stream (SPEC §2d, "one request fewer"): a request that
//! starts or continues a run ([`super::Operation::may_stream`]) with
//! `Accept: text/event-stream` is answered with the session's stream from just before
//! the run's first event, as `GET …/stream` would send it, and its JSON answer's fields
//! move to headers.

use serde_json::Value;

/// Whether an `Accept` header asks for an event stream: one of its media ranges is
/// `text/event-stream` (parameters and case aside) with a non-zero quality.
pub fn wants_stream(accept: Option<&str>) -> bool {
    let Some(accept) = accept else { return false };
    accept.split(',').any(|range| {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or_default();
        let refused = parts.any(|p| {
            let p = p.replace(' ', "");
            p.eq_ignore_ascii_case("q=0")
                || p.starts_with("q=0.") && p[4..].bytes().all(|b| b == b'0')
        });
        media.eq_ignore_ascii_case("text/event-stream") && !refused
    })
}

/// The headers that carry a JSON answer's fields when the answer is a stream: each
/// top-level string, number or boolean `fooBar` as `x-helix-foo-bar` (`sessionId`,
/// `runId`, `sessionToken`, a queued message's `queueId` and `position`, …).
pub fn answer_headers(answer: &Value) -> Vec<(String, String)> {
    let Some(fields) = answer.as_object() else {
        return Vec::new();
    };
    let value = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(_) | Value::Bool(_) => Some(v.to_string()),
        _ => None,
    };
    let name = |field: &str| {
        let mut name = String::from("x-helix-");
        for c in field.chars() {
            if c.is_ascii_uppercase() {
                name.push('-');
            }
            name.push(c.to_ascii_lowercase());
        }
        name
    };
    fields
        .iter()
        .filter_map(|(k, v)| Some((name(k), value(v)?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_accept_asks_for_a_stream_only_when_it_names_one_it_takes() {
        for yes in [
            "text/event-stream",
            "Text/Event-Stream",
            "application/json, text/event-stream",
            "text/event-stream;q=0.5, application/json",
            " text/event-stream ; charset=utf-8",
        ] {
            assert!(wants_stream(Some(yes)), "{yes}");
        }
        for no in [
            "application/json",
            "*/*",
            "text/*",
            "text/event-stream;q=0",
            "text/event-stream; q=0.000",
            "text/event-streams",
            "",
        ] {
            assert!(!wants_stream(Some(no)), "{no}");
        }
        assert!(!wants_stream(None));
    }

    #[test]
    fn a_json_answer_moves_to_headers_field_by_field() {
        let answer = json!({
            "sessionId": "s1", "runId": "r1", "status": "active", "sessionToken": null,
            "queued": true, "position": 2, "nested": {"a": 1}
        });
        let mut headers = answer_headers(&answer);
        headers.sort();
        let expected = [
            ("x-helix-position", "2"),
            ("x-helix-queued", "true"),
            ("x-helix-run-id", "r1"),
            ("x-helix-session-id", "s1"),
            ("x-helix-status", "active"),
        ];
        let expected: Vec<_> = expected
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(headers, expected);
        assert!(answer_headers(&json!([1])).is_empty());
    }
}
