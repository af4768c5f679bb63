//! The HTTP a provider call needs from its caller: the request, the response with its
//! body as a stream of byte chunks, and the [`Transport`] that sends one (the Workers
//! `fetch` on the platform, real sockets in native tests) and keeps time.

use crate::error::ProviderError;
use futures::future::LocalBoxFuture;
use std::time::Duration;

/// An outgoing HTTP request.
#[derive(Clone, PartialEq, Eq)]
pub struct HttpRequest {
    /// `POST` (a model's and an MCP server's requests) or `GET` (an event stream
    /// resumed, a metadata document).
    pub method: Method,
    /// Absolute URL.
    pub url: String,
    /// Headers (the key is among them: never log them).
    pub headers: Vec<(String, String)>,
    /// The body (JSON, or a form), empty for a `GET`.
    pub body: String,
}

/// Whether the deployment may send credentials to `url`: `https://`, or `http://` on
/// loopback (an identity provider's keys, an MCP server's authorization).
pub fn secure_url(url: &str) -> bool {
    let (secure, rest) = match (url.strip_prefix("https://"), url.strip_prefix("http://")) {
        (Some(rest), _) => (true, rest),
        (None, Some(rest)) => (false, rest),
        (None, None) => return false,
    };
    // The authority as written: no user part (`http://localhost:@elsewhere/`).
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.is_empty() || authority.contains('@') {
        return false;
    }
    let host = match authority.rsplit_once(':') {
        Some((host, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => authority,
    };
    secure || ["127.0.0.1", "localhost", "[::1]"].contains(&host)
}

/// The methods a request uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// `GET`.
    Get,
    /// `POST`.
    Post,
}

impl Method {
    /// Its name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "GET",
            Self::Post => "POST",
        }
    }
}

impl std::fmt::Debug for HttpRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpRequest")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// Why the transport could not deliver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransportError {
    /// No headers, or no next chunk, within the request timeout.
    Timeout,
    /// Connection failed or broke.
    Network(String),
    /// The run was aborted.
    Aborted,
}

impl From<TransportError> for ProviderError {
    fn from(e: TransportError) -> Self {
        match e {
            TransportError::Timeout => ProviderError::Timeout,
            TransportError::Network(m) => ProviderError::Network(m),
            TransportError::Aborted => ProviderError::Network("the call was aborted".into()),
        }
    }
}

/// A response whose body arrives in chunks.
pub struct HttpResponse {
    /// Status code.
    pub status: u16,
    /// Headers, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Box<dyn BodyStream>,
}

impl HttpResponse {
    /// A header's value (names compare case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Body chunks as they arrive.
pub trait BodyStream {
    /// The next chunk; `None` at the end.
    fn next(&mut self) -> LocalBoxFuture<'_, Option<Result<Vec<u8>, TransportError>>>;
    /// Told once the answer is complete (its terminal event read), before the body is
    /// dropped: a body whose end has already arrived can let its request go instead of
    /// cancelling it. Nothing by default.
    fn finished(&mut self) -> LocalBoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

/// What the caller supplies: HTTP, a timer, a clock, randomness and a log.
pub trait Transport {
    /// Sends `request`; the timeout applies to the headers and to each body chunk.
    fn send<'a>(
        &'a self,
        request: &'a HttpRequest,
        timeout: Duration,
    ) -> LocalBoxFuture<'a, Result<HttpResponse, TransportError>>;
    /// Waits `wait`.
    fn sleep(&self, wait: Duration) -> LocalBoxFuture<'_, ()>;
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
    /// A uniform random number in `[0, 1)`, for jitter.
    fn random(&self) -> f64;
    /// Notes something odd but harmless (an unknown stream event).
    fn warn(&self, message: &str);
    /// A debug line: `event` and its `detail` (what a call left out, say).
    fn debug(&self, _event: &str, _detail: &str) {}
}

#[cfg(test)]
mod tests {
    use super::secure_url;

    #[test]
    fn credentials_go_over_https_or_to_loopback_only() {
        for ok in [
            "https://as.example.com/token",
            "https://as.example.com",
            "http://127.0.0.1:8787/v1/mcp/callback",
            "http://localhost:9/x",
            "http://[::1]:443/",
            "http://localhost",
        ] {
            assert!(secure_url(ok), "{ok}");
        }
        for bad in [
            "http://as.example.com/token",
            "http://localhost:@evil.example/",
            "http://127.0.0.1:80@evil.example/",
            "https://user@as.example.com/",
            "http://127.0.0.1.evil.example/",
            "ftp://127.0.0.1/",
            "https://",
            "javascript:alert(1)",
        ] {
            assert!(!secure_url(bad), "{bad}");
        }
    }
}
