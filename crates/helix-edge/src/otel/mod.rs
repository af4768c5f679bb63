//! OpenTelemetry traces of runs (feature `otel`): the core's spans
//! ([`crate::telemetry`]), kept in each session's SQLite and exported over OTLP/HTTP
//! (JSON, [`otlp`]) after each slice of work, off the request's path — batched,
//! retried with backoff, and dropped with a counted warning rather than ever failing or
//! delaying a run.
//!
//! Configured by the deployment's vars and secrets, as OpenTelemetry's SDKs are:
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the whole URL) or `OTEL_EXPORTER_OTLP_ENDPOINT`
//! (`/v1/traces` is added), `OTEL_EXPORTER_OTLP_HEADERS` (`key=value,…`, a secret for
//! a backend's key), `OTEL_SERVICE_NAME` (`helix-edge`), and
//! `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true` to record prompts,
//! arguments and results (off by default). Without an endpoint, spans are only kept.

#[cfg(target_arch = "wasm32")]
pub(crate) mod export;
pub mod otlp;

use crate::api::percent_decode;

/// Where spans go, and as which service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The traces URL.
    pub url: String,
    /// Headers sent with each export (a backend's key).
    pub headers: Vec<(String, String)>,
    /// `service.name`.
    pub service: String,
}

impl Endpoint {
    /// The endpoint the deployment configures (`var` reads a var or secret), if any; or
    /// why it is refused: headers (a backend's key) to a plain `http://` URL of a host
    /// that is not this machine would travel in the clear.
    pub fn configured(var: impl Fn(&str) -> Option<String>) -> Option<Result<Self, String>> {
        let url = match var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
            Some(url) => url,
            None => {
                let base = var("OTEL_EXPORTER_OTLP_ENDPOINT")?;
                format!("{}/v1/traces", base.trim_end_matches('/'))
            }
        };
        let headers = headers_of(&var("OTEL_EXPORTER_OTLP_HEADERS").unwrap_or_default());
        if !headers.is_empty() && !crate::provider::secure_url(&url) {
            return Some(Err(format!(
                "the OTLP endpoint {url} is plain http to a host that is not this machine: \
                 OTEL_EXPORTER_OTLP_HEADERS would travel in the clear (use https); spans are kept, not sent"
            )));
        }
        Some(Ok(Self {
            url,
            headers,
            service: var("OTEL_SERVICE_NAME").unwrap_or_else(|| "helix-edge".into()),
        }))
    }
}

/// Whether prompts, arguments and results are recorded.
pub fn captures_content(var: impl Fn(&str) -> Option<String>) -> bool {
    var("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

/// `key=value` pairs, comma-separated (OpenTelemetry's `OTEL_EXPORTER_OTLP_HEADERS`);
/// `%XX` escapes in values are decoded, malformed pairs left out.
fn headers_of(spec: &str) -> Vec<(String, String)> {
    spec.split(',')
        .filter_map(|pair| {
            let (key, value) = pair.split_once('=')?;
            let key = key.trim();
            (!key.is_empty()).then(|| (key.to_string(), percent_decode(value.trim())))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars<'a>(set: &'a [(&str, &str)]) -> impl Fn(&str) -> Option<String> + 'a {
        |name| {
            set.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn the_endpoint_is_read_as_opentelemetrys_sdks_read_it() {
        assert_eq!(Endpoint::configured(vars(&[])), None);
        // Headers go only where they travel encrypted (or to this machine).
        let clear = Endpoint::configured(vars(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel.example.com"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=secret"),
        ]));
        assert!(matches!(clear, Some(Err(e)) if e.contains("in the clear")));
        let local = Endpoint::configured(vars(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=secret"),
        ]));
        assert!(matches!(local, Some(Ok(_))));
        let plain = Endpoint::configured(vars(&[(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "http://otel.example.com",
        )]));
        assert!(
            matches!(plain, Some(Ok(_))),
            "no credentials, nothing to protect"
        );
        let base = Endpoint::configured(vars(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://otel.example.com/"),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "x-api-key=a%3Db, bad,=x,dataset=agents",
            ),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(base.url, "https://otel.example.com/v1/traces");
        assert_eq!(
            base.headers,
            [
                ("x-api-key".to_string(), "a=b".to_string()),
                ("dataset".to_string(), "agents".to_string())
            ]
        );
        assert_eq!(base.service, "helix-edge");
        let whole = Endpoint::configured(vars(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://ignored"),
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "https://t.example.com/traces",
            ),
            ("OTEL_SERVICE_NAME", "support-agents"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(
            (whole.url.as_str(), whole.service.as_str()),
            ("https://t.example.com/traces", "support-agents")
        );
        let on = [("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "TRUE")];
        assert!(captures_content(vars(&on)));
        assert!(!captures_content(vars(&[])));
    }
}
